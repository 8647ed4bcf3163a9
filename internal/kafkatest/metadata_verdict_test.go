package kafkatest

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
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
//   - On a second broker, with a default.replication.factor of 1 and a
//     create.topic.policy.class.name refusing names that start with
//     "refused-" (testdata/policy, compiled here with javac), an
//     auto-creation the policy refuses (POLICY_VIOLATION at the
//     controller) also waits max.block.ms and fails with ErrTopicMetadata
//     wrapping UNKNOWN_TOPIC_OR_PARTITION; the topic does not exist and
//     the policy's file shows it was asked. A name the policy allows is
//     auto-created and produced to: the refusal is the policy's.
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
	t.Run("PolicyRefusedAutoCreation", func(t *testing.T) {
		classes := buildJava(t, filepath.Join("testdata", "policy", "kafkatest", "RefusePrefixPolicy.java"))
		policyLog := filepath.Join(t.TempDir(), "policy.log")
		pc := Start(t, Options{
			BrokerConfig: map[string]string{
				"auto.create.topics.enable":      "true",
				"default.replication.factor":     "1",
				"create.topic.policy.class.name": "kafkatest.RefusePrefixPolicy",
			},
			Classpath: []string{classes},
			JVMFlags:  []string{"-Dkafkatest.policy.prefix=refused-", "-Dkafkatest.policy.log=" + policyLog},
		})
		p := newLonghaul(t, pc.Bootstrap(), nil, producer.MaxBlock(5*time.Second))
		res := p.ProduceSync(context.Background(), &producer.Record{Topic: "refused-by-policy", Value: []byte("v")})
		err := res[0].Err
		if !errors.Is(err, producer.ErrTopicMetadata) || !errors.Is(err, kerr.UnknownTopicOrPartition) {
			t.Fatalf("got %v, want ErrTopicMetadata wrapping UNKNOWN_TOPIC_OR_PARTITION after max.block.ms", err)
		}
		if !strings.Contains(err.Error(), "not known after 5000 ms") {
			t.Fatalf("got %v, want the max.block.ms failure", err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, merr := pc.topicMetadata(ctx, pc.nodes[0].directAddr, "refused-by-policy"); !errors.Is(merr, kerr.UnknownTopicOrPartition) {
			t.Fatalf("the topic should not exist: %v", merr)
		}
		// The allowed name waits for its creation like any new topic.
		p2 := newLonghaul(t, pc.Bootstrap(), nil, producer.MaxBlock(time.Minute))
		if err := p2.ProduceSync(ctx, &producer.Record{Topic: "allowed-by-policy", Value: []byte("v")})[0].Err; err != nil {
			t.Fatalf("a name the policy allows: %v", err)
		}
		b, rerr := os.ReadFile(policyLog)
		if rerr != nil {
			t.Fatalf("the policy wrote nothing: %v", rerr)
		}
		if !strings.Contains(string(b), "refused-by-policy refused\n") || !strings.Contains(string(b), "allowed-by-policy allowed\n") {
			t.Fatalf("the policy's log should show both topics asked:\n%s", b)
		}
		if pc.nodes[0].logContains("INVALID_REPLICATION_FACTOR") {
			t.Fatalf("the refusal should be the policy's, not the replication factor's:\n%s", pc.nodes[0].logTail(40))
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

// buildJava compiles the Java source src (under testdata) against the
// Kafka jars into a class directory for [Options.Classpath]. Without
// javac it skips, or fails with LONGHAUL_REQUIRE_KAFKA=1.
func buildJava(t *testing.T, src string) string {
	t.Helper()
	if _, err := exec.LookPath("javac"); err != nil {
		if !required() {
			t.Skipf("javac not found (LONGHAUL_REQUIRE_KAFKA=1 makes this a failure)")
		}
		t.Fatal("javac not found")
	}
	ctx, cancel := context.WithTimeout(context.Background(), jarTimeout)
	defer cancel()
	libs, err := Release{}.EnsureJars(ctx, t.Logf)
	if err != nil {
		t.Fatalf("kafkatest: %v", err)
	}
	classes := t.TempDir()
	out, err := exec.CommandContext(ctx, "javac", "--release", "17", "-nowarn", "-encoding", "UTF-8",
		"-cp", filepath.Join(libs, "*"), "-d", classes, src).CombinedOutput()
	if err != nil {
		t.Fatalf("javac of %s: %v\n%s", src, err, out)
	}
	return classes
}
