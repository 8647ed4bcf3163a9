package producer

import (
	"context"
	"time"

	"github.com/longhaul-kafka/longhaul/protocol"
)

// Header is one record header. A nil Value is a null header value.
type Header = protocol.Header

// Record is one message to produce.
//
// The producer owns a Record from the moment it is passed to [Producer.Produce]
// until its callback runs: the caller must not change the Record's fields in
// between. The bytes of Key, Value and header values are copied before
// Produce returns, on every path (also while the topic's partitions are not
// known yet), so the caller may reuse those buffers as soon as Produce
// returns.
type Record struct {
	// Topic is the topic to write to. Required.
	Topic string
	// Key is the record key; nil is a null key. Records with the same key
	// land on the same partition (murmur2, compatible with the Java client).
	Key []byte
	// Value is the record value; nil is a null value (a tombstone).
	Value []byte
	// Headers are written in order.
	Headers []Header
	// Timestamp is the record's create time; the zero value means now.
	// Produce replaces a zero Timestamp with the time it used, so the
	// callback sees the create time the broker stores. A Record reused for
	// a new record keeps that time unless the caller sets Timestamp to
	// zero again (as with kgo.Record).
	Timestamp time.Time

	// Context is the caller's context for this record, carried unchanged
	// to [HookRecordDone] and the callback, so that a tracing plugin can
	// link the record's outcome to the caller's span (as kgo.Record's
	// Context). The producer does not use it otherwise: Produce's ctx
	// bounds the wait for buffer space, and a cancelled Context fails
	// nothing. Nil is allowed.
	Context context.Context

	// Offset is the record's offset, set before a successful callback. It
	// is -1 after a failure, and after a success when the broker
	// acknowledged a retry as a duplicate without telling the offset
	// (brokers older than 1.1 do that).
	Offset int64

	// partition is where the record goes: set by SetPartition, or by the
	// partitioner when Produce places the record. Unexported so that no one
	// can set a field that the partitioner would then silently ignore.
	partition      int32
	hasPartition   bool // partition is set
	fixedPartition bool // SetPartition was called
}

// SetPartition makes the record go to partition p instead of the one the
// partitioner would pick (keyed records included). It is the only way to
// choose a partition; a partition the topic does not have fails the record
// with [ErrInvalidRecord].
func (r *Record) SetPartition(p int32) {
	r.partition = p
	r.hasPartition, r.fixedPartition = true, true
}

// Partition returns the record's partition: the one [Record.SetPartition]
// asked for, or, once Produce has placed the record, the one the
// partitioner picked (so always in a successful callback). It is -1 for a
// record neither placed nor given a partition, for example one that failed
// while its topic's partitions were unknown.
func (r *Record) Partition() int32 {
	if !r.hasPartition {
		return -1
	}
	return r.partition
}

// PartitionFixed reports whether [Record.SetPartition] chose the partition.
func (r *Record) PartitionFixed() bool { return r.fixedPartition }

// Callback receives the outcome of one record: err is nil on success, with
// r.Partition() and r.Offset filled in. See [Producer.Produce] for when and
// where callbacks run.
type Callback func(r *Record, err error)
