package producer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/longhaul-kafka/longhaul/internal/broker"
)

// sizeRefusals counts the attempts refused as too large, and keeps every
// written batch's size, in order.
type sizeRefusals struct {
	mu      sync.Mutex
	refused int
	written []int
}

func (h *sizeRefusals) OnBatchRejected(b BatchInfo, err error, _ bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if errors.Is(err, kerr.MessageTooLarge) {
		h.refused++
	}
}

func (h *sizeRefusals) OnBatchAcked(b BatchInfo, _ int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.written = append(h.written, b.Bytes)
}

func (h *sizeRefusals) counts() (int, []int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.refused, append([]int(nil), h.written...)
}

// TestTopicBatchLimitLearned: a topic whose max.message.bytes (16 KiB) is
// below batch.size (64 KiB) is split while the producer learns its limit
// (the first Flush's batches), and then gets batches that fit: no batch
// of the later nine waves of 2,000 records is refused (without the
// learning each wave's batches, 64 KiB, are all refused and split), the
// last wave's full batches are within a sixteenth of the limit, and
// every record is written once, in order.
func TestTopicBatchLimitLearned(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const limit = 16384
		c, n := memCluster(t, broker.Config{Topics: []broker.TopicConfig{{Name: "small", Partitions: 1, Window: 20, MaxMessageBytes: limit}}})
		h := &sizeRefusals{}
		p := memProducer(t, c, n, BatchSize(64<<10), Linger(time.Second), BufferMemory(8<<20), Hooks(h))
		value := make([]byte, 100)
		var sent int
		var firstWave int
		var lastWave []int
		for wave := range 10 {
			_, before := h.counts()
			for range 2000 {
				r := &Record{Topic: "small", Value: fmt.Appendf(value[:0], "%08d", sent)}
				r.Value = r.Value[:100]
				sent++
				p.Produce(context.Background(), r, func(_ *Record, err error) { assert.NoError(t, err) })
			}
			require.NoError(t, p.Flush(context.Background()))
			refused, written := h.counts()
			if wave == 0 {
				firstWave = refused
			}
			lastWave = written[len(before):]
		}
		refused, _ := h.counts()
		require.Positive(t, firstWave, "the first wave's batches are refused: the producer does not know the limit yet")
		assert.Equal(t, firstWave, refused, "after the first wave no batch is refused")
		full := lastWave[:len(lastWave)-1] // the last is what Flush sealed
		for _, b := range full {
			assert.LessOrEqual(t, b, limit)
			assert.Greater(t, b, limit-limit/limitClose-200, "batches are built near the limit (a record is about 110 bytes)")
		}
		recs := c.Records("small", 0)
		require.Len(t, recs, sent)
		for i, r := range recs {
			require.Equal(t, fmt.Sprintf("%08d", i), string(r.Value[:8]), "record %d", i)
		}
	})
}

// TestTopicRecordTooLargeSentAlone: a record larger than the limit a topic
// taught is not failed on the remembered answer (the limit may have been
// raised since): it goes in a batch of its own, and the broker's answer
// decides, twice here; a record that fits is written.
func TestTopicRecordTooLargeSentAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, n := memCluster(t, broker.Config{Topics: []broker.TopicConfig{{Name: "small", Partitions: 1, MaxMessageBytes: 4096}}})
		h := &sizeRefusals{}
		p := memProducer(t, c, n, Hooks(h))
		big := make([]byte, 5000)
		for i := range 2 {
			err := p.ProduceSync(context.Background(), &Record{Topic: "small", Value: big}).FirstErr()
			require.ErrorIs(t, err, kerr.MessageTooLarge, "refused by the broker")
			refused, _ := h.counts()
			require.Equal(t, i+1, refused, "sent")
		}
		require.NoError(t, p.ProduceSync(context.Background(), &Record{Topic: "small", Value: big[:3000]}).FirstErr())
		require.Len(t, c.Records("small", 0), 1)
	})
}

// TestBatchLimitTarget walks batchLimit's arithmetic: halfway between the
// largest written and the smallest refused batch, the largest written
// within a sixteenth, batch.size when nothing was refused, and everything
// forgotten when a batch as large as a refused one is written (the
// topic's limit went up) or after metadata.max.age.ms.
func TestBatchLimitTarget(t *testing.T) {
	fresh := func(int64) bool { return true }
	var l batchLimit
	got := func() int { n, _ := l.target(65536, fresh); return n }
	require.Equal(t, 65536, got())
	l.refusedBatch(65536, 0, time.Minute)
	require.Equal(t, 32767, got())
	l.refusedBatch(70000, 0, time.Minute) // larger than known: nothing new
	require.Equal(t, 32767, got())
	l.refusedBatch(16430, 0, time.Minute)
	require.Equal(t, 8214, got())
	l.written(8245, 0, time.Minute)
	require.Equal(t, 8245+(16429-8245)/2, got())
	l.written(15500, 0, time.Minute)
	require.Equal(t, 15500, got(), "within a sixteenth: no more probing")
	n, _ := l.target(4096, fresh)
	require.Equal(t, 4096, n, "never above batch.size")
	_, refused := l.target(65536, func(int64) bool { return false })
	require.Zero(t, refused, "a stale limit is not used")
	l.written(16430, 0, time.Minute)
	require.Equal(t, 65536, got(), "the limit went up")

	l.refusedBatch(20000, 0, time.Minute)
	l.written(9000, int64(2*time.Minute), time.Minute)
	require.Equal(t, 65536, got(), "forgotten after maxAge")
	l.refusedBatch(20000, 0, time.Minute)
	l.refusedBatch(30000, int64(2*time.Minute), time.Minute)
	require.Equal(t, 14999, got(), "a refusal after maxAge starts afresh")
	l.refusedBatch(10000, int64(2*time.Minute), time.Minute)
	l.written(12000, int64(2*time.Minute), time.Minute)
	require.Equal(t, 65536, got(), "written above the refused: the limit went up")
}
