package main

import (
	"fmt"
	"io"
	"math"
	"time"
)

// spread is the mean, minimum and maximum of a few values.
type spread struct {
	n            int
	mean, lo, hi float64
}

func spreadOf(vs []float64) spread {
	s := spread{lo: math.Inf(1), hi: math.Inf(-1)}
	for _, v := range vs {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			continue
		}
		s.n++
		s.mean += v
		s.lo = math.Min(s.lo, v)
		s.hi = math.Max(s.hi, v)
	}
	if s.n > 0 {
		s.mean /= float64(s.n)
	}
	return s
}

// format prints "mean (lo-hi)", or just the mean for one value, "-" for none.
func (s spread) format(prec int) string {
	switch s.n {
	case 0:
		return "-"
	case 1:
		return fmt.Sprintf("%.*f", prec, s.mean)
	}
	return fmt.Sprintf("%.*f (%.*f-%.*f)", prec, s.mean, prec, s.lo, prec, s.hi)
}

// printRatios summarises the rounds of each case: MB/s, and records/s as a
// ratio to kgo's and to java's of the same round (so both sides of a ratio
// ran minutes apart at most), each as mean (min-max) over the rounds; and
// the mean CPU per GB of client and broker.
func printRatios(w io.Writer, o options, rs []result) {
	order, byGroup := groupRounds(rs)
	if len(order) == 0 {
		return
	}
	fmt.Fprintf(w, "\nRatios over %d round(s): mean (min-max); x kgo and x java divide records/s by theirs in the same round:\n\n", o.repeat)
	fmt.Fprintln(w, "| RTT | parts | batch | client | MB/s | x kgo | x java | of bound | client CPU s/GB | broker CPU s/GB |")
	fmt.Fprintln(w, "|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|")
	for _, g := range order {
		for _, k := range o.clients {
			runs := byGroup[g][k.name]
			if len(runs) == 0 {
				continue
			}
			var mbps, xKgo, xJava, ofBound, cpu, broker []float64
			for round, r := range runs {
				mbps = append(mbps, r.mbps)
				if !math.IsInf(r.boundMBps, 1) && r.boundMBps > 0 {
					ofBound = append(ofBound, 100*r.mbps/r.boundMBps)
				}
				if kg, ok := byGroup[g]["kgo"][round]; ok && kg.recsPerSec > 0 {
					xKgo = append(xKgo, r.recsPerSec/kg.recsPerSec)
				}
				if j, ok := byGroup[g]["java"][round]; ok && j.recsPerSec > 0 {
					xJava = append(xJava, r.recsPerSec/j.recsPerSec)
				}
				if r.cpuPerGB >= 0 {
					cpu = append(cpu, r.cpuPerGB)
				}
				if r.brokerPerG >= 0 {
					broker = append(broker, r.brokerPerG)
				}
			}
			pct := spreadOf(ofBound).format(0)
			if pct != "-" {
				pct += " %"
			}
			fmt.Fprintf(w, "| %v | %d | %s | %s | %s | %s | %s | %s | %s | %s |\n",
				g.rtt, g.parts, fmtBytes(g.batch), k.name, spreadOf(mbps).format(1),
				spreadOf(xKgo).format(2), spreadOf(xJava).format(2), pct,
				spreadOf(cpu).format(2), spreadOf(broker).format(2))
		}
	}
}

// printMemory summarises --heap: records/s as a ratio to kgo's of the same
// round, the live heap while every partition is active and once idle, each
// over the rounds as mean (min-max); heap x kgo divides by kgo's of the
// same round; per partition is the idle heap divided by the partition
// count; active - buffer is what the active heap holds beyond buffer.memory,
// per partition.
func printMemory(w io.Writer, o options, rs []result) {
	order, byGroup := groupRounds(rs)
	keys := "keyless"
	if o.keyed {
		keys = "keyed"
	}
	const mib = 1 << 20
	fmt.Fprintf(w, "\nMemory (%s, %d-byte records) over %d round(s): mean (min-max); live heap after a GC above the case's baseline:\n\n", keys, o.recordSize, o.repeat)
	fmt.Fprintln(w, "| RTT | parts | batch | client | records/s | x kgo | buffer.memory MiB | heap active MiB | heap active x kgo | (active - buffer.memory) B/partition | heap idle MiB | idle B/partition | idle CPU ms/s |")
	fmt.Fprintln(w, "|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, g := range order {
		for _, k := range o.clients {
			runs := byGroup[g][k.name]
			if len(runs) == 0 || k.java {
				continue // java runs in its own JVM: no heap figures
			}
			var recs, xKgo, act, xAct, over, idle, idlePP, idleCPU []float64
			var buf int64
			for round, r := range runs {
				buf = r.bufferBytes
				recs = append(recs, r.recsPerSec)
				act = append(act, float64(r.heapActive)/mib)
				over = append(over, float64(r.heapActive-r.bufferBytes)/float64(g.parts))
				idle = append(idle, float64(r.heapIdle)/mib)
				idlePP = append(idlePP, float64(r.heapIdle)/float64(g.parts))
				if r.idleCPU >= 0 {
					idleCPU = append(idleCPU, 1000*r.idleCPU)
				}
				if kg, ok := byGroup[g]["kgo"][round]; ok {
					if kg.recsPerSec > 0 {
						xKgo = append(xKgo, r.recsPerSec/kg.recsPerSec)
					}
					if kg.heapActive > 0 {
						xAct = append(xAct, float64(r.heapActive)/float64(kg.heapActive))
					}
				}
			}
			fmt.Fprintf(w, "| %v | %d | %s | %s | %s | %s | %.0f | %s | %s | %s | %s | %s | %s |\n",
				g.rtt, g.parts, fmtBytes(g.batch), k.name, spreadOf(recs).format(0), spreadOf(xKgo).format(2),
				float64(buf)/mib, spreadOf(act).format(1), spreadOf(xAct).format(2), spreadOf(over).format(0),
				spreadOf(idle).format(1), spreadOf(idlePP).format(0), spreadOf(idleCPU).format(1))
		}
	}
}

// caseGroup is one case of the matrix, whose clients and rounds the
// summaries compare.
type caseGroup struct {
	rtt   time.Duration
	parts int
	batch int
}

// groupRounds sorts results by case, in the order cases first ran, then by
// client name and round.
func groupRounds(rs []result) (order []caseGroup, byGroup map[caseGroup]map[string]map[int]result) {
	byGroup = map[caseGroup]map[string]map[int]result{}
	for _, r := range rs {
		g := caseGroup{r.rtt, r.partitions, r.batch}
		if byGroup[g] == nil {
			byGroup[g] = map[string]map[int]result{}
			order = append(order, g)
		}
		if byGroup[g][r.client.name] == nil {
			byGroup[g][r.client.name] = map[int]result{}
		}
		byGroup[g][r.client.name][r.round] = r
	}
	return order, byGroup
}
