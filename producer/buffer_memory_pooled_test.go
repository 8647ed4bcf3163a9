package producer

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-kafka/longhaul/internal/broker"
)

// TestBufferMemoryBoundWithPooledBuffers checks memBudget's "Force takes
// the growth at once, past the limit if need be, and the next releases pay
// that back before Produce may acquire again" where it matters: batches
// that take pooled buffers larger than their records (left by another
// producer in this process) force their capacity past buffer.memory, and
// Produce must then accept nothing until acknowledgements pay it back, so
// the bytes held stay within buffer.memory plus one buffer (keepBuffer,
// the largest pooled). Negative control (memBudget.regressForceKeepsFree):
// a Force that owes everything when it does not fit, leaving the free
// bytes to Produce, let the producer accept records to several times
// buffer.memory.
func TestBufferMemoryBoundWithPooledBuffers(t *testing.T) {
	const limit = 8192
	for _, keepsFree := range []bool{false, true} {
		t.Run(map[bool]string{false: "fixed", true: "negative-control"}[keepsFree], func(t *testing.T) {
			// Only these buffers in the pool: empty it first (once it is,
			// Get returns a new batch, with no buffer, every time).
			for fresh := 0; fresh < 64; {
				if smallBatches.Get().(*batch).builder.Cap() == 0 {
					fresh++
				} else {
					fresh = 0
				}
			}
			for range 64 {
				b := new(batch)
				b.builder.GrowCap(2848) // a small pooled buffer, well above this test's 512-byte batches
				smallBatches.Put(b)
			}
			synctest.Test(t, func(t *testing.T) {
				c, n := memCluster(t, broker.Config{Topics: []broker.TopicConfig{{Name: "t", Partitions: 1}}})
				p := memProducer(t, c, n, BufferMemory(limit), DeliveryTimeout(2*time.Hour), RequestTimeout(time.Hour))
				p.mem.regressForceKeepsFree = keepsFree
				ctx := context.Background()
				require.NoError(t, p.ProduceSync(ctx, toPartition("t", 0, []byte("warm"))).FirstErr(), "topic known")

				c.Stall(0, time.Minute)
				var most int64
				full := false
				for i := 0; i < 1000 && !full; i++ {
					errc := make(chan error, 1)
					p.TryProduce(toPartition("t", 0, make([]byte, 100)), func(_ *Record, err error) {
						if err == ErrBufferFull {
							errc <- err
						}
					})
					synctest.Wait()
					most = max(most, p.mem.Held())
					select {
					case <-errc:
						full = true
					default:
					}
				}
				require.True(t, full, "buffer.memory filled")
				if keepsFree {
					require.Greater(t, most, int64(limit+keepBuffer), "negative control: Produce took free bytes while the budget was past its limit")
				} else {
					require.LessOrEqual(t, most, int64(limit+keepBuffer), "bytes held past buffer.memory plus one buffer")
				}
				require.NoError(t, p.Flush(ctx), "the accepted records are delivered once the broker answers")
				require.Zero(t, p.mem.Held(), "every byte comes back")
			})
		})
	}
}
