package protocol_test

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/longhaul-kafka/longhaul/protocol"
)

// Build a compressed batch, renumber it as after an epoch bump, and decode
// it as a broker would.
func ExampleBatchBuilder() {
	var b protocol.BatchBuilder
	b.Append(1700000000000, []byte("user-1"), []byte("hello"), nil)
	b.Append(1700000000005, nil, []byte("world"), []protocol.Header{{Key: "trace", Value: []byte("42")}})
	batch, err := b.Build(nil, protocol.BatchHeader{ProducerID: 1000, ProducerEpoch: 0, BaseSequence: 10, Compression: protocol.CodecLz4})
	if err != nil {
		panic(err)
	}
	if err := protocol.SetBatchSequence(batch, 1000, 1, 0); err != nil {
		panic(err)
	}
	protocol.SetBaseOffset(batch, 500)
	info, recs, err := protocol.ParseRecordBatch(batch, 1<<20)
	if err != nil {
		panic(err)
	}
	fmt.Println(info.Compression(), info.ProducerEpoch, info.BaseSequence, info.LastSequence())
	for _, r := range recs {
		fmt.Printf("%d %q %q %d\n", r.Offset, r.Key, r.Value, len(r.Headers))
	}
	// Output:
	// lz4 1 0 1
	// 500 "user-1" "hello" 0
	// 501 "" "world" 1
}

// Read the dedup window a v14 broker announces, applying the producer's
// "absent or <= 0 means 5" policy.
func ExampleBatchesToRetain() {
	var p kmsg.ProduceResponseTopicPartition
	protocol.SetBatchesToRetain(&p, 64)
	for _, version := range []int16{13, 14} {
		n, present, err := protocol.BatchesToRetain(version, &p)
		if err != nil || n <= 0 {
			n = protocol.DefaultBatchesToRetain
		}
		fmt.Println(version, n, present)
	}
	// Output:
	// 13 5 false
	// 14 64 true
}
