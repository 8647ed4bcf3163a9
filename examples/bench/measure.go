package main

import (
	"bufio"
	"bytes"
	"fmt"
	"math/bits"
	"os"
	"runtime"
	"strconv"
	"sync/atomic"
	"time"
)

// histogram counts latencies in microseconds in log buckets with 16
// sub-buckets per power of two (about 6 % wide). It is safe for concurrent
// use and never allocates after construction: callbacks of both clients add
// to it on their own goroutines.
type histogram struct {
	counts [nBuckets]atomic.Int64
}

const nBuckets = 64 * 16

// bucketOf maps v to its bucket: values below 16 exactly, above that by
// their top five bits.
func bucketOf(v uint64) int {
	if v < 16 {
		return int(v)
	}
	e := bits.Len64(v) // v is in [2^(e-1), 2^e), e >= 5
	return (e-4)*16 + int((v>>(e-5))&15)
}

// bucketUpper is the largest value that falls into bucket i.
func bucketUpper(i int) uint64 {
	if i < 16 {
		return uint64(i)
	}
	e := i/16 + 4
	m := uint64(i%16 + 16)
	return (m+1)<<(e-5) - 1
}

func (h *histogram) add(d time.Duration) {
	us := d.Microseconds()
	if us < 0 {
		us = 0
	}
	h.counts[bucketOf(uint64(us))].Add(1)
}

// snapshot copies the counts, so a window's histogram is end minus start.
func (h *histogram) snapshot() []int64 {
	out := make([]int64, nBuckets)
	for i := range h.counts {
		out[i] = h.counts[i].Load()
	}
	return out
}

// total is the number of samples in counts.
func total(counts []int64) int64 {
	var n int64
	for _, c := range counts {
		n += c
	}
	return n
}

// quantile returns the upper bound of the bucket holding quantile q of the
// counts end-start; 0 when the window saw no sample.
func quantile(start, end []int64, q float64) time.Duration {
	var total int64
	for i := range end {
		total += end[i] - start[i]
	}
	if total == 0 {
		return 0
	}
	rank := int64(q*float64(total) + 0.5)
	rank = max(rank, 1)
	var seen int64
	for i := range end {
		seen += end[i] - start[i]
		if seen >= rank {
			return time.Duration(bucketUpper(i)) * time.Microsecond
		}
	}
	return time.Duration(bucketUpper(nBuckets-1)) * time.Microsecond
}

// usage is a point-in-time reading of the resources a case consumes.
type usage struct {
	at        time.Time
	cpu       time.Duration // this process: user + system, -1 if unknown (no getrusage)
	brokerCPU time.Duration // child broker: user + system, -1 if in-process
	mallocs   uint64
	acked     int64
	failed    int64
	hist      []int64
}

// readUsage reads this process's CPU, the child broker's CPU (brokerPID 0 = none) and
// the heap allocation count. ReadMemStats stops the world briefly; it is
// only called at the edges of the measured window.
func readUsage(brokerPID int) usage {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	u := usage{
		at:        time.Now(),
		cpu:       processCPU(),
		brokerCPU: -1,
		mallocs:   ms.Mallocs,
	}
	if brokerPID > 0 {
		u.brokerCPU = procCPU(brokerPID)
	}
	return u
}

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat times; 100 on every
// Linux architecture Go supports.
const clockTicks = 100

// procCPU returns user+system CPU of pid from /proc/<pid>/stat, or -1 when
// it cannot be read (not Linux, process gone).
func procCPU(pid int) time.Duration {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return -1
	}
	defer f.Close()
	line, err := bufio.NewReader(f).ReadBytes('\n')
	if err != nil && len(line) == 0 {
		return -1
	}
	// The command name is in parentheses and may contain spaces; fields
	// after it start with the state (field 3). utime and stime are fields
	// 14 and 15.
	i := bytes.LastIndexByte(line, ')')
	if i < 0 {
		return -1
	}
	fields := bytes.Fields(line[i+1:])
	if len(fields) < 13 {
		return -1
	}
	ut, err1 := strconv.ParseInt(string(fields[11]), 10, 64)
	st, err2 := strconv.ParseInt(string(fields[12]), 10, 64)
	if err1 != nil || err2 != nil {
		return -1
	}
	return time.Duration(ut+st) * time.Second / clockTicks
}

// fmtDur prints a latency compactly.
func fmtDur(d time.Duration) string {
	switch {
	case d <= 0:
		return "-"
	case d < time.Millisecond:
		return fmt.Sprintf("%dus", d.Microseconds())
	case d < 10*time.Second:
		return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
	default:
		return fmt.Sprintf("%.0fs", d.Seconds())
	}
}
