package producer

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/longhaul-kafka/longhaul/internal/broker"
	"github.com/longhaul-kafka/longhaul/internal/memnet"
)

// metadataProxy relays every request of a one-node cluster and its answer
// (editProxy), letting edit change the Metadata answer: enough to make the
// broker answer what it cannot be configured to (a topic the producer is
// not authorized for).
func metadataProxy(t *testing.T, n *memnet.Network, upstream string, edit func(*kmsg.MetadataResponse)) string {
	return editProxy(t, n, upstream, func(r kmsg.Response) {
		if md, ok := r.(*kmsg.MetadataResponse); ok {
			edit(md)
		}
	})
}

// TestTopicAuthorizationFailsAtOnce: ErrTopicMetadata's doc says records
// whose topic the broker answers TOPIC_AUTHORIZATION_FAILED for fail at
// once (not after max.block.ms), wrapped in a DeliveryError with the
// broker's error so errors.Is(err, kerr.TopicAuthorizationFailed) works,
// and were never sent; other topics go on.
func TestTopicAuthorizationFailsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, n := memCluster(t, broker.Config{Topics: []broker.TopicConfig{{Name: "denied", Partitions: 1}, {Name: "ok", Partitions: 1}}})
		addr := metadataProxy(t, n, c.Addr(), func(md *kmsg.MetadataResponse) {
			for i := range md.Topics {
				if tp := &md.Topics[i]; tp.Topic != nil && *tp.Topic == "denied" {
					tp.ErrorCode = kerr.TopicAuthorizationFailed.Code
					tp.Partitions = nil
				}
			}
		})
		p := memProducer(t, c, n, BootstrapServers(addr), MaxBlock(time.Minute), DeliveryTimeout(2*time.Minute))
		start := time.Now()
		res := p.ProduceSync(t.Context(), &Record{Topic: "denied", Value: []byte("v")}, &Record{Topic: "ok", Value: []byte("w")})
		took := time.Since(start)
		err := res[0].Err
		require.ErrorIs(t, err, ErrTopicMetadata)
		require.ErrorIs(t, err, kerr.TopicAuthorizationFailed)
		var de *DeliveryError
		require.ErrorAs(t, err, &de)
		assert.False(t, de.FateUnknown, "never sent")
		assert.Equal(t, "denied", de.Topic)
		assert.Less(t, took, time.Second, "at once, not at max.block.ms (virtual time)")
		require.NoError(t, res[1].Err, "another topic goes on")
		assert.Empty(t, c.Records("denied", 0))
		assert.Len(t, c.Records("ok", 0), 1)
	})
}
