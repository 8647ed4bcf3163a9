package producer

import (
	"testing"
	"time"

	"github.com/longhaul-kafka/longhaul/internal/broker"
)

// The KIP-1269 test plan (seeds/000_...), end to end against the embedded
// broker: the producer learns each partition's window from ProduceResponse
// and the broker never sees more batches of a partition in flight than it
// retains.

// pump produces n records of size bytes to topic/partition and waits.
func pump(t *testing.T, p *Producer, tr *tracker, topic string, partition int32, start, n, size int) {
	t.Helper()
	tr.produce(p, topic, partition, start, n, size)
	tr.wait()
}

func TestLearnsWindowAndFillsPipe(t *testing.T) {
	c := startCluster(t, broker.Config{RTT: 50 * time.Millisecond,
		Topics: []broker.TopicConfig{{Name: "w20", Partitions: 1, Window: 20}}})
	p := newTestProducer(t, c, MaxInFlightRequestsPerConnection(50), BatchSize(1024))
	if got := p.InFlightLimit("w20", 0); got != 5 {
		t.Fatalf("limit before any response = %d, want 5", got)
	}
	tr := newTracker(t, "a")
	// 100-byte records in 1 KiB batches: ~300 batches, far more than 20
	// round trips' worth, so the window must fill.
	pump(t, p, tr, "w20", 0, 0, 3000, 100)
	if got := p.InFlightLimit("w20", 0); got != 20 {
		t.Errorf("learned limit = %d, want 20", got)
	}
	st := c.PartitionStats("w20", 0)
	if st.MaxInFlight != 20 {
		t.Errorf("broker saw at most %d batches in flight, want exactly 20 (pipe full, never above)", st.MaxInFlight)
	}
	if st.OutOfOrder != 0 {
		t.Errorf("broker answered OOOSN %d times", st.OutOfOrder)
	}
	tr.requireClean(t, c, "w20", 0)
}

func TestTwoTopicsWindowsIndependent(t *testing.T) {
	c := startCluster(t, broker.Config{RTT: 30 * time.Millisecond, Topics: []broker.TopicConfig{
		{Name: "w5", Partitions: 1, Window: 5}, {Name: "w20", Partitions: 1, Window: 20}}})
	p := newTestProducer(t, c, MaxInFlightRequestsPerConnection(50), BatchSize(1024))
	tr := newTracker(t, "a")
	tr.produce(p, "w5", 0, 0, 2000, 100)
	tr.produce(p, "w20", 0, 0, 2000, 100)
	tr.wait()
	for _, tc := range []struct {
		topic string
		want  int
	}{{"w5", 5}, {"w20", 20}} {
		if got := p.InFlightLimit(tc.topic, 0); got != tc.want {
			t.Errorf("%s: limit %d, want %d", tc.topic, got, tc.want)
		}
		if got := c.PartitionStats(tc.topic, 0).MaxInFlight; got != tc.want {
			t.Errorf("%s: broker max in flight %d, want %d", tc.topic, got, tc.want)
		}
		tr.requireClean(t, c, tc.topic, 0)
	}
}

func TestConnectionCapBelowWindow(t *testing.T) {
	// max.in.flight=1 with window 20: at most 1 per partition.
	c := startCluster(t, broker.Config{RTT: 20 * time.Millisecond,
		Topics: []broker.TopicConfig{{Name: "w20", Partitions: 3, Window: 20}}})
	p := newTestProducer(t, c, MaxInFlightRequestsPerConnection(1), BatchSize(1024))
	tr := newTracker(t, "a")
	for part := int32(0); part < 3; part++ {
		tr.produce(p, "w20", part, 0, 300, 100)
	}
	tr.wait()
	for part := int32(0); part < 3; part++ {
		if got := c.PartitionStats("w20", part).MaxInFlight; got != 1 {
			t.Errorf("partition %d: broker max in flight %d, want 1", part, got)
		}
		tr.requireClean(t, c, "w20", part)
	}
}

func TestWindowBelowConnectionCap(t *testing.T) {
	// max.in.flight=20 with window 5: at most 5 per partition, and no
	// error for a cap above 5 with idempotence.
	c := startCluster(t, broker.Config{RTT: 30 * time.Millisecond,
		Topics: []broker.TopicConfig{{Name: "w5", Partitions: 1, Window: 5}}})
	p := newTestProducer(t, c, MaxInFlightRequestsPerConnection(20), BatchSize(1024))
	tr := newTracker(t, "a")
	pump(t, p, tr, "w5", 0, 0, 1500, 100)
	if got := c.PartitionStats("w5", 0).MaxInFlight; got != 5 {
		t.Errorf("broker max in flight %d, want 5", got)
	}
	tr.requireClean(t, c, "w5", 0)
}

func TestOldBrokerStaysAtFive(t *testing.T) {
	c := startCluster(t, broker.Config{RTT: 30 * time.Millisecond, OldNodes: []int32{0},
		Topics: []broker.TopicConfig{{Name: "w20", Partitions: 1, Window: 20}}})
	p := newTestProducer(t, c, MaxInFlightRequestsPerConnection(50), BatchSize(1024))
	tr := newTracker(t, "a")
	pump(t, p, tr, "w20", 0, 0, 1500, 100)
	if got := p.InFlightLimit("w20", 0); got != 5 {
		t.Errorf("limit %d against an old broker, want 5", got)
	}
	if got := c.PartitionStats("w20", 0).MaxInFlight; got != 5 {
		t.Errorf("broker max in flight %d, want 5", got)
	}
	tr.requireClean(t, c, "w20", 0)
}

// TestLeaderChangeResetsAndRelearns moves a partition from a new broker to
// another new broker, then to an old one: each move drops the limit to 5
// (checked while the new leader is stalled, so nothing can be learned yet)
// and the limit is learned again from the new leader's responses.
func TestLeaderChangeResetsAndRelearns(t *testing.T) {
	c := startCluster(t, broker.Config{Nodes: 3, RTT: 20 * time.Millisecond, OldNodes: []int32{2},
		Topics: []broker.TopicConfig{{Name: "w20", Partitions: 1, Window: 20}}})
	p := newTestProducer(t, c, MaxInFlightRequestsPerConnection(50), BatchSize(1024), RequestTimeout(10*time.Second))
	tr := newTracker(t, "a")
	pump(t, p, tr, "w20", 0, 0, 1500, 100)
	if got := p.InFlightLimit("w20", 0); got != 20 {
		t.Fatalf("learned %d on node 0, want 20", got)
	}
	seq := 1500
	for _, step := range []struct {
		node      int32
		relearned int
	}{{1, 20}, {2, 5}, {0, 20}} {
		if err := c.MoveLeader("w20", 0, step.node); err != nil {
			t.Fatal(err)
		}
		c.Stall(step.node, 1500*time.Millisecond)
		tr.produce(p, "w20", 0, seq, 200, 100)
		seq += 200
		waitFor(t, "producer to follow the leader", func() bool {
			for _, ps := range p.Stats().Partitions {
				if ps.Topic == "w20" && ps.Leader == step.node {
					return true
				}
			}
			return false
		})
		// The new leader is stalled: no response can have come from it.
		if got := p.InFlightLimit("w20", 0); got != 5 {
			t.Errorf("after move to node %d: limit %d, want 5 until learned", step.node, got)
		}
		c.ResetStats()
		tr.wait()
		tr.produce(p, "w20", 0, seq, 1500, 100)
		seq += 1500
		tr.wait()
		if got := p.InFlightLimit("w20", 0); got != step.relearned {
			t.Errorf("on node %d: relearned %d, want %d", step.node, got, step.relearned)
		}
		if got := c.PartitionStats("w20", 0).MaxInFlight; got > step.relearned {
			t.Errorf("on node %d: broker saw %d in flight, above %d", step.node, got, step.relearned)
		}
	}
	tr.requireClean(t, c, "w20", 0)
}
