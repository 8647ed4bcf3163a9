package kfaketest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/longhaul-kafka/longhaul/producer"
)

// produceOne produces r and returns its outcome, failing the test if no
// callback comes within a minute. producer's own tests have the same
// helper: they are in package producer, so a shared helper package that
// imports producer would be an import cycle for them.
func produceOne(t *testing.T, p *producer.Producer, r *producer.Record) error {
	t.Helper()
	got := make(chan error, 1)
	p.Produce(context.Background(), r, func(_ *producer.Record, err error) { got <- err })
	select {
	case err := <-got:
		return err
	case <-time.After(time.Minute):
		t.Fatal("no callback within a minute")
		return nil
	}
}

// TestTopicAuthorizationFailsAtOnce: Metadata answers
// TOPIC_AUTHORIZATION_FAILED for the topic; the record fails on that answer
// (max.block.ms and delivery.timeout.ms are an hour, so only the answer can
// end it within produceOne's minute) with ErrTopicMetadata naming the cause.
func TestTopicAuthorizationFailsAtOnce(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "ok"))
	require.NoError(t, err)
	defer c.Close()
	// Without KeepControl the handler answers once: the first Metadata
	// request, which names only "secret"; later ones reach kfake.
	c.ControlKey(int16(kmsg.Metadata), func(req kmsg.Request) (kmsg.Response, error, bool) {
		mr := req.(*kmsg.MetadataRequest)
		for _, rt := range mr.Topics {
			if rt.Topic != nil && *rt.Topic == "secret" {
				resp := mr.ResponseKind().(*kmsg.MetadataResponse)
				tp := kmsg.NewMetadataResponseTopic()
				tp.Topic = rt.Topic
				tp.ErrorCode = kerr.TopicAuthorizationFailed.Code
				resp.Topics = append(resp.Topics, tp)
				return resp, nil, true
			}
		}
		return nil, nil, false
	})
	p, err := producer.New(producer.BootstrapServers(c.ListenAddrs()...), producer.MaxBlock(time.Hour),
		producer.DeliveryTimeout(2*time.Hour))
	require.NoError(t, err)
	defer p.Close(context.Background())
	err = produceOne(t, p, &producer.Record{Topic: "secret", Value: []byte("v")})
	require.ErrorIs(t, err, producer.ErrTopicMetadata)
	assert.ErrorIs(t, err, kerr.TopicAuthorizationFailed)
	assert.False(t, producer.IsFateUnknown(err))
	// The producer keeps working for other topics.
	assert.NoError(t, produceOne(t, p, &producer.Record{Topic: "ok", Value: []byte("v")}))
}
