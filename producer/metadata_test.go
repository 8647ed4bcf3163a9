package producer

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/longhaul-kafka/longhaul/internal/broker"
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
