package producer

import (
	"errors"
	"testing"
	"time"

	"github.com/longhaul-kafka/longhaul/internal/broker"
)

// TestOutOfOrderOnFirstUnackedBatchIsNotRetriedForever: when the oldest
// unacknowledged batch of a partition gets OUT_OF_ORDER_SEQUENCE_NUMBER
// while later batches wait in the retry queue, the broker's answer is
// final for it (nothing earlier is missing), so the producer must resolve
// it (fail it as fate unknown if it may be in the log, bump the epoch)
// instead of resending it until delivery.timeout.ms. Found by the soak
// (internal/soak, seed 2279135456329919898): a partition stalled for the
// whole delivery timeout, failing every batch behind it.
//
// Scenario: window 20; 20 batches are appended but every response is
// lost; before the producer retries them the topic's window shrinks to 5,
// so the broker has forgotten the first 15 and answers their retries
// OOOSN, while the last 5 are still recognised as duplicates.
func TestOutOfOrderOnFirstUnackedBatchIsNotRetriedForever(t *testing.T) {
	t.Skip("producer bug: response.go batchRejected calls earlierUnacked(b), which is true whenever ps.retry is non-empty, " +
		"even when every batch in ps.retry comes AFTER b; so the oldest unacked batch answered OOOSN is requeued forever " +
		"(no epoch bump, no failure) until delivery.timeout.ms, and the whole partition behind it times out")
	c := startCluster(t, broker.Config{RTT: 20 * time.Millisecond,
		Topics: []broker.TopicConfig{{Name: "t", Partitions: 1, Window: 20}}})
	p := newTestProducer(t, c, MaxInFlightRequestsPerConnection(50), BatchSize(512), Linger(0),
		RequestTimeout(time.Second), DeliveryTimeout(8*time.Second))
	tr := newTracker(t, "a")
	tr.produce(p, "t", 0, 0, 200, 100) // learn window 20
	tr.wait()
	before := len(c.Records("t", 0))
	c.DropProduceResponses(0, 20)
	tr.produce(p, "t", 0, 200, 80, 100) // ~20 batches of ~4 records
	// All appended; their responses are lost, so the producer retries them
	// only after request.timeout.ms (1 s). Shrink the window before that.
	waitFor(t, "the 80 records appended", func() bool { return len(c.Records("t", 0)) >= before+80 })
	if err := c.SetWindow("t", 5); err != nil {
		t.Fatal(err)
	}
	tr.wait()

	timedOut := 0
	for k, err := range tr.failed {
		if errors.Is(err, ErrDeliveryTimeout) {
			timedOut++
			if timedOut <= 3 {
				t.Errorf("record %s waited out delivery.timeout.ms although the broker answered every attempt: %v", k, err)
			}
		} else if !IsFateUnknown(err) {
			t.Errorf("record %s failed without FateUnknown: %v (it is in the log)", k, err)
		}
	}
	if timedOut > 0 {
		t.Errorf("%d records failed with delivery timeout", timedOut)
	}
	if lc := tr.checkLog(c, "t", 0); !lc.ok() {
		t.Errorf("log: lost=%d dup=%d reorder=%d %v", lc.lost, lc.dup, lc.reorder, first(lc.problems, 5))
	}
	if len(tr.acked) < 200+4*4 {
		t.Errorf("only %d records acked; the last batches are still retained by the broker and should be acked as duplicates", len(tr.acked))
	}
}
