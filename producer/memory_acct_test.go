package producer

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/longhaul-kafka/longhaul/internal/broker"
)

// openBatchMemory produces one 100-byte record to each of 200 partitions,
// seals their batches and returns, before the sender takes them, the
// buffer.memory held and the sum of their buffers' capacities.
func openBatchMemory(t *testing.T, bytesOnly bool) (held, capacity int64) {
	const parts = 200
	synctest.Test(t, func(t *testing.T) {
		c, n := memCluster(t, broker.Config{Topics: []broker.TopicConfig{{Name: "t", Partitions: parts}}})
		p := memProducer(t, c, n, BatchSize(16384), Linger(10*time.Second), DeliveryTimeout(time.Minute),
			bug(t, recordBytesOnly, bytesOnly))
		value := make([]byte, 100)
		produceAll := func() {
			for part := range int32(parts) {
				r := &Record{Topic: "t", Value: value}
				r.SetPartition(part)
				p.Produce(t.Context(), r, nil)
			}
		}
		produceAll() // the first records wait for metadata
		require.NoError(t, p.Flush(t.Context()))
		produceAll()
		// No require under p.acc.mu: a failure would leave it locked.
		open, underHeld := 0, 0
		p.acc.mu.Lock()
		for _, tp := range p.acc.topics {
			for _, pb := range tp.bufs {
				if pb.open == nil {
					continue
				}
				open++
				if pb.open.memory < int64(pb.open.builder.Cap()) {
					underHeld++
				}
				p.sealLocked(pb) // settles: from now on exactly its capacity
				capacity += int64(pb.sealed[len(pb.sealed)-1].builder.Cap())
			}
		}
		held = p.mem.Held()
		p.acc.mu.Unlock()
		require.Equal(t, parts, open, "every partition has its open batch")
		if !bytesOnly {
			require.Zero(t, underHeld, "an open batch holds at least its buffer's capacity")
		}
		t.Logf("%d sealed batches of one 100-byte record: buffer.memory held %d, buffer capacity %d", parts, held, capacity)
		require.NoError(t, p.Flush(t.Context()))
		require.Zero(t, p.mem.Held(), "everything released once called back")
		require.True(t, memoryReleased(p))
	})
	return held, capacity
}

// TestBufferMemoryCountsBufferCapacity: buffer.memory counts what the
// batches really hold, their buffers' capacity, and a batch of one record
// holds a buffer sized to it, not batch.size (issue 20: each batch reserved
// 16 KiB up front and only record bytes were counted; 700-1 040 MiB of heap
// at 10 000 keyed partitions). The negative control counts record bytes
// only, as before.
func TestBufferMemoryCountsBufferCapacity(t *testing.T) {
	held, capacity := openBatchMemory(t, false)
	require.Equal(t, capacity, held, "buffer.memory held equals the sealed batches' capacity")
	require.LessOrEqual(t, capacity, int64(200*1024), "one small record holds about 1 KiB, not batch.size")
}

func TestBufferMemoryCountsBufferCapacityNegativeControl(t *testing.T) {
	needRegress(t)
	held, capacity := openBatchMemory(t, true)
	require.NotEqual(t, capacity, held, "counting record bytes only misses the buffers' capacity")
}

// TestBatchBufferGrowsByDoubling: a batch filled record by record to
// batch.size grows its buffer a few times (doubling), never past what one
// batch may hold.
func TestBatchBufferGrowsByDoubling(t *testing.T) {
	b := &batch{}
	limit := 16384
	var caps []int
	for b.builder.EncodedLen()+120 <= limit-61 {
		growFor(b, 120, limit)
		if c := b.builder.Cap(); len(caps) == 0 || c != caps[len(caps)-1] {
			caps = append(caps, c)
		}
		b.builder.Append(0, nil, make([]byte, 100), nil)
	}
	require.Equal(t, 512, caps[0], "the first record gets 512 B, not batch.size")
	for i := 1; i < len(caps); i++ {
		require.LessOrEqual(t, caps[i], 2*caps[i-1], "each growth at most doubles: %v", caps)
	}
	require.GreaterOrEqual(t, len(caps), 5, "512 B to 16 KiB in doublings: %v", caps)
	require.LessOrEqual(t, len(caps), 7, "512 B doubling to 16 KiB: six growths")
	require.LessOrEqual(t, b.builder.Cap(), limit, "never past the batch's limit")
}

// TestSmallBatchesTakeNoLargePooledBuffer: batches recycled with
// batch.size buffers are not handed to a partition whose last batch was
// small (its first record would hold 16 KiB of buffer.memory), and are to
// one whose last batch was large.
func TestSmallBatchesTakeNoLargePooledBuffer(t *testing.T) {
	for range 20 {
		b := &batch{}
		b.builder.GrowCap(16384)
		for range 100 {
			b.builder.Append(0, nil, make([]byte, 100), nil)
		}
		b.recycle()
	}
	small := &partBuf{ps: &partitionState{}}
	for range 20 {
		b := newBatch(small, time.Now(), 1<<20)
		require.LessOrEqual(t, b.builder.Cap(), keepBuffer, "a small partition took a large pooled buffer")
		b.recycle()
	}
	big := &partBuf{ps: &partitionState{}, bigBatches: true}
	got := 0
	for range 20 {
		b := newBatch(big, time.Now(), 1<<20)
		if b.builder.Cap() > keepBuffer {
			got++
		}
	}
	// sync.Pool may drop items (always possible, often under -race), so
	// only "some" is certain.
	assert.Positive(t, got, "a partition filling large batches reuses large buffers")
}

// TestRecycleTrimsHalfEmptyLargeBuffers: a pooled batch keeps a buffer it
// used at least half of, or a small one (up to keepBuffer), and drops a
// large one it used less than half of.
func TestRecycleTrimsHalfEmptyLargeBuffers(t *testing.T) {
	fill := func(capacity, records int) *batch {
		b := &batch{}
		b.builder.GrowCap(capacity)
		for range records {
			b.builder.Append(0, nil, make([]byte, 100), nil)
		}
		b.trimBuffer()
		return b
	}
	require.Equal(t, 16384, fill(16384, 100).builder.Cap(), "more than half used: kept")
	require.Equal(t, 0, fill(16384, 10).builder.Cap(), "large, less than half used: dropped")
	require.Equal(t, 4096, fill(4096, 1).builder.Cap(), "small: kept")
}
