package kafkatest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/longhaul-kafka/longhaul/producer"
)

// tooLargeCount counts attempts Kafka refused as MESSAGE_TOO_LARGE and the
// sizes of the batches it wrote.
type tooLargeCount struct {
	mu      sync.Mutex
	refused int
	written []int
}

func (h *tooLargeCount) OnBatchRejected(_ producer.BatchInfo, err error, _ bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if errors.Is(err, kerr.MessageTooLarge) {
		h.refused++
	}
}

func (h *tooLargeCount) OnBatchAcked(b producer.BatchInfo, _ int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.written = append(h.written, b.Bytes)
}

// TestTopicBatchLimitOnKafka: on Kafka 4.4, a topic created with
// max.message.bytes=16384 and a producer with batch.size 64 KiB. The first
// Flush's batches are refused (MESSAGE_TOO_LARGE) and split while the
// producer learns the limit; the nine later waves are built to fit and
// none is refused, their full batches near 16 KiB; every record is read
// back once, in order. A record too large for the topic is still sent, in
// a batch of its own, and fails with Kafka's MESSAGE_TOO_LARGE.
func TestTopicBatchLimitOnKafka(t *testing.T) {
	c := Start(t, Options{})
	c.CreateTopic(t, "small-batches", 1, 1, map[string]string{"max.message.bytes": "16384"})
	h := &tooLargeCount{}
	p := newLonghaul(t, c.Bootstrap(), nil, producer.BatchSize(64<<10), producer.Linger(time.Second), producer.Hooks(h))
	var want [][]byte
	firstWave := 0
	for wave := range 10 {
		for range 2000 {
			v := fmt.Appendf(nil, "%s%076d", value(len(want)), 0)
			want = append(want, v)
			r := &producer.Record{Topic: "small-batches", Value: v}
			r.SetPartition(0)
			p.Produce(context.Background(), r, func(_ *producer.Record, err error) {
				if err != nil {
					t.Errorf("record: %v", err)
				}
			})
		}
		if err := p.Flush(context.Background()); err != nil {
			t.Fatalf("Flush: %v", err)
		}
		h.mu.Lock()
		if wave == 0 {
			firstWave = h.refused
		}
		h.mu.Unlock()
	}
	h.mu.Lock()
	refused, written := h.refused, append([]int(nil), h.written...)
	h.mu.Unlock()
	t.Logf("refused as too large: %d, all in the first wave: %d; batches written: %d; the last ten: %v",
		refused, firstWave, len(written), written[len(written)-10:])
	if firstWave == 0 {
		t.Errorf("no batch of 64 KiB was refused: the topic's max.message.bytes is not in effect")
	}
	if refused != firstWave {
		t.Errorf("%d batches refused after the first wave", refused-firstWave)
	}
	for _, b := range written[len(written)-10 : len(written)-1] {
		if b > 16384 || b < 16384-16384/16-200 {
			t.Errorf("a full batch of %d bytes: want near the 16,384 limit", b)
		}
	}
	if err := CheckExactlyOnceInOrder(map[int32][][]byte{0: want}, c.Consume(t, "small-batches", len(want), time.Minute)); err != nil {
		t.Error(err)
	}
	err := p.ProduceSync(context.Background(), &producer.Record{Topic: "small-batches", Value: make([]byte, 20000)}).FirstErr()
	if !errors.Is(err, kerr.MessageTooLarge) {
		t.Errorf("a 20,000-byte record: %v, want MESSAGE_TOO_LARGE from Kafka", err)
	}
	t.Logf("a 20,000-byte record: %v", err)
}
