// Package protocol is the only part of longhaul that knows Kafka's wire
// format. It is mechanism only: it frames, encodes and decodes, dials and
// negotiates versions, and hands back what the broker said. Like
// http.RoundTripper it never interprets error codes and never retries; that
// policy lives in the producer.
//
// Entry points:
//
//   - Connections: [Dial] returns a pipelined [Conn] after ApiVersions and
//     optional TLS/SASL. [Conn.Send] queues a request and reports its
//     outcome through a callback; [Conn.Do] waits for it. [Conn.Produce]
//     is the produce exchange: a [ProduceRequest] in, a [ProduceResult]
//     out, one answer per batch, without kmsg types. [Conn.Version]
//     and [RequireIdempotentProduce] tell what was negotiated. [SafeToRetry]
//     answers "could the broker have seen it?" for a failed request.
//   - Typed helpers: [Metadata], [InitProducerID], [ListOffsets], [Fetch].
//   - Record batches: [BatchBuilder] builds a RecordBatch v2 (with
//     [Compress] for the body) byte-identical to kmsg's encoding, into the
//     caller's slice ([BatchBuilder.Build]) or, without copying an
//     uncompressed body, into its own ([BatchBuilder.BuildInPlace]);
//     [ParseBatchHeader], [ParseRecordBatch] and [SplitBatches] decode
//     them; [SetBatchSequence] and [SetBaseOffset] patch encoded batches.
//   - Produce v14 (KIP-1269): [ProducePartitionResult] carries the
//     ProducerStateBatchesToRetain tagged field (tag 1) and KIP-951's
//     CurrentLeader hint; on kmsg's types (the embedded broker, tests),
//     [BatchesToRetain] and [SetBatchesToRetain] wrap tag 1, which kmsg
//     keeps in UnknownTags, and [CurrentLeader] reads the hint. No other
//     package touches tag numbers.
//   - Framing, both directions (client and the embedded broker):
//     [ReadFrame], [AppendRequest], [ParseRequest], [AppendResponse],
//     [ParseResponse].
//
// # Context
//
// [Dial]'s ctx bounds the handshake only. [Conn.Send] takes a
// timeout instead of a context, because a request cannot be recalled once
// written; [Conn.Do] and the helpers derive the request deadline from ctx.
//
// # Concurrency
//
// A [Conn] runs one writer goroutine (requests are encoded by
// Send, then written back to back, so callers never wait on the network;
// produce record sets are written from the caller's memory with writev, so
// they belong to the connection until the request's completion has run)
// and one reader goroutine that matches responses to requests by
// correlation id. Deadlines are kept in one heap behind one timer. Each
// request completes exactly once: whoever removes it from the pending set
// under the connection's mutex (reader, timer, or the code killing the
// connection) runs its callback, outside the mutex, unless the writer is
// still writing the request's record bytes: then the writer runs it once
// the write has returned. The free functions are
// safe for concurrent use (compressors come from sync.Pools); a
// [BatchBuilder] belongs to one goroutine at a time.
package protocol
