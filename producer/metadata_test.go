package producer

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/longhaul-kafka/longhaul/internal/broker"
	"github.com/longhaul-kafka/longhaul/internal/memnet"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// produceOne produces r and returns its callback's error, failing the test
// if no callback comes within a minute.
func produceOne(t *testing.T, p *Producer, r *Record) error {
	t.Helper()
	got := make(chan error, 1)
	p.Produce(context.Background(), r, func(_ *Record, err error) { got <- err })
	select {
	case err := <-got:
		return err
	case <-time.After(time.Minute):
		t.Fatal("no callback within a minute")
		return nil
	}
}

// TestUnknownTopicFailsAfterMaxBlock: a topic the cluster does not have,
// with auto-creation off on the broker, fails its records after max.block.ms
// (not delivery.timeout.ms) with ErrTopicMetadata naming
// UNKNOWN_TOPIC_OR_PARTITION.
func TestUnknownTopicFailsAfterMaxBlock(t *testing.T) {
	c := startCluster(t, broker.Config{Nodes: 1, Topics: []broker.TopicConfig{{Name: "t", Partitions: 1}}})
	p := newTestProducer(t, c, MaxBlock(300*time.Millisecond), DeliveryTimeout(time.Hour))
	err := produceOne(t, p, &Record{Topic: "missing", Value: []byte("v")})
	require.ErrorIs(t, err, ErrTopicMetadata)
	assert.ErrorIs(t, err, kerr.UnknownTopicOrPartition)
	assert.NotErrorIs(t, err, ErrDeliveryTimeout)
	assert.False(t, IsFateUnknown(err))
	assert.Contains(t, err.Error(), "300 ms")
}

// TestAutoCreateTopics: the producer asks Metadata to create a missing topic,
// as the Java producer does (allow.auto.create.topics, default true), and
// the record lands in it; with the property false it does not ask, and the
// record fails after max.block.ms.
func TestAutoCreateTopics(t *testing.T) {
	c := startCluster(t, broker.Config{Nodes: 1, AutoCreateTopics: true})
	p := newTestProducer(t, c)
	r := &Record{Topic: "created", Value: []byte("v")}
	require.NoError(t, produceOne(t, p, r))
	recs := c.Records("created", 0)
	require.Len(t, recs, 1)
	assert.Equal(t, []byte("v"), recs[0].Value)

	off := newTestProducer(t, c, Property("allow.auto.create.topics", "false"), MaxBlock(300*time.Millisecond))
	err := produceOne(t, off, &Record{Topic: "not-created", Value: []byte("v")})
	require.ErrorIs(t, err, ErrTopicMetadata)
	assert.ErrorIs(t, err, kerr.UnknownTopicOrPartition)
	assert.Empty(t, c.Records("not-created", 0))
}

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
