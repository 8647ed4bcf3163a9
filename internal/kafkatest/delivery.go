package kafkatest

import (
	"context"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/longhaul-kafka/longhaul/internal/logcheck"
)

// Outcome is what a producer reported for one record: logcheck's
// outcomes, under the names the interop tests use.
type Outcome = logcheck.Outcome

const (
	// Acked means the producer reported success: the record must be in
	// the log exactly once, in produce order.
	Acked = logcheck.Acked
	// MaybeWritten means the producer reported a failure whose fate is
	// unknown (for example longhaul's DeliveryError.FateUnknown): the
	// record may be absent or present once, in order.
	MaybeWritten = logcheck.FateUnknown
	// NotWritten means the producer reported a failure and that the record
	// was never written: it must be absent.
	NotWritten = logcheck.NotWritten
)

// Sent is one produced record of a partition, in produce order: its value
// (unique within the partition) and what the producer reported.
type Sent = logcheck.Sent

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
// duplicate, loss, reorder or stray record and how many violations there
// were. Values must be unique within a partition of sent; a repeated value
// is reported as an error. The rules are package logcheck's.
func CheckDelivered(sent map[int32][]Sent, got map[int32][]*kgo.Record) (DeliveryReport, error) {
	r := logcheck.Partitions(sent, entries(got))
	return DeliveryReport{Acked: r.Acked, MaybePresent: r.MaybePresent, MaybeAbsent: r.MaybeAbsent, NotWritten: r.NotWritten}, r.Err()
}

// entries converts consumed records to logcheck's log entries.
func entries(got map[int32][]*kgo.Record) map[int32][]logcheck.Entry {
	out := make(map[int32][]logcheck.Entry, len(got))
	for p, recs := range got {
		es := make([]logcheck.Entry, len(recs))
		for i, r := range recs {
			es[i] = logcheck.Entry{Value: r.Value, Offset: r.Offset}
		}
		out[p] = es
	}
	return out
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
