package producer

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-kafka/longhaul/internal/broker"
)

// TestMaxBlockDoesNotBoundMemoryWait checks MaxBlock's "It does not bound
// Produce's wait for buffer.memory: Produce's context does": with
// buffer.memory full (the broker holds every answer, every batch is
// sealed, and a record of the same size was refused) and max.block.ms at
// 10 ms, Produce waits for room until its context ends, 2 s later, and
// the record fails with the context's error, not ErrTopicMetadata; the
// records already accepted are unaffected and delivered once the broker
// answers.
func TestMaxBlockDoesNotBoundMemoryWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, n := memCluster(t, broker.Config{Topics: []broker.TopicConfig{{Name: "t", Partitions: 1}}})
		p := memProducer(t, c, n, MaxBlock(10*time.Millisecond), BufferMemory(8192), DeliveryTimeout(2*time.Hour), RequestTimeout(time.Hour))
		ctx := context.Background()
		require.NoError(t, p.ProduceSync(ctx, toPartition("t", 0, []byte("warm"))).FirstErr(), "topic known")

		c.Stall(0, time.Minute)
		// Fill buffer.memory with records the size of the one that will
		// wait: a refused larger record would not mean a smaller one
		// cannot fit. A refusal while a batch is open is not proof either:
		// sealing it after linger.ms settles its memory to its buffer's
		// capacity and may give bytes back. So on a refusal wait out
		// linger.ms and try again: buffer.memory is full when a record is
		// refused with every batch sealed and nothing answered.
		tryFill := func() (refused bool) {
			errc := make(chan error, 1)
			p.TryProduce(toPartition("t", 0, []byte("fills")), func(_ *Record, err error) {
				if err == ErrBufferFull {
					errc <- err
				}
			})
			synctest.Wait()
			select {
			case <-errc:
				return true
			default:
				return false
			}
		}
		full := false
		for i := 0; i < 10000 && !full; i++ {
			if tryFill() {
				time.Sleep(10 * time.Millisecond) // linger.ms is 1 ms (memProducer)
				synctest.Wait()
				full = tryFill()
			}
		}
		require.True(t, full, "buffer.memory filled")

		wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		start := time.Now()
		got := make(chan error, 1)
		p.Produce(wctx, toPartition("t", 0, []byte("waits")), func(_ *Record, err error) { got <- err })
		waited := time.Since(start)
		err := <-got
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.NotErrorIs(t, err, ErrTopicMetadata)
		require.Equal(t, 2*time.Second, waited, "Produce waited for its context, not max.block.ms")
		require.NoError(t, p.Flush(ctx), "the accepted records are delivered once the broker answers")
	})
}
