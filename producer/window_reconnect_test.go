package producer

import (
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-kafka/longhaul/internal/broker"
)

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
