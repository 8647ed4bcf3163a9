package kafkatest

import (
	"context"
	"fmt"
	"testing"

	"github.com/longhaul-kafka/longhaul/producer"
)

// TestRackAwarePartitioning (KIP-1123): on Kafka 4.4 nodes started with
// broker.rack a, b and c, a producer with client.rack=b and
// partitioner.rack.aware=true puts every keyless record on a partition led
// by the rack-b node, spread over more than one of them; without
// partitioner.rack.aware (the negative control) records reach the other
// racks' partitions.
func TestRackAwarePartitioning(t *testing.T) {
	racks := []string{"a", "b", "c"}
	c := Start(t, Options{Nodes: 3, NodeConfig: func(i int) map[string]string {
		return map[string]string{"broker.rack": racks[i]}
	}})
	const partitions = 12
	leaderRack := func(topic string) map[int32]string {
		out := map[int32]string{}
		for p := range int32(partitions) {
			l, _ := c.Leader(t, topic, p)
			out[p] = racks[l]
		}
		return out
	}
	produce := func(topic string, props map[string]string) map[int32]int {
		opts := []producer.Opt{producer.BatchSize(2000)}
		for k, v := range props {
			opts = append(opts, producer.Property(k, v))
		}
		p := newLonghaul(t, c.Bootstrap(), nil, opts...)
		got := map[int32]int{}
		for i := range 50 {
			rs := make([]*producer.Record, 40)
			for j := range rs {
				rs[j] = &producer.Record{Topic: topic, Value: fmt.Appendf(value(i*40+j), "%080d", 0)}
			}
			if err := p.ProduceSync(context.Background(), rs...).FirstErr(); err != nil {
				t.Fatalf("ProduceSync: %v", err)
			}
			for _, r := range rs {
				got[r.Partition()]++
			}
		}
		return got
	}

	c.CreateTopic(t, "rack-aware", partitions, 1, nil)
	lr := leaderRack("rack-aware")
	t.Logf("leaders' racks: %v", lr)
	got := produce("rack-aware", map[string]string{"client.rack": "b", "partitioner.rack.aware": "true"})
	for p, n := range got {
		if lr[p] != "b" {
			t.Errorf("%d records on partition %d, led in rack %s", n, p, lr[p])
		}
	}
	if len(got) < 2 {
		t.Errorf("the sticky partition did not move among rack b's partitions: %v", got)
	}
	t.Logf("rack aware: records per partition %v", got)

	c.CreateTopic(t, "rack-unaware", partitions, 1, nil)
	lr = leaderRack("rack-unaware")
	got = produce("rack-unaware", map[string]string{"client.rack": "b"})
	outside := 0
	for p, n := range got {
		if lr[p] != "b" {
			outside += n
		}
	}
	if outside == 0 {
		t.Errorf("negative control: without partitioner.rack.aware every record stayed in rack b: %v", got)
	}
	t.Logf("not rack aware: records per partition %v", got)
}
