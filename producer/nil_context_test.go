package producer

import (
	"context"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/longhaul-kafka/longhaul/internal/broker"
)

// TestNilContextPanics: Produce, ProduceSync and Flush panic at once on a
// nil ctx, with a message naming it, before taking any record or sealing
// any batch (the docs' promise); the producer goes on as before.
func TestNilContextPanics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, n := memCluster(t, broker.Config{Topics: []broker.TopicConfig{{Name: "t", Partitions: 1}}})
		p := memProducer(t, c, n)
		var nilCtx context.Context
		called := false
		assert.PanicsWithValue(t, "producer: nil Context", func() {
			p.Produce(nilCtx, &Record{Topic: "t", Value: []byte("a")}, func(*Record, error) { called = true })
		})
		assert.PanicsWithValue(t, "producer: nil Context", func() {
			p.Produce(nilCtx, nil, func(*Record, error) { called = true })
		}, "a nil record too: the context is checked first")
		assert.PanicsWithValue(t, "producer: nil Context", func() {
			p.ProduceSync(nilCtx, &Record{Topic: "t", Value: []byte("b")})
		})
		assert.PanicsWithValue(t, "producer: nil Context", func() { _ = p.Flush(nilCtx) })
		synctest.Wait()
		assert.False(t, called, "no record was taken")
		st := p.Stats()
		assert.Zero(t, st.RecordsSent+st.RecordsFailed+st.BatchesSent)
		require.NoError(t, p.ProduceSync(t.Context(), &Record{Topic: "t", Value: []byte("c")})[0].Err)
		require.NoError(t, p.Flush(t.Context()))
		assert.Len(t, c.Records("t", 0), 1)
	})
}
