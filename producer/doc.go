// Package producer is longhaul's idempotent Kafka producer: every record
// lands exactly once, in order per partition, with as many batches in
// flight per partition as the broker's deduplication window allows.
//
// Brokers that implement KIP-1269 announce that window,
// ProducerStateBatchesToRetain, in every ProduceResponse v14. The producer
// starts each partition at 5 batches in flight (the limit every broker
// supports), learns the window from each response, and goes back to 5 on a
// leader change or a new connection. Until one batch is acknowledged on the
// current leader and connection, at most one batch of the partition is in
// flight: a broker that lost our state would otherwise accept a later batch
// before an earlier one (KAFKA-15591). Against older brokers the producer
// stays at 5 and is still safe.
//
// Entry points: [New] or [NewFromProperties] build a Producer;
// [Producer.Produce] buffers a record and reports its outcome through a
// callback; [Producer.ProduceSync], [Producer.Flush] and [Producer.Close]
// wait. [Producer.Stats] and [Producer.InFlightLimit] show the learned
// windows.
//
// Concurrency: a Producer is safe for concurrent use. One sender goroutine
// talks to the brokers; callbacks run one at a time on a callback goroutine,
// in order within each partition, and must not block. Calls that can block
// take a context first; cancelling it stops the wait, never a record whose
// fate is unknown.
package producer
