package main

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// printTable prints the runs side by side, one column per topic. MB/s is
// 10^6 bytes of record values per second, from the first Produce to the
// last acknowledgement.
func (d *demo) printTable(results []result) {
	if len(results) == 0 {
		return
	}
	var rows [][]string
	row := func(label string, cell func(r result) string) {
		cells := []string{label}
		for _, r := range results {
			cells = append(cells, cell(r))
		}
		rows = append(rows, cells)
	}
	inflightLabel := "max batches in flight (broker)"
	if d.cluster == nil {
		inflightLabel = "max batches in flight (producer, sampled)"
	}
	base := results[0].mbps()
	row("topic", func(r result) string { return r.topic })
	row("producer.state.batches.to.retain", func(r result) string { return fmt.Sprint(r.window) })
	row("learned window", func(r result) string {
		if r.learnedMin == r.learnedMax {
			return fmt.Sprint(r.learnedMax)
		}
		return fmt.Sprintf("%d..%d", r.learnedMin, r.learnedMax)
	})
	row(inflightLabel, func(r result) string { return fmt.Sprint(r.maxInFlight) })
	row("records acked", func(r result) string { return fmt.Sprint(r.acked) })
	row("time", func(r result) string { return r.elapsed.Round(10 * time.Millisecond).String() })
	row("MB/s", func(r result) string { return fmt.Sprintf("%.2f", r.mbps()) })
	row("records/s", func(r result) string { return fmt.Sprintf("%.0f", r.rps()) })
	row(fmt.Sprintf("bound MB/s (%s)", d.boundFormula()), func(r result) string { return fmt.Sprintf("%.2f", d.bound(r)) })
	row("speed-up", func(r result) string {
		if base <= 0 {
			return "-"
		}
		return fmt.Sprintf("%.1fx", r.mbps()/base)
	})
	if d.cluster != nil {
		row("log: each record once, in order", func(r result) string {
			switch {
			case r.logCheck == "":
				return "-"
			case r.logCheck == logOK:
				return "ok"
			}
			return "FAILED"
		})
	}
	writeTable(d.stdout, rows)
	for _, r := range results {
		if r.logCheck != "" && r.logCheck != logOK {
			fmt.Fprintf(d.stdout, "%s: log check FAILED: %s\n", r.topic, r.logCheck)
		}
	}
}

// writeTable prints rows with the first column left-aligned and the others
// right-aligned, two spaces apart.
func writeTable(w io.Writer, rows [][]string) {
	var width []int
	for _, r := range rows {
		for i, c := range r {
			if i >= len(width) {
				width = append(width, 0)
			}
			width[i] = max(width[i], len(c))
		}
	}
	for _, r := range rows {
		var b strings.Builder
		for i, c := range r {
			if i == 0 {
				fmt.Fprintf(&b, "%-*s", width[0], c)
				continue
			}
			fmt.Fprintf(&b, "  %*s", width[i], c)
		}
		fmt.Fprintln(w, b.String())
	}
}

func (d *demo) boundFormula() string {
	f := fmt.Sprintf("window x %d B / %v", d.o.batchSize, d.rtt.Round(10*time.Microsecond))
	if d.o.partitions > 1 {
		f = fmt.Sprintf("%d partitions x ", d.o.partitions) + f
	}
	return f
}

// bound is the most a window allows: partitions x window x batch bytes per
// round trip, in 10^6 bytes per second. Record overhead makes the values
// that fit in a batch a little fewer than batch.size bytes, so a full pipe
// measures a little under it.
func (d *demo) bound(r result) float64 {
	if d.rtt <= 0 {
		return 0
	}
	return float64(d.o.partitions*r.window*d.o.batchSize) / 1e6 / d.rtt.Seconds()
}
