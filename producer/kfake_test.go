package producer

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestAgainstKfake produces to franz-go's kfake, an independent broker
// without KIP-1269, and reads the topic back with kgo: the producer stays at
// 5 and everything arrives once, in order.
func TestAgainstKfake(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "t"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	addrs := c.ListenAddrs()
	p, err := New(BootstrapServers(addrs...), Linger(time.Millisecond), BatchSize(1024), MaxInFlightRequestsPerConnection(20))
	if err != nil {
		t.Fatal(err)
	}
	tr := newTracker(t, "k")
	for part := int32(0); part < 2; part++ {
		tr.produce(p, "t", part, 0, 2000, 100)
	}
	tr.wait()
	for part := int32(0); part < 2; part++ {
		if got := p.InFlightLimit("t", part); got != 5 {
			t.Errorf("partition %d: limit %d against kfake, want 5", part, got)
		}
	}
	if err := p.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if len(tr.failed) > 0 {
		t.Fatalf("%d records failed", len(tr.failed))
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.ConsumeTopics("t"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	next := map[int32]int{}
	total := 0
	for total < 4000 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read %d of 4000 records back: %v", total, err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			_, part, seq, ok := parseValue(r.Value)
			if !ok || part != r.Partition {
				t.Fatalf("unexpected record %q on partition %d", r.Value, r.Partition)
			}
			if seq != next[part] {
				t.Fatalf("partition %d: got seq %d, want %d (lost, duplicated or reordered)", part, seq, next[part])
			}
			next[part]++
			total++
		})
	}
}
