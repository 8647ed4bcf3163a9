package producer

import (
	"context"
	"runtime/debug"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-kafka/longhaul/internal/broker"
)

// poolBuffers leaves only n batches with buffers of capacity size in the
// small pool: it empties the pool first (once it is, Get returns a new
// batch, with no buffer, every time). The garbage collector is off until
// t ends: two collections empty a sync.Pool, and a loaded machine (two
// -race runs of the package at once) collected them before the producer
// drew them, so the negative controls saw no pooled buffer and passed
// their bug.
func poolBuffers(t testing.TB, n, size int) {
	gc := debug.SetGCPercent(-1)
	t.Cleanup(func() { debug.SetGCPercent(gc) })
	for fresh := 0; fresh < 64; {
		if smallBatches.Get().(*batch).builder.Cap() == 0 {
			fresh++
		} else {
			fresh = 0
		}
	}
	for range n {
		b := new(batch)
		b.builder.GrowCap(size)
		smallBatches.Put(b)
	}
}

// TestBufferMemoryBoundWithPooledBuffers checks memBudget's "Force takes
// the growth at once, past the limit if need be, and the next releases pay
// that back before Produce may acquire again" where it matters: batches
// that take pooled buffers larger than their records (left by another
// producer in this process; linger.ms 0 seals each record's batch alone)
// force their capacity past buffer.memory, and Produce must then accept
// nothing until acknowledgements pay it back, so the bytes held stay
// within buffer.memory plus one buffer (keepBuffer, the largest pooled).
// Negative control (memBudget.regressForceKeepsFree): a Force that owes
// everything when it does not fit, leaving the free bytes to Produce, let
// the producer accept records to several times buffer.memory.
func TestBufferMemoryBoundWithPooledBuffers(t *testing.T) {
	const limit = 8192
	for _, keepsFree := range bugCases {
		t.Run(map[bool]string{false: "fixed", true: "negative-control"}[keepsFree], func(t *testing.T) {
			// A small pooled buffer, within this test's batch.size (a
			// larger one is dropped: TestPooledBufferAboveBatchSizeDropped),
			// well above its one-record batches.
			poolBuffers(t, 64, 2848)
			synctest.Test(t, func(t *testing.T) {
				c, n := memCluster(t, broker.Config{Topics: []broker.TopicConfig{{Name: "t", Partitions: 1}}})
				p := memProducer(t, c, n, BufferMemory(limit), DeliveryTimeout(2*time.Hour), RequestTimeout(time.Hour),
					BatchSize(4096), Linger(0))
				if keepsFree {
					needRegress(t)
					p.mem.regress.set(memForceKeepsFree)
				}
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

// TestPooledBufferAboveBatchSizeDropped: a producer of 512-byte batches
// in a process whose other producers pooled 4 KiB buffers drops those
// (newBatch): a batch holding one would count 4 KiB of buffer.memory for
// at most 512 bytes, and buffer.memory would fill with room no batch can
// use. With the broker stalled, the records buffered before buffer.memory
// is full hold at least half of it. Negative control
// (regress.pooledOversize): keeping the pooled buffers, they hold less
// than a quarter.
func TestPooledBufferAboveBatchSizeDropped(t *testing.T) {
	const limit = 8192
	for _, oversize := range bugCases {
		t.Run(map[bool]string{false: "fixed", true: "negative-control"}[oversize], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c, n := memCluster(t, broker.Config{Topics: []broker.TopicConfig{{Name: "t", Partitions: 3}}})
				p := memProducer(t, c, n, BufferMemory(limit), BatchSize(512), DeliveryTimeout(2*time.Hour), RequestTimeout(time.Hour),
					bug(t, pooledOversize, oversize))
				ctx := context.Background()
				require.NoError(t, p.ProduceSync(ctx, toPartition("t", 0, []byte("warm"))).FirstErr(), "topic known")
				poolBuffers(t, 64, keepBuffer)
				c.Stall(0, time.Minute)
				records := 0
				for i := 0; i < 1000; i++ {
					var full atomic.Bool
					r := toPartition("t", int32(i%3), make([]byte, 100))
					p.TryProduce(r, func(_ *Record, err error) { full.Store(err == ErrBufferFull) })
					synctest.Wait()
					if full.Load() {
						break
					}
					records += recordMemory(r)
				}
				t.Logf("records of %d bytes buffered before buffer.memory %d was full", records, limit)
				if oversize {
					require.Less(t, records, limit/4, "negative control: the batches held 4 KiB buffers")
				} else {
					require.GreaterOrEqual(t, records, limit/2, "buffer.memory held room no batch could use")
				}
				require.NoError(t, p.Flush(ctx), "the accepted records are delivered once the broker answers")
				require.Zero(t, p.mem.Held(), "every byte comes back")
			})
		})
	}
}

// TestWaitingRecordsStayWithinBufferMemory: records produced before their
// topic's metadata wait, and are placed all at once when it comes, where
// no batch can wait for buffer.memory; each holds its share of the batch
// buffers it will need from Produce on (waitingExtra), so placing 1,000
// keyed records over 300 partitions (a batch each), with 4 KiB buffers
// pooled, holds no more than buffer.memory plus one buffer. Negative
// control (regress.waitingNoExtra): holding only their sizes, and taking
// the pooled buffers, they held many times buffer.memory (chaos seeds
// 2801, 2992, 3591, 4544 with 4 KiB buffers pooled).
func TestWaitingRecordsStayWithinBufferMemory(t *testing.T) {
	const limit, parts = 65536, 300
	for _, noExtra := range bugCases {
		t.Run(map[bool]string{false: "fixed", true: "negative-control"}[noExtra], func(t *testing.T) {
			poolBuffers(t, 400, keepBuffer) // within batch.size: kept (TestPooledBufferAboveBatchSizeDropped)
			synctest.Test(t, func(t *testing.T) {
				// A round trip of 5 ms: the records below, produced
				// without a pause, all wait for the topic's metadata.
				c, n := memCluster(t, broker.Config{RTT: 5 * time.Millisecond, Topics: []broker.TopicConfig{{Name: "t", Partitions: parts}}})
				p := memProducer(t, c, n, BufferMemory(limit), BatchSize(16384),
					bug(t, waitingNoExtra, noExtra))
				var full atomic.Int32
				for i := range 1000 {
					p.TryProduce(toPartition("t", int32(i%parts), make([]byte, 100)), func(_ *Record, err error) {
						if err == ErrBufferFull {
							full.Add(1)
						}
					})
				}
				p.acc.mu.Lock()
				waiting := len(p.acc.topics["t"].waiting)
				p.acc.mu.Unlock()
				var most int64
				for range 200 { // 20 ms: the metadata, the placing, the first answers
					most = max(most, p.mem.Held())
					time.Sleep(100 * time.Microsecond)
				}
				t.Logf("%d records waited; held at most %d bytes of buffer.memory %d", waiting, most, limit)
				require.Positive(t, full.Load(), "buffer.memory filled")
				require.Greater(t, waiting, 50, "the records waited for the topic's metadata")
				if noExtra {
					require.Greater(t, most, int64(3*limit), "negative control: a batch buffer each, forced past buffer.memory")
				} else {
					require.LessOrEqual(t, most, int64(limit+keepBuffer), "bytes held past buffer.memory plus one buffer")
				}
				require.NoError(t, p.Flush(context.Background()))
				require.Zero(t, p.mem.Held(), "every byte comes back")
			})
		})
	}
}
