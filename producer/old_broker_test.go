package producer

import (
	"context"
	"testing"
	"testing/synctest"

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
