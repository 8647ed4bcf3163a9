package clitest

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCancelOnWrite shows the context stays live until a write contains
// the wanted text, is cancelled by that write, and every write is kept.
func TestCancelOnWrite(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := NewCancelOnWrite("go", cancel)
	fmt.Fprint(w, "ready, ")
	require.NoError(t, ctx.Err())
	fmt.Fprint(w, "set, go")
	require.ErrorIs(t, ctx.Err(), context.Canceled)
	assert.Equal(t, "ready, set, go", w.String())
}
