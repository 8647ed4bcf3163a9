package producer

import (
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/longhaul-kafka/longhaul/internal/broker"
)

// TestInitProducerIDDeniedFailsAtOnce: a principal without the right to
// write idempotently gets CLUSTER_AUTHORIZATION_FAILED for InitProducerId
// (Kafka before 2.8 without IdempotentWrite on the cluster; later ones
// without Write on any topic). Retrying cannot help until the ACLs
// change, so records fail at once, as the Java producer's fatal error
// does, with an error wrapping the broker's, instead of waiting out
// delivery.timeout.ms; the producer keeps asking with backoff, so records
// produced once it has asked again after the ACL was granted go through.
func TestInitProducerIDDeniedFailsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, n := memCluster(t, broker.Config{Topics: []broker.TopicConfig{{Name: "t", Partitions: 1}}})
		var denied atomic.Bool
		denied.Store(true)
		addr := editProxy(t, n, c.Addr(), func(r kmsg.Response) {
			if ip, ok := r.(*kmsg.InitProducerIDResponse); ok && denied.Load() {
				ip.ProducerID, ip.ProducerEpoch, ip.ErrorCode = -1, -1, kerr.ClusterAuthorizationFailed.Code
			}
		})
		p := memProducer(t, c, n, BootstrapServers(addr), DeliveryTimeout(2*time.Minute))
		start := time.Now()
		err := p.ProduceSync(t.Context(), &Record{Topic: "t", Value: []byte("v")}).FirstErr()
		took := time.Since(start)
		require.ErrorIs(t, err, kerr.ClusterAuthorizationFailed)
		assert.NotErrorIs(t, err, ErrDeliveryTimeout)
		assert.False(t, IsFateUnknown(err), "never sent")
		assert.Less(t, took, 5*time.Second, "at once, not at delivery.timeout.ms (virtual time)")
		assert.Empty(t, c.Records("t", 0))

		denied.Store(false) // the ACL is granted
		// Until the next attempt (retry.backoff.max.ms) the last answer
		// stands: records fail at once, as while a TLS or SASL refusal
		// stands (ErrAuthentication).
		time.Sleep(time.Second)
		require.NoError(t, p.ProduceSync(t.Context(), &Record{Topic: "t", Value: []byte("w")}).FirstErr())
		assert.Len(t, c.Records("t", 0), 1)
	})
}
