package kafkatest

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Outcome is what a producer reported for one record.
type Outcome uint8

const (
	// Acked means the producer reported success: the record must be in
	// the log exactly once, in produce order.
	Acked Outcome = iota
	// MaybeWritten means the producer reported a failure whose fate is
	// unknown (for example longhaul's DeliveryError.FateUnknown): the
	// record may be absent or present once, in order.
	MaybeWritten
	// NotWritten means the producer reported a failure and that the record
	// was never written: it must be absent.
	NotWritten
)

// Sent is one produced record of a partition, in produce order: its value
// (unique within the partition) and what the producer reported.
type Sent struct {
	Value   []byte
	Outcome Outcome
}

// DeliveryReport counts what [CheckDelivered] found over all partitions.
type DeliveryReport struct {
	Acked        int // acknowledged records, all found exactly once
	MaybePresent int // MaybeWritten records found in the log (once)
	MaybeAbsent  int // MaybeWritten records not in the log
	NotWritten   int // NotWritten records (all absent)
}

// CheckDelivered compares what a producer reported, per partition in
// produce order, with what the log holds, and returns counts and nil when
// every Acked record is present exactly once, every MaybeWritten record at
// most once, no NotWritten or unknown record is present, and the log order
// is the produce order. Otherwise it returns an error describing the first
// duplicate, loss, reorder or stray record. Values must be unique within a
// partition of sent; a repeated value is reported as an error.
func CheckDelivered(sent map[int32][]Sent, got map[int32][]*kgo.Record) (DeliveryReport, error) {
	var rep DeliveryReport
	parts := make([]int32, 0, len(sent)+len(got))
	for p := range sent {
		parts = append(parts, p)
	}
	for p := range got {
		if _, ok := sent[p]; !ok {
			parts = append(parts, p)
		}
	}
	slices.Sort(parts)
	for _, p := range parts {
		s, g := sent[p], got[p]
		pos := make(map[string]int, len(s))
		for i, r := range s {
			if _, dup := pos[string(r.Value)]; dup {
				return rep, fmt.Errorf("partition %d: value %q produced twice: values must be unique", p, r.Value)
			}
			pos[string(r.Value)] = i
		}
		found := make([]bool, len(s))
		next := 0 // every sent record before next is settled
		for _, r := range g {
			j, ok := pos[string(r.Value)]
			switch {
			case !ok:
				return rep, fmt.Errorf("partition %d: offset %d holds %q, never produced: stray", p, r.Offset, r.Value)
			case found[j]:
				return rep, fmt.Errorf("partition %d: %q again at offset %d: duplicate", p, r.Value, r.Offset)
			case j < next:
				return rep, fmt.Errorf("partition %d: %q (produced #%d) at offset %d after a later record: reordered", p, r.Value, j, r.Offset)
			case s[j].Outcome == NotWritten:
				return rep, fmt.Errorf("partition %d: %q at offset %d was reported as not written", p, r.Value, r.Offset)
			}
			for k := next; k < j; k++ {
				if s[k].Outcome == Acked {
					return rep, fmt.Errorf("partition %d: acknowledged %q (produced #%d) missing before %q at offset %d: lost or reordered", p, s[k].Value, k, r.Value, r.Offset)
				}
			}
			found[j] = true
			next = j + 1
		}
		for k := next; k < len(s); k++ {
			if s[k].Outcome == Acked {
				return rep, fmt.Errorf("partition %d: acknowledged %q (produced #%d) missing: lost (log holds %d records)", p, s[k].Value, k, len(g))
			}
		}
		for k, r := range s {
			switch {
			case r.Outcome == Acked:
				rep.Acked++
			case r.Outcome == NotWritten:
				rep.NotWritten++
			case found[k]:
				rep.MaybePresent++
			default:
				rep.MaybeAbsent++
			}
		}
	}
	return rep, nil
}

// EndOffsets returns each partition's log end offset (ListOffsets latest,
// asked of the partition's leader over the DIRECT listener). For a topic
// written only by non-transactional producers it is the number of records
// in the partition, duplicates included, which is what lets a checker read
// everything with [Cluster.Consume] instead of stopping at the expected
// count. It fails the test on error.
func (c *Cluster) EndOffsets(t testing.TB, topic string, partitions int32) map[int32]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	out := make(map[int32]int64, partitions)
	for p := range partitions {
		leader := c.Partition(t, topic, p).Leader
		if leader < 0 || int(leader) >= len(c.nodes) {
			t.Fatalf("kafkatest: %s/%d has no leader (%d)", topic, p, leader)
		}
		req := kmsg.NewPtrListOffsetsRequest()
		req.ReplicaID = -1
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = p, -1, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := requestNode(ctx, c.nodes[leader].directAddr, req)
		if err != nil {
			t.Fatalf("kafkatest: ListOffsets %s/%d: %v", topic, p, err)
		}
		for _, tr := range resp.(*kmsg.ListOffsetsResponse).Topics {
			for _, pr := range tr.Partitions {
				if pr.ErrorCode != 0 {
					t.Fatalf("kafkatest: %v", &ResponseError{Op: "ListOffsets", Resource: fmt.Sprintf("%s/%d", topic, p), Err: kerr.ErrorForCode(pr.ErrorCode)})
				}
				out[pr.Partition] = pr.Offset
			}
		}
	}
	return out
}
