package producer

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-kafka/longhaul/internal/broker"
)

// TestCallbackOrderCoversAcceptedRecordsOnly: Produce's doc promises
// callbacks in Produce order within each partition among the records
// Produce accepted, and leaves a refused record's callback in no set order
// with them. Records accepted to partition 0 wait in flight (the broker
// stalls) while Close begins; a record then produced to partition 0 is
// refused with a bare ErrClosed and called back before the accepted ones,
// which are called back, delivered, in Produce order. (The order of
// accepted records under faults is TestMixedFaultCallbacksInOrderAfterLostResponse's,
// with its negative control callbacksUnordered.)
func TestCallbackOrderCoversAcceptedRecordsOnly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, n := memCluster(t, broker.Config{Topics: []broker.TopicConfig{{Name: "t", Partitions: 1}}})
		p := memProducer(t, c, n)
		require.NoError(t, p.ProduceSync(context.Background(), toPartition("t", 0, []byte("warm"))).FirstErr())

		var (
			mu    sync.Mutex
			order []string
			errs  = map[string]error{}
		)
		cb := func(name string) Callback {
			return func(_ *Record, err error) {
				mu.Lock()
				defer mu.Unlock()
				order = append(order, name)
				errs[name] = err
			}
		}
		c.Stall(0, time.Second)
		accepted := []string{"a0", "a1", "a2", "a3", "a4"}
		for _, name := range accepted {
			p.Produce(context.Background(), toPartition("t", 0, []byte(name)), cb(name))
		}
		closed := make(chan error, 1)
		go func() { closed <- p.Close(context.Background()) }()
		synctest.Wait() // Close has begun: it waits for the stalled records
		require.True(t, p.closing.Load())
		p.Produce(context.Background(), toPartition("t", 0, []byte("refused")), cb("refused"))
		require.NoError(t, <-closed)

		mu.Lock()
		defer mu.Unlock()
		require.Equal(t, append([]string{"refused"}, accepted...), order,
			"the refused record is called back before the records of its partition accepted earlier; those keep Produce order")
		require.ErrorIs(t, errs["refused"], ErrClosed)
		var de *DeliveryError
		require.False(t, errors.As(errs["refused"], &de), "refused, not sent: a bare ErrClosed")
		for _, name := range accepted {
			require.NoError(t, errs[name], name)
		}
		require.Len(t, c.Records("t", 0), 1+len(accepted))
	})
}
