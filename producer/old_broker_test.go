package producer

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-kafka/longhaul/internal/broker"
	"github.com/longhaul-kafka/longhaul/protocol"
)

// TestBrokerBeforeKafka011FailsClearly checks the package doc's promise
// for brokers before Kafka 0.11 (Produce below v3, no InitProducerId):
// they cannot take idempotent batches, so nothing is sent to them, and the
// records of the partitions they lead fail at delivery.timeout.ms with an
// error wrapping ErrDeliveryTimeout and protocol.ErrIdempotenceUnsupported,
// whether the whole cluster is that old (InitProducerId is missing) or
// one leader is (its connection is refused); partitions on newer leaders
// are unaffected. Before InitProducerID said so, the all-old cluster's
// records failed with only "does not support api key 22".
func TestBrokerBeforeKafka011FailsClearly(t *testing.T) {
	for _, tc := range []struct {
		name  string
		nodes int
		old   int32 // the Kafka 0.10 node
	}{{"whole cluster", 1, 0}, {"one leader", 2, 1}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c, n := memCluster(t, broker.Config{Nodes: tc.nodes, ProduceMaxVersions: map[int32]int16{tc.old: 2},
					Topics: []broker.TopicConfig{{Name: "t", Partitions: 2}}})
				p := memProducer(t, c, n)
				for part := range int32(2) {
					err := p.ProduceSync(context.Background(), toPartition("t", part, []byte("x"))).FirstErr()
					leader, _ := c.Leader("t", part)
					if leader != tc.old {
						require.NoError(t, err, "partition %d on a newer node", part)
						continue
					}
					require.ErrorIs(t, err, ErrDeliveryTimeout, "partition %d", part)
					require.ErrorIs(t, err, protocol.ErrIdempotenceUnsupported, "partition %d", part)
					require.Empty(t, c.Records("t", part), "partition %d: nothing sent to a Kafka 0.10 node", part)
				}
			})
		})
	}
}

// TestEveryOldProduceVersion checks the README's "Older brokers (Produce v4
// to v13, any Kafka since 1.0) never send the field: the producer stays at
// 5 batches in flight per partition ... so it is still exactly-once and in
// order", and 1 at v3, against a node capped at each version in turn, with
// a window-20 topic and lost answers: every record acked once, in order,
// and the limit never above what such a broker retains. The same topic on
// an uncapped node learns 20.
func TestEveryOldProduceVersion(t *testing.T) {
	for v := int16(3); v <= 14; v++ {
		t.Run(fmt.Sprintf("v%d", v), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c, n := memCluster(t, broker.Config{RTT: 10 * time.Millisecond, ProduceMaxVersions: map[int32]int16{0: v},
					Topics: []broker.TopicConfig{{Name: "t", Partitions: 1, Window: 20}}})
				w := &windowLog{}
				p := memProducer(t, c, n, Hooks(w), Linger(0))
				l := newLedger("a", "t")
				warmUp(t, p, l, 0)
				c.DropProduceResponses(0, 3)
				l.produce(p, 0, 200, 100)
				require.True(t, l.waitAll(time.Minute))
				require.Empty(t, l.failures())
				requireClean(t, c, "t", 1, l)
				want := map[bool]int{true: 5, false: 20}[v < 14]
				if v == 3 {
					want = 1
				}
				require.Equal(t, want, p.InFlightLimit("t", 0))
				for _, e := range w.of(0) {
					require.LessOrEqual(t, e.new, want, "%+v", e)
				}
			})
		})
	}
}

// connectLog records OnBrokerConnect calls.
type connectLog struct {
	mu   sync.Mutex
	errs map[int32][]error
}

func (h *connectLog) OnBrokerConnect(node int32, _ string, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.errs == nil {
		h.errs = map[int32][]error{}
	}
	h.errs[node] = append(h.errs[node], err)
}

// TestBrokerConnectReportsVersionCheck checks HookBrokerConnect's "err is
// nil when the connection is ready (handshake, authentication and version
// checks done), else why it failed" for the version check: a Kafka 0.10
// node's connection is reported failed with an error wrapping
// protocol.ErrIdempotenceUnsupported, never ready; the newer node's ready.
func TestBrokerConnectReportsVersionCheck(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, n := memCluster(t, broker.Config{Nodes: 2, ProduceMaxVersions: map[int32]int16{1: 2},
			Topics: []broker.TopicConfig{{Name: "t", Partitions: 2}}})
		h := &connectLog{}
		p := memProducer(t, c, n, Hooks(h), DeliveryTimeout(2*time.Second))
		for part := range int32(2) {
			p.ProduceSync(context.Background(), toPartition("t", part, []byte("x")))
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		require.NotEmpty(t, h.errs[0])
		for _, err := range h.errs[0] {
			require.NoError(t, err)
		}
		require.NotEmpty(t, h.errs[1])
		for _, err := range h.errs[1] {
			require.ErrorIs(t, err, protocol.ErrIdempotenceUnsupported, "node 1 never ready")
		}
	})
}
