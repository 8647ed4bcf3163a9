package producer

import (
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
	Timestamp time.Time

	// Partition is the partition the record was written to, filled in before
	// the callback runs. It is an input only after [Record.SetPartition]; a
	// zero value never silently means partition 0.
	Partition int32
	// Offset is the record's offset, filled in on success. It is -1 when the
	// broker acknowledged a retry as a duplicate without telling the offset
	// (brokers older than 1.1 do that).
	Offset int64

	fixedPartition bool
}

// SetPartition asks for the record to be written to partition p instead of
// the one the partitioner would pick.
func (r *Record) SetPartition(p int32) {
	r.Partition = p
	r.fixedPartition = true
}

// PartitionFixed reports whether [Record.SetPartition] chose the partition.
func (r *Record) PartitionFixed() bool { return r.fixedPartition }

// Callback receives the outcome of one record: err is nil on success, with
// r.Partition and r.Offset filled in. See [Producer.Produce] for when and
// where callbacks run.
type Callback func(r *Record, err error)
