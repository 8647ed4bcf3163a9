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
// stays at 5 (1 on Kafka 0.11, which retains only the last batch) and is
// still safe. Brokers before 0.11 cannot take idempotent batches: nothing
// is sent to them, and the records of partitions they lead fail at
// delivery.timeout.ms with an error wrapping
// protocol.ErrIdempotenceUnsupported.
//
// # Entry points
//
// [New] or [NewFromProperties] build a Producer;
// [Producer.Produce] buffers a record and reports its outcome through a
// callback; [Producer.ProduceSync], [Producer.Flush] and [Producer.Close]
// wait. [Producer.Stats] and [Producer.InFlightLimit] show the learned
// windows.
//
// # Blocking and contexts
//
// Produce blocks only while buffer.memory is full,
// until its context is done (TryProduce never blocks). ProduceSync returns
// when its records have their outcomes or soon after its context ends,
// withdrawing the records not yet sent and reporting the ones in flight as
// such. Flush waits for the records produced before it; Close flushes and
// then fails what is left with ErrClosed when its context ends. Cancelling
// a context never fails a record that was sent (its fate would be
// unknown): such records complete in the background.
//
// # Copies
//
// The bytes of a record's Key, Value and header values are copied
// before Produce returns; the Record itself belongs to the producer until
// its callback has run.
//
// # Concurrency
//
// A Producer is safe for concurrent use. One sender goroutine
// talks to the brokers; callbacks run one at a time on a callback goroutine
// owned by the producer, in Produce order within each partition among the
// records Produce accepted (a refused record, e.g. one produced after Close
// began, may be called back before them), and must not block. From a callback, Produce and TryProduce may be called (neither
// waits for buffer.memory there: a full one fails the record with
// ErrBufferFull); Flush, ProduceSync and Close return ErrInCallback instead
// of deadlocking. The same holds in hooks.
//
// # Hooks
//
// The [Hooks] option takes values implementing any of the Hook*
// interfaces ([HookBatchSent], [HookBatchAcked], [HookBatchRejected],
// [HookRecordDone], [HookRecordProduced], [HookWindowChanged],
// [HookProducerID], [HookBrokerConnect], [HookBrokerDisconnect],
// [HookThrottle], [HookRequestDone]) to feed metrics, tracing or tests. Most run on the sender
// goroutine, and none may block; see [Hook].
//
// # Partitions
//
// A record goes to the partition of its key (murmur2, as the
// Java client), or, without a key, to a sticky partition.
// [Record.SetPartition] chooses one explicitly, and [RecordPartitioner]
// (or the partitioner.class and partitioner properties) replaces the
// hash with another [Partitioner].
package producer
