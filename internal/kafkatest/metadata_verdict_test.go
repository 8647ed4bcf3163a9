package kafkatest

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/longhaul-kafka/longhaul/producer"
)

// TestMetadataVerdictsOnKafka checks the Metadata matrix (producer's
// metajudge.go, DESIGN.md "Metadata answers") against Apache Kafka on one
// broker with auto.create.topics.enable=true and a default.replication.factor
// of 3, which the one-node controller refuses for every auto-creation
// (INVALID_REPLICATION_FACTOR, logged by the broker's auto-creation
// manager and answered to Metadata as UNKNOWN_TOPIC_OR_PARTITION).
//
//   - A name Kafka refuses fails ProduceSync with ErrTopicMetadata
//     wrapping INVALID_TOPIC_EXCEPTION, with and without
//     allow.auto.create.topics, and does not wait for max.block.ms: with
//     max.block.ms at 10 minutes and a 2-minute ctx, a record that waited
//     would end with the ctx's error instead.
//   - An auto-creation the controller refuses looks like one in flight:
//     the record waits max.block.ms and fails with ErrTopicMetadata
//     wrapping UNKNOWN_TOPIC_OR_PARTITION; the topic does not exist.
//   - A topic created explicitly is produced to as usual.
func TestMetadataVerdictsOnKafka(t *testing.T) {
	c := Start(t, Options{BrokerConfig: map[string]string{
		"auto.create.topics.enable":  "true",
		"default.replication.factor": "3",
	}})
	t.Run("InvalidName", func(t *testing.T) {
		for _, auto := range []bool{false, true} {
			p := newLonghaul(t, c.Bootstrap(), nil, producer.MaxBlock(10*time.Minute),
				producer.Property("allow.auto.create.topics", strconv.FormatBool(auto)))
			for _, name := range []string{"my topic", "orders!", strings.Repeat("t", 250), ".."} {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				res := p.ProduceSync(ctx, &producer.Record{Topic: name, Value: []byte("v")})
				cancel()
				err := res[0].Err
				if !errors.Is(err, producer.ErrTopicMetadata) || !errors.Is(err, kerr.InvalidTopicException) {
					t.Fatalf("auto=%v %.20q: got %v, want ErrTopicMetadata wrapping INVALID_TOPIC_EXCEPTION", auto, name, err)
				}
				if errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("auto=%v %.20q: waited for the ctx: %v", auto, name, err)
				}
			}
		}
	})
	t.Run("RefusedAutoCreation", func(t *testing.T) {
		p := newLonghaul(t, c.Bootstrap(), nil, producer.MaxBlock(5*time.Second))
		res := p.ProduceSync(context.Background(), &producer.Record{Topic: "refused-auto", Value: []byte("v")})
		err := res[0].Err
		if !errors.Is(err, producer.ErrTopicMetadata) || !errors.Is(err, kerr.UnknownTopicOrPartition) {
			t.Fatalf("got %v, want ErrTopicMetadata wrapping UNKNOWN_TOPIC_OR_PARTITION after max.block.ms", err)
		}
		if !strings.Contains(err.Error(), "not known after 5000 ms") {
			t.Fatalf("got %v, want the max.block.ms failure", err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, merr := c.topicMetadata(ctx, c.nodes[0].directAddr, "refused-auto"); !errors.Is(merr, kerr.UnknownTopicOrPartition) {
			t.Fatalf("the topic should not exist: %v", merr)
		}
		if !c.nodes[0].logContains("INVALID_REPLICATION_FACTOR") {
			t.Fatalf("the broker log should show the controller refusing the creation:\n%s", c.nodes[0].logTail(40))
		}
	})
	t.Run("CreatedTopic", func(t *testing.T) {
		c.CreateTopic(t, "made", 1, 1, nil)
		p := newLonghaul(t, c.Bootstrap(), nil)
		if err := p.ProduceSync(context.Background(), &producer.Record{Topic: "made", Value: []byte("v")})[0].Err; err != nil {
			t.Fatal(err)
		}
	})
}
