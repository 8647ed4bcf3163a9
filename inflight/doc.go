// Package inflight decides when an idempotent producer may send one more
// batch of a partition, so that no partition ever has more batches in flight
// than its leader can deduplicate (KIP-1269).
//
// # Rules
//
// Three checks must all hold before a batch of partition P goes to node B:
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
//  2. Window anchored at the oldest unacknowledged batch: every batch has a
//     position in P's send order ([Candidate].Pos; a new batch one more
//     than the previous new one, a retried batch its own), and a batch goes
//     out only if pos - oldest unacknowledged position of P < limit(P).
//     Counting batches in flight is not enough: when an early response is
//     lost while later batches are acked, slots free up, and batches sent on
//     them would push the unacknowledged one out of the broker's retained
//     window, so its retry could no longer be recognised as a duplicate.
//     Positions are released as etcd raft's Inflights frees its (FreeLE),
//     except that an ack covers its own batch only: the oldest
//     unacknowledged position ([Limiter.Anchor]) moves only once it is
//     acked or abandoned ([Limiter.Abandon]); a failed batch keeps its
//     position for its retry. Positions survive leader changes, new
//     connections and resets (an epoch bump renumbers sequences, not
//     positions). Memory follows the positions outstanding, never the
//     window, which may be as large as 2^31-1.
//  3. Per node: requests in flight on the current connection to B <
//     max.in.flight.requests.per.connection (any value >= 1).
//
// # Entry points
//
// [New] makes a [Limiter]; [Limiter.Reserve] admits batches,
// [Limiter.Complete], [Limiter.Abandon] and [Limiter.Finish] report their
// ends, and [Limiter.SetLeader], [Limiter.NewConnection] and
// [Limiter.ResetAll] report what the producer learns.
//
// # Concurrency
//
// The package is pure logic: it starts no goroutines, does no I/O and reads
// no clock. A [Limiter] is safe for concurrent use; one mutex guards all of
// its state, and the only user code it calls, [Config.OnInvalidWindow], runs
// after that mutex is released.
package inflight
