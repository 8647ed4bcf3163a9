// Package perfstat measures a produce run the way Kafka's
// kafka-producer-perf-test reports it, for longhaul's example programs.
//
// # Entry points
//
// A [Histogram] keeps latencies in fixed memory (224 KiB,
// exact below 1024µs, within 0.1% above) and answers percentiles; a [Recorder]
// wraps one with record and byte counts, hands out a [Window] for progress
// lines and a [Summary] at the end. [Summary.String] and [Window.String]
// print Kafka's line shapes; [ParseSummary] reads a summary line back, so
// scripts and tests can check a run.
//
// # Concurrency
//
// A Histogram belongs to one goroutine at a time; a Recorder
// is safe for concurrent use. Nothing here reads a clock: callers pass the
// time, which keeps the arithmetic testable.
package perfstat
