package main

import (
	"fmt"
	"io"
	"time"
)

// pacer issues records at a fixed rate for --rate (open loop). Each record
// gets its intended send time, start + i/rate, as its stamp, so latency is
// measured from when the record should have been sent: time spent blocked
// in Produce on a full buffer, or behind a late loop, counts (no
// coordinated omission). It sleeps only when ahead of schedule; when behind
// it issues at once, so the offered rate holds on average. Times are
// benchClock readings (nanoseconds since epoch).
type pacer struct {
	start    int64
	interval int64
	i        int64
}

func newPacer(recordsPerSec float64) *pacer {
	return &pacer{start: clk.now(), interval: int64(float64(time.Second) / recordsPerSec)}
}

// next returns the intended send time of the next record, after sleeping
// until it if that is more than a millisecond away (shorter sleeps
// overshoot; the record then waits in the producer's linger anyway).
func (p *pacer) next() int64 {
	t := p.start + p.i*p.interval
	p.i++
	if d := time.Duration(t - clk.now()); d > time.Millisecond {
		time.Sleep(d)
	}
	return t
}

// stamp returns the send stamp of the next record: its intended send time
// under --rate, else now.
func stamp(p *pacer) int64 {
	if p == nil {
		return clk.now()
	}
	return p.next()
}

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
