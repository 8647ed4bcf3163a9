package producer

import (
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/longhaul-kafka/longhaul/internal/broker"
	"github.com/stretchr/testify/require"
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
	synctest.Test(t, func(t *testing.T) {
		c := virtualCluster(t, broker.Config{RTT: 50 * time.Millisecond,
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
	})
}

func TestTwoTopicsWindowsIndependent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := virtualCluster(t, broker.Config{RTT: 30 * time.Millisecond, Topics: []broker.TopicConfig{
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
	})
}

func TestConnectionCapBelowWindow(t *testing.T) {
	// max.in.flight=1 with window 20: at most 1 per partition.
	synctest.Test(t, func(t *testing.T) {
		c := virtualCluster(t, broker.Config{RTT: 20 * time.Millisecond,
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
	})
}

func TestWindowBelowConnectionCap(t *testing.T) {
	// max.in.flight=20 with window 5: at most 5 per partition, and no
	// error for a cap above 5 with idempotence.
	synctest.Test(t, func(t *testing.T) {
		c := virtualCluster(t, broker.Config{RTT: 30 * time.Millisecond,
			Topics: []broker.TopicConfig{{Name: "w5", Partitions: 1, Window: 5}}})
		p := newTestProducer(t, c, MaxInFlightRequestsPerConnection(20), BatchSize(1024))
		tr := newTracker(t, "a")
		pump(t, p, tr, "w5", 0, 0, 1500, 100)
		if got := c.PartitionStats("w5", 0).MaxInFlight; got != 5 {
			t.Errorf("broker max in flight %d, want 5", got)
		}
		tr.requireClean(t, c, "w5", 0)
	})
}

func TestOldBrokerStaysAtFive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := virtualCluster(t, broker.Config{RTT: 30 * time.Millisecond, OldNodes: []int32{0},
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
	})
}

// TestLeaderChangeResetsAndRelearns moves a partition from a new broker to
// another new broker, then to an old one: each move drops the limit to 5
// (checked while the new leader is stalled, so nothing can be learned yet)
// and the limit is learned again from the new leader's responses.
func TestLeaderChangeResetsAndRelearns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := virtualCluster(t, broker.Config{Nodes: 3, RTT: 20 * time.Millisecond, OldNodes: []int32{2},
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
	})
}

// windowLog records every OnWindowChanged call.
type windowLog struct {
	mu     sync.Mutex
	events []windowEvent
}

type windowEvent struct {
	part     int32
	old, new int
	why      WindowCause
}

func (w *windowLog) OnWindowChanged(_ string, partition int32, old, new int, why WindowCause) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.events = append(w.events, windowEvent{partition, old, new, why})
}

// of returns the events of partition part.
func (w *windowLog) of(part int32) []windowEvent {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []windowEvent
	for _, e := range w.events {
		if e.part == part {
			out = append(out, e)
		}
	}
	return out
}

// kafka011Cluster starts two nodes on an in-memory network, node 1 offering
// Produce up to v3 (Kafka 0.11), with topic "t" of window 20 whose
// partition 0 node 0 leads and partition 1 node 1, over a 20 ms round trip.
// It returns the cluster, the window hook, a ledger and a maker of
// producers with that hook.
func kafka011Cluster(t *testing.T) (*broker.Cluster, *windowLog, *ledger, func(...Opt) *Producer) {
	t.Helper()
	c, n := memCluster(t, broker.Config{Nodes: 2, RTT: 20 * time.Millisecond, ProduceMaxVersions: map[int32]int16{1: 3},
		Topics: []broker.TopicConfig{{Name: "t", Partitions: 2, Window: 20}}})
	w := &windowLog{}
	mk := func(opts ...Opt) *Producer { return memProducer(t, c, n, append([]Opt{Hooks(w)}, opts...)...) }
	return c, w, newLedger("a", "t"), mk
}

// TestWindowReconnectIsOneOnKafka011 checks WindowReconnect's "or 1 on
// Kafka 0.11" (hooks.go) and the rule behind it (dialed, conns.go): a
// partition led by a node offering Produce v3 at most (Kafka 0.11 retains
// only the last batch per producer) starts a new connection at 1 and stays
// at 1 once a response was read, where a partition of the same window-20
// topic on a newer node starts at 5 and learns 20. Stats reports the same
// limits.
func TestWindowReconnectIsOneOnKafka011(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, w, l, mk := kafka011Cluster(t)
		p := mk()
		warmUp(t, p, l, 0, 1)
		require.Equal(t, []windowEvent{{1, 5, 1, WindowReconnect}}, w.of(1), "partition 1 (node 1, Produce v3)")
		require.Equal(t, []windowEvent{{0, 5, 20, WindowLearned}}, w.of(0), "partition 0 (node 0, Produce v14)")
		require.Equal(t, 20, p.InFlightLimit("t", 0))
		require.Equal(t, 1, p.InFlightLimit("t", 1), "learned from a v3 answer, still 1")
		for _, ps := range p.Stats().Partitions {
			require.Equal(t, map[int32]int{0: 20, 1: 1}[ps.Partition], ps.Limit, "partition %d", ps.Partition)
		}

		// New connections: partition 0 starts again at 5 and learns 20;
		// partition 1 is never above 1.
		c.DropConnections(0)
		c.DropConnections(1)
		l.produce(p, 0, 50, 100)
		l.produce(p, 1, 50, 100)
		require.True(t, l.waitAll(time.Minute))
		require.Empty(t, l.failures())
		require.Equal(t, []windowEvent{{0, 5, 20, WindowLearned}, {0, 20, 5, WindowReconnect}, {0, 5, 20, WindowLearned}}, w.of(0))
		require.Equal(t, []windowEvent{{1, 5, 1, WindowReconnect}}, w.of(1))
		require.Equal(t, 1, p.InFlightLimit("t", 1))
		requireClean(t, c, "t", 2, l)
	})
}

// TestKafka011OneBatchInFlightIsSafe is the safety behind the rule: on a
// Kafka 0.11 leader, lost responses make the producer send its batches
// again, and with one in flight the one sent again is the last the broker
// retains, so it is recognised as a duplicate: every record is acked once,
// in order, nothing written twice. Negative control (v3Uncapped): with 5 in
// flight there, a batch sent again is older than the one retained and the
// broker answers OUT_OF_ORDER_SEQUENCE_NUMBER, which the check catches.
func TestKafka011OneBatchInFlightIsSafe(t *testing.T) {
	run := func(t *testing.T, uncapped bool) []string {
		var v []string
		synctest.Test(t, func(t *testing.T) {
			c, _, l, mk := kafka011Cluster(t)
			p := mk(Linger(0), bug(t, v3Uncapped, uncapped))
			warmUp(t, p, l, 1)
			for range 3 {
				c.DropProduceResponses(1, 2)
				l.produce(p, 1, 100, 100)
				require.True(t, l.waitAll(time.Minute))
			}
			v = checkOutcome(collectOutcome(c, "t", 2, l))
			if f := l.failures(); len(f) > 0 {
				v = append(v, firstN(f, 3)...)
			}
		})
		return v
	}
	require.Empty(t, run(t, false), "one batch in flight on Produce v3")
	if !regressBuild {
		return // the negative control below needs -tags longhaul_regress
	}
	require.NotEmpty(t, run(t, true), "negative control: 5 in flight on Produce v3 must fail the check")
}
