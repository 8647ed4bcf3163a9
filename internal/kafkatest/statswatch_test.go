package kafkatest

import (
	"testing"

	"github.com/longhaul-kafka/longhaul/producer"
)

// TestStatsWatchFlagsViolations is the negative control of the Stats
// sampler the longhaul interop tests assert with: snapshots a broken
// producer would show (more than 5 in flight on Kafka 4.4, a limit above
// 5, two batches in flight while gated) must be flagged, a legal run not,
// and leader changes must start a new span that records the armed gate.
func TestStatsWatchFlagsViolations(t *testing.T) {
	snap := func(leader int32, limit, inFlight int, gated bool) producer.Stats {
		return producer.Stats{Partitions: []producer.PartitionStats{
			{Topic: "other", Partition: 0, Limit: 50, InFlight: 50}, // another topic: ignored
			{Topic: "t", Partition: 0, Leader: leader, Limit: limit, InFlight: inFlight, Gated: gated},
		}}
	}
	legal := newStatsWatch()
	for _, s := range []producer.Stats{snap(1, 5, 1, true), snap(1, 5, 5, false), snap(2, 5, 1, true), snap(2, 5, 0, true), snap(2, 5, 4, false)} {
		legal.observe(s, "t")
	}
	if len(legal.overLimit) != 0 || len(legal.gateBreached) != 0 {
		t.Fatalf("legal run flagged: %v %v", legal.overLimit, legal.gateBreached)
	}
	spans := legal.leaders[0]
	if len(spans) != 2 || spans[1].leader != 2 || spans[1].firstGatedIdx != 0 || spans[1].gatedRuns != 1 || spans[1].gatedSamples != 2 {
		t.Fatalf("leader spans %+v", spans)
	}
	if legal.maxInFlight[0] != 5 {
		t.Fatalf("max in flight %d, want 5", legal.maxInFlight[0])
	}

	for name, s := range map[string]producer.Stats{
		"six in flight":       snap(1, 5, 6, false),
		"limit above 5":       snap(1, 6, 1, false),
		"over a learned 3":    snap(1, 3, 4, false),
		"two in flight gated": snap(1, 5, 2, true),
	} {
		w := newStatsWatch()
		w.observe(s, "t")
		if len(w.overLimit)+len(w.gateBreached) == 0 {
			t.Errorf("%s: not flagged", name)
		}
	}
}
