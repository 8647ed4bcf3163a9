package producer

import (
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/longhaul-kafka/longhaul/internal/broker"
)

// Exactly once, in order, under faults: every case reads the log back.

func TestExactlyOnceUnderFaults(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		fault func(c *broker.Cluster)
	}{
		{"dropped responses, appends kept", func(c *broker.Cluster) { c.DropProduceResponses(0, 7) }},
		{"connection killed after requests", func(c *broker.Cluster) { c.CloseAfterRequests(0, 3) }},
		{"connections dropped", func(c *broker.Cluster) { c.DropConnections(0) }},
		{"leader moved mid-flight", func(c *broker.Cluster) { c.MoveLeader("t", 0, 1) }},
		{"leader moved to an old node", func(c *broker.Cluster) { c.MoveLeader("t", 0, 2) }},
		{"node restarted", func(c *broker.Cluster) { c.RestartNode(0) }},
		{"retriable errors injected", func(c *broker.Cluster) {
			c.InjectError("t", 0, kerr.NotEnoughReplicas.Code, 4)
		}},
		{"not leader injected", func(c *broker.Cluster) { c.InjectError("t", 0, kerr.NotLeaderForPartition.Code, 3) }},
		{"producer ids expired between writes", func(c *broker.Cluster) { c.ExpireProducerIDs() }},
		{"out of order injected", func(c *broker.Cluster) {
			c.InjectError("t", 0, kerr.OutOfOrderSequenceNumber.Code, 1)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				c := virtualCluster(t, broker.Config{Nodes: 3, RTT: 10 * time.Millisecond, OldNodes: []int32{2},
					Topics: []broker.TopicConfig{{Name: "t", Partitions: 1, Window: 20}}})
				p := newTestProducer(t, c, MaxInFlightRequestsPerConnection(50), BatchSize(512), RequestTimeout(500*time.Millisecond))
				tr := newTracker(t, "a")
				tr.produce(p, "t", 0, 0, 500, 100)
				tr.wait()
				tr.produce(p, "t", 0, 500, 1000, 100)
				tc.fault(c)
				tr.produce(p, "t", 0, 1500, 1000, 100)
				tr.wait()
				tr.requireClean(t, c, "t", 0)
			})
		})
	}
}

// windowLossScenario fills a partition's learned window, makes the broker
// append every batch but lose every response, and lets the producer retry.
// It returns what the log and the broker saw.
func windowLossScenario(t *testing.T, topicWindow int, opts ...Opt) (lc logCheck, st broker.PartitionStats, tr *tracker) {
	synctest.Test(t, func(t *testing.T) {
		c := virtualCluster(t, broker.Config{RTT: 50 * time.Millisecond,
			Topics: []broker.TopicConfig{{Name: "t", Partitions: 1, Window: topicWindow}}})
		base := []Opt{MaxInFlightRequestsPerConnection(50), BatchSize(512), Linger(0), RequestTimeout(time.Second)}
		p := newTestProducer(t, c, append(base, opts...)...)
		tr = newTracker(t, "a")
		// Warm up: learn the window.
		tr.produce(p, "t", 0, 0, 200, 100)
		tr.wait()
		c.ResetStats()
		// 20 batches of ~4 records each go out back to back; the broker
		// appends them and drops all 20 responses.
		c.DropProduceResponses(0, 20)
		tr.produce(p, "t", 0, 200, 80, 100)
		tr.wait()
		lc, st = tr.checkLog(c, "t", 0), c.PartitionStats("t", 0)
	})
	return lc, st, tr
}

func TestWindow20AllResponsesLostDeduplicated(t *testing.T) {
	t.Parallel()
	lc, st, tr := windowLossScenario(t, 20)
	if !lc.ok() || len(lc.problems) > 0 {
		t.Errorf("log: lost=%d dup=%d reorder=%d %v", lc.lost, lc.dup, lc.reorder, first(lc.problems, 5))
	}
	if len(tr.failed) > 0 {
		t.Errorf("%d records failed, want none", len(tr.failed))
	}
	if st.MaxInFlight < 15 {
		t.Errorf("broker saw only %d batches in flight; the scenario needs a full window", st.MaxInFlight)
	}
	if st.Duplicates < 15 || st.OutOfOrder != 0 {
		t.Errorf("broker: duplicates=%d (want the lost batches recognised), OOOSN=%d (want 0)", st.Duplicates, st.OutOfOrder)
	}
}

// TestNegativeControlWindowCheckOff is the same scenario with the
// per-partition window check switched off (20 in flight against a topic
// that retains 5): the broker can no longer recognise the retries, and the
// checks above see it.
func TestNegativeControlWindowCheckOff(t *testing.T) {
	needRegress(t)
	t.Parallel()
	lc, st, tr := windowLossScenario(t, 5, fixedWindow(t, 20))
	broken := !lc.ok() || len(tr.failed) > 0 || st.OutOfOrder > 0
	if !broken {
		t.Fatalf("window check off, yet no duplicate, no OOOSN and no failure: the scenario cannot detect a window violation (max in flight %d)", st.MaxInFlight)
	}
	t.Logf("as expected with the check off: max in flight %d, OOOSN %d, dup %d, failed %d", st.MaxInFlight, st.OutOfOrder, lc.dup, len(tr.failed))
}

// idleExpiryScenario learns window 20, lets the partition sit idle past
// longhaul.idle.rearm.ms (1 s here), expires the producer id at the broker (KIP-854) and makes the
// first batch after the pause fail with a retriable error without being
// appended, while 80 records (~20 batches) are produced at once.
func idleExpiryScenario(t *testing.T, opts ...Opt) (*tracker, *broker.Cluster) {
	c := virtualCluster(t, broker.Config{RTT: 20 * time.Millisecond,
		Topics: []broker.TopicConfig{{Name: "t", Partitions: 1, Window: 20}}})
	const rearm = time.Second
	base := []Opt{MaxInFlightRequestsPerConnection(50), BatchSize(512), Linger(0), IdleRearm(rearm)}
	p := newTestProducer(t, c, append(base, opts...)...)
	tr := newTracker(t, "a")
	tr.produce(p, "t", 0, 0, 200, 100) // learn window 20
	tr.wait()
	time.Sleep(rearm + 200*time.Millisecond)
	c.ExpireProducerIDs()
	c.InjectError("t", 0, kerr.NotEnoughReplicas.Code, 1)
	tr.produce(p, "t", 0, 200, 80, 100)
	tr.wait()
	return tr, c
}

// TestIdlePartitionReArmsGate: after a partition sat idle past
// longhaul.idle.rearm.ms,
// the broker may have expired our state (KIP-854), so the next batch goes
// alone. Then a refused first batch is simply retried: nothing fails and
// nothing is reordered. TestExpiredStateThenRetriableErrorKeepsOrder is
// the variant without the pause: there the later batches are written first
// and the refused one must fail with ErrOrderLost.
func TestIdlePartitionReArmsGate(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		tr, c := idleExpiryScenario(t)
		tr.requireClean(t, c, "t", 0)
	})
}

// TestNegativeControlGateOff runs the same scenario with the first-batch
// gate switched off (a fixed window of 20, which also ignores the gate):
// the broker, holding no state, takes batch 1 before the refused batch 0,
// and the producer has to fail batch 0 with ErrOrderLost, which the clean
// check above would report.
func TestNegativeControlGateOff(t *testing.T) {
	needRegress(t)
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		tr, _ := idleExpiryScenario(t, fixedWindow(t, 20))
		orderLost := 0
		for _, err := range tr.failed {
			if errors.Is(err, ErrOrderLost) {
				orderLost++
			}
		}
		if orderLost == 0 {
			t.Fatalf("gate off, yet no record failed with ErrOrderLost (%d failed): the scenario cannot detect the trap", len(tr.failed))
		}
		t.Logf("as expected with the gate off: %d records failed with ErrOrderLost", orderLost)
	})
}
