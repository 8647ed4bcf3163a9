package kafkatest

import (
	"github.com/twmb/franz-go/pkg/kgo"

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
