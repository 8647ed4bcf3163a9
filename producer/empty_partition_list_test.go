package producer

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/longhaul-kafka/longhaul/internal/broker"
)

// TestMetadataWithoutPartitionsKeepsWhatWasKnown: a Metadata answer naming
// a topic under a new topic id, without an error and with no partitions,
// cannot be true (Kafka topics have at least one). Taken as a re-creation
// with 0 partitions, it emptied the topic's partition table but left it
// known, and the next keyed or keyless record was placed modulo 0: a
// division by zero (or rand.Int32N(0)) panicking inside Produce with
// acc.mu held. It is ignored like any unusable partition list, and
// the producer goes on with what it knew.
func TestMetadataWithoutPartitionsKeepsWhatWasKnown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, n := memCluster(t, broker.Config{Topics: []broker.TopicConfig{{Name: "t", Partitions: 2}}})
		var empty atomic.Bool
		addr := editProxy(t, n, c.Addr(), func(r kmsg.Response) {
			md, ok := r.(*kmsg.MetadataResponse)
			if !ok || !empty.Load() {
				return
			}
			for i := range md.Topics {
				md.Topics[i].TopicID[0] ^= 0xff
				md.Topics[i].Partitions = nil
			}
		})
		// Not memProducer: its Close at cleanup would wait for ever for
		// the lock a panic in Produce left held (the negative control).
		p, err := New(BootstrapServers(addr), Dialer(n.Dial), Linger(time.Millisecond), RetryBackoff(5*time.Millisecond),
			RetryBackoffMax(50*time.Millisecond), MetadataMaxAge(100*time.Millisecond),
			optFunc(func(c *config) error { c.regress = regressFromEnv(); return nil }))
		require.NoError(t, err)
		require.NoError(t, p.ProduceSync(context.Background(), &Record{Topic: "t", Key: []byte("k"), Value: []byte("a")}).FirstErr())

		empty.Store(true)
		before := c.MetadataRequests()
		for c.MetadataRequests() < before+2 {
			time.Sleep(50 * time.Millisecond) // at least one answer without partitions applied
		}
		var (
			res       ProduceResults
			recovered any
		)
		func() {
			defer func() { recovered = recover() }()
			res = p.ProduceSync(context.Background(),
				&Record{Topic: "t", Key: []byte("k"), Value: []byte("b")},
				&Record{Topic: "t", Value: []byte("c")})
		}()
		require.Nil(t, recovered, "Produce panicked")
		require.NoError(t, res.FirstErr())
		require.Equal(t, keyPartition([]byte("k"), 2), res[0].Record.Partition())
		require.NoError(t, p.Close(context.Background()))
	})
}
