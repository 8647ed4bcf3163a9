package main

import (
	"fmt"
	"io"
	"time"
)

// pacer issues records at a fixed rate for --rate (open loop). Each record
// gets its intended send time, start + i/rate, as its timestamp, so
// latency is measured from when the record should have been sent: time
// spent blocked in Produce on a full buffer, or behind a late loop, counts
// (no coordinated omission). It sleeps only when ahead of schedule; when
// behind it issues at once, so the offered rate holds on average.
type pacer struct {
	start    time.Time
	interval time.Duration
	i        int64
}

func newPacer(recordsPerSec float64) *pacer {
	return &pacer{start: time.Now(), interval: time.Duration(float64(time.Second) / recordsPerSec)}
}

// next returns the intended send time of the next record, after sleeping
// until it if that is more than a millisecond away (shorter sleeps
// overshoot; the record then waits in the producer's linger anyway).
func (p *pacer) next() time.Time {
	t := p.start.Add(time.Duration(p.i) * p.interval)
	p.i++
	if d := time.Until(t); d > time.Millisecond {
		time.Sleep(d)
	}
	return t
}

// stamp returns the timestamp of the next record: its intended send time
// under --rate, else now (monoNow).
func stamp(p *pacer) time.Time {
	if p == nil {
		return monoNow()
	}
	return p.next()
}

// epoch is when the program started, with its wall and monotonic readings.
var epoch = time.Now()

// monoNow is the current time computed from one monotonic clock reading:
// epoch plus the monotonic time since. time.Now reads the wall clock too:
// 92 ns against 60 on the bench machine, on a per-record path that was
// 12 % of the client process's CPU at 100-byte records (both Go clients).
// Within a run the two differ only by wall-clock adjustments, and the
// result keeps its monotonic reading, so latencies (time.Since) read one
// clock too.
func monoNow() time.Time { return epoch.Add(time.Since(epoch)) }

// printLatency prints the open-loop latency of each case run with --rate.
func printLatency(w io.Writer, o options, rs []result) {
	if o.rate <= 0 || len(rs) == 0 {
		return
	}
	fmt.Fprintf(w, "\nOpen loop: %.1f MB/s offered (%.0f records/s), latency from the intended send time:\n\n", o.rate*float64(o.recordSize)/1e6, o.rate)
	fmt.Fprintln(w, "| RTT | parts | batch | client | served MB/s | p50 | p99 | p99.9 | client CPU s/GB |")
	fmt.Fprintln(w, "|---:|---:|---:|---|---:|---:|---:|---:|---:|")
	for _, r := range rs {
		cpu := "-"
		if r.cpuPerGB >= 0 {
			cpu = fmt.Sprintf("%.2f", r.cpuPerGB)
		}
		name := r.client.name
		if o.repeat > 1 {
			name += fmt.Sprintf(" #%d", r.round)
		}
		fmt.Fprintf(w, "| %v | %d | %s | %s | %.1f | %s | %s | %s | %s |\n", r.rtt, r.partitions, fmtBytes(r.batch), name,
			r.mbps, fmtDur(r.p50), fmtDur(r.p99), fmtDur(r.p999), cpu)
	}
}
