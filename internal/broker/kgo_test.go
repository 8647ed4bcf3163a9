package broker

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/longhaul-kafka/longhaul/internal/logcheck"
)

// exactlyOnceInOrder returns what is wrong with a partition log that should
// hold exactly the values want, in order, at offsets 0.., "" if nothing. The
// rules and their negative controls are package logcheck's.
func exactlyOnceInOrder(recs []LogRecord, want []string) string {
	sent := make([]logcheck.Sent, len(want))
	for i, v := range want {
		sent[i] = logcheck.Sent{Value: []byte(v), Outcome: logcheck.Acked, Offset: int64(i), HasOffset: true}
	}
	log := make([]logcheck.Entry, len(recs))
	for i, r := range recs {
		log[i] = logcheck.Entry{Value: r.Value, Offset: r.Offset}
	}
	if err := logcheck.Stream(sent, log).Err(); err != nil {
		return err.Error()
	}
	return ""
}

// TestKgoProduceConsume produces with franz-go's kgo (idempotent, which kgo
// allows with one request in flight per broker; small batches and an
// emulated RTT, so requests carry many batches) and consumes back with kgo: every record is in the
// log exactly once and in order, kgo never tripped
// OUT_OF_ORDER_SEQUENCE_NUMBER, and the consumer reads the same values.
// kgo is an independent client, so this checks our wire format.
func TestKgoProduceConsume(t *testing.T) {
	const parts, perPart = 3, 400
	c := startCluster(t, Config{Nodes: 3, RTT: 5 * time.Millisecond, Topics: []TopicConfig{{Name: "t", Partitions: parts, Window: 20}}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	pr, err := kgo.NewClient(kgo.SeedBrokers(c.Addr()), kgo.DefaultProduceTopic("t"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0),
		kgo.ProducerBatchMaxBytes(512))
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	want := make([][]string, parts)
	for i := range parts * perPart {
		p := int32(i % parts)
		v := fmt.Sprintf("value-%05d-%s", i, strings.Repeat("x", 40))
		want[p] = append(want[p], v)
		pr.Produce(ctx, &kgo.Record{Partition: p, Value: []byte(v)}, func(_ *kgo.Record, err error) {
			if err != nil {
				t.Errorf("produce: %v", err)
			}
		})
	}
	if err := pr.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	for p := range int32(parts) {
		if msg := exactlyOnceInOrder(c.Records("t", p), want[p]); msg != "" {
			t.Fatalf("partition %d: %s", p, msg)
		}
		st := c.PartitionStats("t", p)
		if st.OutOfOrder != 0 || st.InvalidEpoch != 0 {
			t.Fatalf("partition %d: kgo tripped the broker: %+v", p, st)
		}
		// kgo keeps at most 5 requests in flight per broker, one batch
		// per partition each: more would mean we count a batch after
		// the client already has its response.
		if st.MaxInFlight > 5 {
			t.Fatalf("partition %d: MaxInFlight %d above kgo's 5", p, st.MaxInFlight)
		}
		t.Logf("partition %d: %+v", p, st)
	}

	offsets := map[int32]kgo.Offset{}
	for p := range int32(parts) {
		offsets[p] = kgo.NewOffset().AtStart()
	}
	co, err := kgo.NewClient(kgo.SeedBrokers(c.Addr()), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"t": offsets}))
	if err != nil {
		t.Fatal(err)
	}
	defer co.Close()
	got := make([][]string, parts)
	for n := 0; n < parts*perPart; {
		fs := co.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d: %v", n, parts*perPart, err)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s[%d]: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset != int64(len(got[r.Partition])) {
				t.Fatalf("partition %d: consumed offset %d, want %d", r.Partition, r.Offset, len(got[r.Partition]))
			}
			got[r.Partition] = append(got[r.Partition], string(r.Value))
			n++
		})
	}
	for p := range parts {
		for i := range want[p] {
			if got[p][i] != want[p][i] {
				t.Fatalf("partition %d offset %d: consumed %q, want %q", p, i, got[p][i], want[p][i])
			}
		}
	}
}

// TestKgoFollowsMoveLeader moves a partition's leader while kgo produces:
// kgo follows the NOT_LEADER_OR_FOLLOWER answers (KIP-951 hints, then
// metadata) and every record still lands exactly once, in order.
func TestKgoFollowsMoveLeader(t *testing.T) {
	c := startCluster(t, Config{Nodes: 2, RTT: 2 * time.Millisecond, Topics: []TopicConfig{{Name: "t", Partitions: 1}}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pr, err := kgo.NewClient(kgo.SeedBrokers(c.Addr()), kgo.DefaultProduceTopic("t"), kgo.ProducerLinger(0), kgo.ProducerBatchMaxBytes(512))
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	var want []string
	for i := range 300 {
		if i == 100 {
			if err := c.MoveLeader("t", 0, 1); err != nil {
				t.Fatal(err)
			}
		}
		if i == 200 {
			if err := c.MoveLeader("t", 0, 0); err != nil {
				t.Fatal(err)
			}
		}
		v := fmt.Sprintf("r%04d", i)
		want = append(want, v)
		pr.Produce(ctx, &kgo.Record{Value: []byte(v)}, func(_ *kgo.Record, err error) {
			if err != nil {
				t.Errorf("produce: %v", err)
			}
		})
	}
	if err := pr.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if msg := exactlyOnceInOrder(c.Records("t", 0), want); msg != "" {
		t.Fatal(msg)
	}
	t.Logf("stats %+v", c.PartitionStats("t", 0))
}
