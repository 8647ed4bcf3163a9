package producer

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-kafka/longhaul/internal/broker"
)

// TestProduceFromCallbackDoesNotWaitForMemory: Produce's doc lets a
// callback call Produce. The bytes a Produce waits for are given back
// after callbacks run, on the callback goroutine, so a Produce called
// there that waited for buffer.memory waited for itself: the callback
// goroutine stopped, no buffer.memory came back, and (with a ctx that
// never ends) every callback, Flush and Close after it hung. Called from
// a callback, Produce now fails the record at once with ErrBufferFull, as
// TryProduce does, when buffer.memory is full; the caller may produce it
// again once its callback returned.
func TestProduceFromCallbackDoesNotWaitForMemory(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, n := memCluster(t, broker.Config{Topics: []broker.TopicConfig{{Name: "t", Partitions: 1}}})
		const budget = 16384
		p := memProducer(t, c, n, BufferMemory(budget), MaxRequestSize(budget), BatchSize(budget))
		require.NoError(t, p.ProduceSync(context.Background(), toPartition("t", 0, []byte("warm"))).FirstErr())

		var big *Record
		inner := make(chan error, 1)
		outer := make(chan error, 1)
		p.Produce(context.Background(), toPartition("t", 0, []byte("first")), func(_ *Record, err error) {
			outer <- err
			// This callback's batch holds its buffer.memory until the
			// callback returns: a record needing more than the rest
			// does not fit now, and fits alone.
			held := p.mem.Held()
			v := int(budget - held + 1)
			for big = toPartition("t", 0, make([]byte, v)); int64(recordMemory(big)) <= budget-held; big = toPartition("t", 0, make([]byte, v)) {
				v++
			}
			if int64(recordMemory(big)) > budget-61 {
				inner <- nil // cannot build the case; the check below fails
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			p.Produce(ctx, big, func(_ *Record, err error) { inner <- err })
		})
		require.NoError(t, <-outer)
		var err error
		select {
		case err = <-inner:
		case <-time.After(10 * time.Minute):
			t.Fatal("the record produced from the callback got no outcome")
		}
		require.NotNil(t, big)
		require.ErrorIs(t, err, ErrBufferFull, "Produce from a callback must not wait for bytes only callbacks give back")

		// Once the callback returned, the record fits.
		require.NoError(t, p.ProduceSync(context.Background(), toPartition("t", 0, big.Value)).FirstErr())
		require.Len(t, c.Records("t", 0), 3)
	})
}
