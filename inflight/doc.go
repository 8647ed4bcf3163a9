// Package inflight decides when an idempotent producer may send one more
// batch of a partition, so that no partition ever has more batches in flight
// than its leader can deduplicate (KIP-1269).
//
// Two checks must both hold before a batch of partition P goes to node B:
//
//  1. Per partition: batches of P in flight < limit(P). The limit starts at
//     [DefaultWindow] (5) and is learned from ProducerStateBatchesToRetain in
//     every partition response of P's current leader; it goes back to 5 on a
//     leader change (new leader id or leader epoch), on a new connection to
//     the leader and on [Limiter.ResetAll]. Until one batch is acknowledged
//     after such a reset (the first-batch gate) the limit is 1, and after a
//     failure no new batch goes out until P's in-flight batches have drained
//     (then the gate re-arms), because a broker without state for the
//     producer accepts a first batch at any sequence.
//  2. Per node: requests in flight on the current connection to B <
//     max.in.flight.requests.per.connection (any value >= 1).
//
// The entry points are [New], [Limiter.Reserve], [Limiter.Complete] and
// [Limiter.Finish]; [Limiter.SetLeader], [Limiter.NewConnection] and
// [Limiter.ResetAll] report what the producer learns. The package is pure
// logic: it starts no goroutines, does no I/O and reads no clock. A [Limiter]
// is safe for concurrent use; one mutex guards all of its state, and the only
// user code it calls, [Config.OnInvalidWindow], runs after that mutex is
// released.
package inflight
