package perfstat

import (
	"fmt"
	"strings"
	"time"
)

// mib is Kafka's perf tool's "MB": it divides bytes by 1024*1024.
const mib = 1 << 20

// Summary is a whole run, in the terms kafka-producer-perf-test prints at
// the end. Latencies run from the Produce call to the record's callback.
// The JSON names are what examples/perf --json prints.
type Summary struct {
	Records       int64   `json:"records"`
	Bytes         int64   `json:"bytes"`
	ElapsedSec    float64 `json:"elapsed_sec"`
	RecordsPerSec float64 `json:"records_per_sec"`
	MBPerSec      float64 `json:"mb_per_sec"` // MiB/s, as Kafka's tool computes it
	AvgLatencyMs  float64 `json:"avg_latency_ms"`
	MaxLatencyMs  float64 `json:"max_latency_ms"`
	P50Ms         float64 `json:"p50_ms"`
	P95Ms         float64 `json:"p95_ms"`
	P99Ms         float64 `json:"p99_ms"`
	P999Ms        float64 `json:"p99_9_ms"`
}

// Summarize builds a Summary of records and bytes over elapsed from the
// latencies in h. Rates are 0 when elapsed is not positive.
func Summarize(records, bytes int64, elapsed time.Duration, h *Histogram) Summary {
	s := Summary{
		Records:      records,
		Bytes:        bytes,
		ElapsedSec:   elapsed.Seconds(),
		AvgLatencyMs: ms(h.Mean()),
		MaxLatencyMs: ms(h.Max()),
		P50Ms:        ms(h.Quantile(0.5)),
		P95Ms:        ms(h.Quantile(0.95)),
		P99Ms:        ms(h.Quantile(0.99)),
		P999Ms:       ms(h.Quantile(0.999)),
	}
	if elapsed > 0 {
		s.RecordsPerSec = float64(records) / elapsed.Seconds()
		s.MBPerSec = float64(bytes) / mib / elapsed.Seconds()
	}
	return s
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// String is Kafka's final line, percentiles in whole milliseconds as the
// Java tool prints them:
//
//	N records sent, X records/sec (Y MB/sec), A ms avg latency, B ms max latency, p50 ms 50th, p95 ms 95th, p99 ms 99th, p99.9 ms 99.9th.
func (s Summary) String() string {
	return fmt.Sprintf("%d records sent, %f records/sec (%.2f MB/sec), %.2f ms avg latency, %.2f ms max latency, %d ms 50th, %d ms 95th, %d ms 99th, %d ms 99.9th.",
		s.Records, s.RecordsPerSec, s.MBPerSec, s.AvgLatencyMs, s.MaxLatencyMs,
		int64(s.P50Ms), int64(s.P95Ms), int64(s.P99Ms), int64(s.P999Ms))
}

// ParseSummary reads a line printed by [Summary.String] (surrounding text
// on the line is not allowed). Percentiles come back in whole
// milliseconds; Bytes and ElapsedSec are not in the line and stay 0. A
// line of another shape is [ErrNotSummary].
func ParseSummary(line string) (Summary, error) {
	var s Summary
	var p50, p95, p99, p999 int64
	var tail string
	n, err := fmt.Sscanf(line, "%d records sent, %f records/sec (%f MB/sec), %f ms avg latency, %f ms max latency, %d ms 50th, %d ms 95th, %d ms 99th, %d ms 99.9th%s",
		&s.Records, &s.RecordsPerSec, &s.MBPerSec, &s.AvgLatencyMs, &s.MaxLatencyMs, &p50, &p95, &p99, &p999, &tail)
	if err != nil || n != 10 || tail != "." || !strings.HasSuffix(line, " 99.9th.") {
		return Summary{}, fmt.Errorf("%w: %q", ErrNotSummary, line)
	}
	s.P50Ms, s.P95Ms, s.P99Ms, s.P999Ms = float64(p50), float64(p95), float64(p99), float64(p999)
	return s, nil
}

// Window is one progress interval of a run.
type Window struct {
	Records    int64
	Bytes      int64
	Elapsed    time.Duration
	AvgLatency time.Duration
	MaxLatency time.Duration
}

// String is Kafka's progress line:
//
//	N records sent, X records/sec (Y MB/sec), A ms avg latency, B ms max latency.
func (w Window) String() string {
	var rps, mbps float64
	if sec := w.Elapsed.Seconds(); sec > 0 {
		rps = float64(w.Records) / sec
		mbps = float64(w.Bytes) / mib / sec
	}
	return fmt.Sprintf("%d records sent, %.1f records/sec (%.2f MB/sec), %.1f ms avg latency, %.1f ms max latency.",
		w.Records, rps, mbps, ms(w.AvgLatency), ms(w.MaxLatency))
}
