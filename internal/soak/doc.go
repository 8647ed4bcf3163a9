// Package soak is longhaul's chaos soak (GitHub issue 9): several
// producers write keyed, self-describing records to a 3-node embedded
// KIP-1269 cluster while a fault schedule drawn from a seed drops
// responses, kills connections, moves leaders (onto old-mode nodes and
// back), restarts and stalls nodes, expires producer ids (KIP-854),
// injects retriable errors and changes topic windows at runtime. At the
// end every partition is read back and checked.
//
// Entry points: [Run] runs one soak described by a [Config] and returns a
// [Result]; [Result.String] is the one-line summary
//
//	seed=... duration=... records=... faults={...} lost=0 dup=0 reorder=0 window_violations=0 ...
//
// and [Result.Err] is nil only when every check passed.
//
// What is checked:
//   - every acknowledged record is in the log exactly once, at the offset
//     its callback reported;
//   - per partition, each producer's records appear in Produce order;
//   - every callback ran exactly once;
//   - every failed record carries a [producer.DeliveryError] saying why; a
//     failed record is never in the log twice, and one failed without
//     FateUnknown is not in the log at all;
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
// Reproducing: the seed drives every random choice (the fault schedule and
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
// a pause goes alone) applies, as it would before a real expiry. Records
// the producer fails with producer.ErrOrderLost are counted as order_lost.
//
// Concurrency: Run starts the cluster, the producers, one goroutine per
// producer and one fault scheduler, and stops them all before it returns.
// Run may be called from several goroutines, but concurrent soaks share
// the machine and make each other's goroutine check meaningless.
package soak
