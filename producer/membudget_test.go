package producer

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMemBudgetForcedBytesArePaidBackFirst: bytes forced past the limit
// are paid back by the next releases before anything can be acquired
// again (memBudget's doc).
func TestMemBudgetForcedBytesArePaidBackFirst(t *testing.T) {
	m := newMemBudget(100)
	require.NoError(t, m.Acquire(context.Background(), 100))
	m.Force(50) // 50 past the limit
	assert.Equal(t, int64(150), m.Held())
	m.Release(30)
	assert.False(t, m.TryAcquire(1), "20 still owed")
	m.Release(40) // pays the last 20, frees 20
	assert.True(t, m.TryAcquire(20))
	assert.False(t, m.TryAcquire(1))
	assert.Equal(t, int64(100), m.Held())
}
