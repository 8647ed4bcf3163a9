package producer

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/longhaul-kafka/longhaul/internal/broker"
)

// batchSizes records every sent batch's wire size.
type batchSizes struct {
	mu    sync.Mutex
	bytes []int
	recs  []int
}

func (h *batchSizes) OnBatchSent(b BatchInfo) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.bytes = append(h.bytes, b.Bytes)
	h.recs = append(h.recs, b.Records)
}

// TestBatchSizeCountsTheHeader: batch.size bounds the whole RecordBatch,
// its 61-byte header included, as the Java client counts it (BatchSize's
// doc): full batches of 100-byte records are at most 16,384 bytes on the
// wire and as full as that allows, and a batch.size equal to the broker's
// max.message.bytes gives batches the broker takes at once (counted
// without the header, a full batch of 102- or 110-byte values was 5 or 43
// bytes too large: MESSAGE_TOO_LARGE, split, sent again).
func TestBatchSizeCountsTheHeader(t *testing.T) {
	for _, tc := range []struct {
		batchSize, records, value int
	}{{16384, 2000, 100}, {broker.DefaultMaxMessageBytes, 12000, 102}, {broker.DefaultMaxMessageBytes, 12000, 110}} {
		synctest.Test(t, func(t *testing.T) {
			c, n := memCluster(t, broker.Config{Topics: []broker.TopicConfig{{Name: "t", Partitions: 1, Window: 20}}})
			h := &batchSizes{}
			p := memProducer(t, c, n, BatchSize(tc.batchSize), Linger(time.Second), BufferMemory(64<<20),
				MaxRequestSize(4<<20), Hooks(h))
			value := make([]byte, tc.value)
			for range tc.records {
				r := &Record{Topic: "t", Value: value}
				r.SetPartition(0)
				p.Produce(context.Background(), r, func(_ *Record, err error) { assert.NoError(t, err) })
			}
			require.NoError(t, p.Flush(context.Background()))
			st := p.Stats()
			require.Zero(t, st.BatchesRetried, "no batch refused as too large")
			require.Equal(t, int64(tc.records), st.RecordsSent)
			h.mu.Lock()
			defer h.mu.Unlock()
			require.Greater(t, len(h.bytes), 1)
			full := h.bytes[:len(h.bytes)-1] // the last is what Flush sealed
			for i, b := range full {
				require.LessOrEqual(t, b, tc.batchSize, "batch %d", i)
				// One more record (its value and up to 12 B of framing)
				// would not have fitted.
				require.Greater(t, b+tc.value+12, tc.batchSize, "batch %d as full as batch.size allows", i)
			}
		})
	}
}

// TestRecordLargerThanBatchSizeGoesAlone: a record larger than batch.size
// is a batch of its own (BatchSize's doc), and the records around it batch
// as usual.
func TestRecordLargerThanBatchSizeGoesAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, n := memCluster(t, broker.Config{Topics: []broker.TopicConfig{{Name: "t", Partitions: 1, Window: 20}}})
		h := &batchSizes{}
		p := memProducer(t, c, n, BatchSize(1024), Linger(time.Second), Hooks(h))
		for _, size := range []int{100, 100, 3000, 100, 100} {
			r := &Record{Topic: "t", Value: make([]byte, size)}
			r.SetPartition(0)
			p.Produce(context.Background(), r, func(_ *Record, err error) { assert.NoError(t, err) })
		}
		require.NoError(t, p.Flush(context.Background()))
		h.mu.Lock()
		defer h.mu.Unlock()
		require.Equal(t, []int{2, 1, 2}, h.recs)
		require.Greater(t, h.bytes[1], 3000)
	})
}

// TestStickyMoveKeepsBatchBound: when the sticky partition moves before a
// keyless record is placed, the partition it moves to may hold a partly
// filled batch (of keyed or fixed-partition records); the record still
// goes in only if it fits, so no batch of two or more records passes
// batch.size (here also max.request.size).
func TestStickyMoveKeepsBatchBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, n := memCluster(t, broker.Config{Topics: []broker.TopicConfig{{Name: "t", Partitions: 2, Window: 20}}})
		h := &batchSizes{}
		p := memProducer(t, c, n, BatchSize(1024), MaxRequestSize(1024), Linger(5*time.Millisecond), Hooks(h))
		require.NoError(t, p.ProduceSync(context.Background(), toPartition("t", 0, []byte("metadata"))).FirstErr())
		ok := func(_ *Record, err error) { assert.NoError(t, err) }
		keyless := func() { p.Produce(context.Background(), &Record{Topic: "t", Value: make([]byte, 200)}, ok) }
		// Two lingered batches of three keyless records: batch.size bytes
		// went to the sticky partition, neither batch was full, so it is
		// due and has no open batch.
		for range 2 {
			for range 3 {
				keyless()
			}
			time.Sleep(20 * time.Millisecond)
		}
		p.acc.mu.Lock()
		st := p.acc.topics["t"].sticky
		p.acc.mu.Unlock()
		require.True(t, st.due(1024))
		other := 1 - st.current
		for range 4 { // 840 bytes of the other partition's 963
			p.Produce(context.Background(), toPartition("t", other, make([]byte, 200)), ok)
		}
		keyless() // moves to other: does not fit its open batch
		require.NoError(t, p.Flush(context.Background()))
		h.mu.Lock()
		defer h.mu.Unlock()
		for i, b := range h.bytes {
			if h.recs[i] > 1 {
				assert.LessOrEqual(t, b, 1024, "batch %d of %d records", i, h.recs[i])
			}
		}
	})
}
