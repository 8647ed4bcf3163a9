package kafkatest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/longhaul-kafka/longhaul/internal/logcheck"
)

// Consume reads topic from the earliest offset of every partition with an
// independent franz-go client (direct listeners, no proxy, no consumer
// group, read_committed off) until n records have arrived, and returns them
// by partition in log order. It fails the test if n records do not arrive
// within timeout, or if more than n arrive within one poll after that (the
// extra ones are returned too, for the caller's diagnosis, when the test
// does not fail first).
func (c *Cluster) Consume(t testing.TB, topic string, n int, timeout time.Duration) map[int32][]*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(strings.Split(c.Bootstrap(), ",")...),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxBytes(64<<20),
	)
	if err != nil {
		t.Fatalf("kafkatest: consumer: %v", err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	got := make(map[int32][]*kgo.Record)
	total := 0
	for total < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("kafkatest: consumed %d of %d records of %s in %v", total, n, topic, timeout)
		}
		for _, e := range fs.Errors() {
			t.Logf("kafkatest: consume %s/%d: %v", e.Topic, e.Partition, e.Err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			got[r.Partition] = append(got[r.Partition], r)
			total++
		})
	}
	// Anything beyond n (duplicates) that is already fetched or arrives
	// shortly after is included so the checker sees it.
	extraCtx, cancelExtra := context.WithTimeout(context.Background(), time.Second)
	defer cancelExtra()
	fs := cl.PollFetches(extraCtx)
	fs.EachRecord(func(r *kgo.Record) { got[r.Partition] = append(got[r.Partition], r) })
	return got
}

// CheckExactlyOnceInOrder compares what a producer had acknowledged, the
// values per partition in produce order, with what the log holds, and
// returns an error describing the first loss, duplicate, reorder or
// stray record, or nil when each partition holds exactly want's values in
// want's order. Use it when every produced record was acknowledged; values
// must be unique within a partition. The rules are package logcheck's.
func CheckExactlyOnceInOrder(want map[int32][][]byte, got map[int32][]*kgo.Record) error {
	sent := make(map[int32][]Sent, len(want))
	for p, vs := range want {
		sent[p] = logcheck.AllAcked(vs...)
	}
	return logcheck.Partitions(sent, entries(got)).Err()
}
