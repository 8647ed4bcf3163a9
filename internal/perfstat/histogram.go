package perfstat

import (
	"math"
	"math/bits"
	"time"
)

// subBits is the precision of a bucket: values of 2^subBits microseconds
// and more share a bucket with neighbours within 2^-(subBits-1) of them
// (0.2%, so the midpoint is within 0.1%); smaller values are exact. The
// precision is high because Kafka's tool prints whole milliseconds: a
// coarser estimate of 50.1ms would print as 49.
const (
	subBits  = 10
	subCount = 1 << (subBits - 1) // 512 buckets per power of two above 1024µs
	// nBuckets covers every int64 microsecond value.
	nBuckets = (64-subBits+1)*subCount + subCount
)

// Histogram counts latencies at microsecond resolution in fixed memory.
// The zero value is empty and ready to use. It is not safe for concurrent
// use; [Recorder] adds the locking.
type Histogram struct {
	counts [nBuckets]int64
	n      int64
	sum    time.Duration
	max    time.Duration
	min    time.Duration
}

// bucket returns the bucket of v microseconds (v >= 0).
func bucket(v int64) int {
	if v < 2*subCount {
		return int(v)
	}
	e := bits.Len64(uint64(v)) - subBits // >= 1
	return e*subCount + int(v>>e)
}

// bucketMid returns the middle of bucket i, in microseconds.
func bucketMid(i int) int64 {
	if i < 2*subCount {
		return int64(i)
	}
	e := i/subCount - 1
	lo := int64(i-e*subCount) << e
	return lo + (int64(1)<<e)/2
}

// Record adds one latency; negative values count as 0.
func (h *Histogram) Record(d time.Duration) {
	if d < 0 {
		d = 0
	}
	h.counts[bucket(d.Microseconds())]++
	if h.n == 0 || d < h.min {
		h.min = d
	}
	h.n++
	h.sum += d
	h.max = max(h.max, d)
}

// Merge adds every latency of o to h.
func (h *Histogram) Merge(o *Histogram) {
	if o.n == 0 {
		return
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	if h.n == 0 || o.min < h.min {
		h.min = o.min
	}
	h.n += o.n
	h.sum += o.sum
	h.max = max(h.max, o.max)
}

// Count returns the number of latencies recorded.
func (h *Histogram) Count() int64 { return h.n }

// Mean returns the exact average latency, 0 when empty.
func (h *Histogram) Mean() time.Duration {
	if h.n == 0 {
		return 0
	}
	return h.sum / time.Duration(h.n)
}

// Max returns the exact largest latency, 0 when empty.
func (h *Histogram) Max() time.Duration { return h.max }

// Min returns the exact smallest latency, 0 when empty.
func (h *Histogram) Min() time.Duration { return h.min }

// Quantile returns the latency at quantile q (0..1) as Kafka's perf tool
// defines it: the sample at 0-based index floor(q*count) of the sorted
// latencies. It is exact below 1024µs and within 0.1% above, and never
// outside [Min, Max]. It returns 0 when empty.
func (h *Histogram) Quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	q = math.Max(0, math.Min(1, q))
	rank := min(int64(q*float64(h.n)), h.n-1)
	var seen int64
	for i, c := range h.counts {
		seen += c
		if seen > rank {
			d := time.Duration(bucketMid(i)) * time.Microsecond
			return max(h.min, min(h.max, d))
		}
	}
	return h.max // unreachable: counts sum to n
}
