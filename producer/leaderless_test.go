package producer

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/longhaul-kafka/longhaul/internal/broker"
)

// Keyless records avoid partitions without a leader (KIP-794's
// availablePartitionsForTopic in the Java client).

// TestKeylessAvoidsLeaderless: metadata names no leader for partitions 0,
// 2 and 4 of six; every keyless record goes to 1, 3 or 5 (placed on a
// partition without a leader it would wait there until delivery.timeout.ms),
// the sticky partition still moving among them. The negative control, the
// same records with every leader named, reaches the even partitions.
func TestKeylessAvoidsLeaderless(t *testing.T) {
	for _, leaderless := range []bool{true, false} {
		c, err := broker.Start(broker.Config{Nodes: 2, Topics: []broker.TopicConfig{{Name: "t", Partitions: 6}}})
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() })
		if leaderless {
			c.RewriteMetadata(func(r *kmsg.MetadataResponse) {
				for i := range r.Topics {
					for j := range r.Topics[i].Partitions {
						if pm := &r.Topics[i].Partitions[j]; pm.Partition%2 == 0 {
							pm.Leader, pm.ErrorCode = -1, 5 // LEADER_NOT_AVAILABLE
						}
					}
				}
			})
		}
		p := newTestProducer(t, c, BatchSize(1000))
		got := keylessPartitions(t, p, 20)
		even := 0
		for part, n := range got {
			if part%2 == 0 {
				even += n
			}
		}
		if leaderless {
			require.Zero(t, even, "records on partitions without a leader: %v", got)
			require.Greater(t, len(got), 1, "the sticky partition moves among the led ones: %v", got)
		} else {
			require.NotZero(t, even, "negative control: %v", got)
		}
	}
}
