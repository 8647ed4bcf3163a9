// Package soak is longhaul's chaos soak: several
// producers write keyed, self-describing records to a 4-node embedded
// KIP-1269 cluster (one old-mode node, one Kafka 2.4 node) while a fault
// schedule drawn from a seed drops responses, kills connections, moves
// leaders (onto old-mode and Kafka 2.4 nodes and back), restarts and stalls
// nodes, expires idle producer ids (KIP-854), injects retriable errors,
// scripts bursts of answers for a partition's next batches from the whole
// vocabulary (every ProduceResponse error code, non-retriable ones
// included; NOT_LEADER_OR_FOLLOWER, REQUEST_TIMED_OUT,
// NOT_ENOUGH_REPLICAS_AFTER_APPEND or DUPLICATE_SEQUENCE_NUMBER after the
// append; ok) and changes topic windows at runtime. At the end every
// partition is read back and checked.
//
// # Entry points
//
// [Run] runs one soak described by a [Config] and returns a
// [Result]; [Result.String] is the one-line summary
//
//	seed=... duration=... records=... faults={...} lost=0 dup=0 reorder=0 window_violations=0 callbacks_out_of_order=0 stuck=0 ... fail_causes={...}
//
// and [Result.Err] is nil only when every check passed.
//
// What is checked:
//   - every acknowledged record is in the log exactly once, at the offset
//     its callback reported;
//   - per partition, each producer's records appear in Produce order;
//   - every callback ran exactly once, and within one producer's partition
//     in Produce order (callbacks_out_of_order), on the partition of the
//     record's key (murmur2, as the Java client);
//   - every failed record carries a [producer.DeliveryError] saying why; a
//     failed record is never in the log twice, and one failed without
//     FateUnknown is not in the log at all; a failure naming a broker
//     error code names one injected or scripted for its partition, or one
//     the embedded broker answers by itself (else unexplained). Failures
//     are counted by cause in fail_causes;
//   - no partition of a producer with records outstanding goes without a
//     callback longer than retry.backoff.max.ms + request.timeout.ms +
//     slack plus what the faults fired meanwhile can cost it (stuck; see
//     stuck.go);
//   - no partition ever had more batches of one producer in flight, as the
//     broker counts them, than the window in force: exactly, except
//     until every producer has learned a shrunk window (from its own
//     Stats) and while the broker still counts batches of a connection a
//     producer gave up (see window.go); window_strict=k/n says how many
//     partition-segments were checked at exactly the window;
//   - the bytes of records accepted and not yet called back stay within
//     buffer.memory (with slack for completed records whose callbacks are
//     queued);
//   - no goroutine is left once the producers and the cluster are closed.
//
// # Reproducing
//
// The seed drives every random choice (the fault schedule and
// what each producer writes), so a failing seed replays the same schedule.
// Goroutine scheduling still varies between runs, so a rare interleaving
// may need a few runs of the same seed.
//
// KIP-854 and lost responses: a batch appended whose response was lost,
// then producer state expired, then the batch retried, is a duplicate no
// client can detect (producer/DESIGN.md, "Non-obvious"); real brokers
// expire ids after 24 h, far beyond delivery.timeout.ms. The schedule
// therefore expires producer ids only after a quiet period: producers
// paused, pending drop and close faults cleared, stalls over, every
// producer flushed (every record called back), a grace period for the
// broker to finish requests of abandoned connections, and then more than a
// second of idleness, so the producer's idle re-arm (its first batch after
// a pause goes alone) applies, as it would before a real expiry; then only
// ids idle longer than the re-arm expire (ExpireIdleProducerIDs), as a
// broker expires only ids idle past producer.id.expiration.ms. Records
// the producer fails with producer.ErrOrderLost are counted as order_lost
// and must not be in the log, as that error promises, FateUnknown or not.
//
// # Concurrency
//
// Run starts the cluster, the producers, one goroutine per
// producer and one fault scheduler, and stops them all before it returns.
// Run may be called from several goroutines, but concurrent soaks share
// the machine and make each other's goroutine check meaningless.
package soak
