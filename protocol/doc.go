// Package protocol is the only part of longhaul that knows Kafka's wire
// format. It is mechanism only: it frames, encodes and decodes, dials and
// negotiates versions, and returns what the broker said. Like
// http.RoundTripper it never interprets error codes and never retries;
// that policy lives in the producer.
//
// Entry points:
//
//   - Record batches: [BatchBuilder] builds a RecordBatch v2 (with
//     [Compress] for the body); [ParseBatchHeader], [ParseRecordBatch] and
//     [SplitBatches] decode them; [SetBatchSequence] and [SetBaseOffset]
//     patch encoded batches in place.
//   - Produce v14 (KIP-1269): [BatchesToRetain] and [SetBatchesToRetain]
//     wrap the ProducerStateBatchesToRetain tagged field, which kmsg keeps
//     in UnknownTags; [CurrentLeader] reads KIP-951's hint.
//   - Framing, both directions: [ReadFrame], [AppendRequest],
//     [ParseRequest], [AppendResponse], [ParseResponse].
//
// Concurrency: the free functions are safe for concurrent use (compressors
// come from sync.Pools). A [BatchBuilder] belongs to one goroutine at a time.
package protocol
