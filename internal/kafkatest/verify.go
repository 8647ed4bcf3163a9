package kafkatest

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
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
// must be unique within a partition for the diagnosis to be precise.
func CheckExactlyOnceInOrder(want map[int32][][]byte, got map[int32][]*kgo.Record) error {
	parts := make([]int32, 0, len(want)+len(got))
	for p := range want {
		parts = append(parts, p)
	}
	for p := range got {
		if _, ok := want[p]; !ok {
			parts = append(parts, p)
		}
	}
	slices.Sort(parts)
	for _, p := range parts {
		w, g := want[p], got[p]
		seen := make(map[string]int, len(g))
		for i, r := range g {
			if j, dup := seen[string(r.Value)]; dup {
				return fmt.Errorf("partition %d: value %q at offsets %d and %d: duplicate", p, r.Value, g[j].Offset, r.Offset)
			}
			seen[string(r.Value)] = i
		}
		for i := range min(len(w), len(g)) {
			if !bytes.Equal(w[i], g[i].Value) {
				if _, later := seen[string(w[i])]; later {
					return fmt.Errorf("partition %d: position %d (offset %d) holds %q, want %q which is elsewhere: reordered", p, i, g[i].Offset, g[i].Value, w[i])
				}
				return fmt.Errorf("partition %d: position %d (offset %d) holds %q, want %q which is missing: lost", p, i, g[i].Offset, g[i].Value, w[i])
			}
		}
		switch {
		case len(g) < len(w):
			return fmt.Errorf("partition %d: log holds %d records, %d acknowledged: lost from %q on", p, len(g), len(w), w[len(g)])
		case len(g) > len(w):
			return fmt.Errorf("partition %d: log holds %d records, %d acknowledged: stray %q at offset %d", p, len(g), len(w), g[len(w)].Value, g[len(w)].Offset)
		}
	}
	return nil
}
