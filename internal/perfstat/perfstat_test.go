package perfstat

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// TestQuantileMatchesSortedReference compares the histogram with the
// definition it claims: the sample at index floor(q*n) of the sorted
// latencies, exact below 1024µs and within 0.1% above.
func TestQuantileMatchesSortedReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{1, 2, 10, 999, 100000} {
		var h Histogram
		ref := make([]time.Duration, n)
		var sum time.Duration
		for i := range ref {
			// Log-uniform from 1µs to ~100s: every bucket range is hit.
			d := time.Duration(math.Exp(rng.Float64()*math.Log(1e8))) * time.Microsecond
			ref[i] = d
			sum += d
			h.Record(d)
		}
		slices.Sort(ref)
		for _, q := range []float64{0, 0.5, 0.95, 0.99, 0.999, 1} {
			want := ref[min(int(q*float64(n)), n-1)]
			got := h.Quantile(q)
			tol := time.Duration(float64(want) * 0.001)
			if want < 1024*time.Microsecond {
				tol = time.Microsecond // exact at µs resolution
			}
			if diff := got - want; diff > tol || -diff > tol {
				t.Errorf("n=%d q=%v: got %v, want %v (+-%v)", n, q, got, want, tol)
			}
		}
		if h.Count() != int64(n) || h.Max() != ref[n-1] || h.Min() != ref[0] || h.Mean() != sum/time.Duration(n) {
			t.Errorf("n=%d: count %d max %v min %v mean %v; want %d %v %v %v", n, h.Count(), h.Max(), h.Min(), h.Mean(), n, ref[n-1], ref[0], sum/time.Duration(n))
		}
	}
}

func TestBucketsAreMonotonicAndCoverInt64(t *testing.T) {
	prev := -1
	for _, v := range []int64{0, 1, 127, 1023, 1024, 1025, 2047, 2048, 1 << 20, 1<<40 + 12345, math.MaxInt64} {
		b := bucket(v)
		if b < prev || b >= nBuckets {
			t.Errorf("bucket(%d) = %d after %d (nBuckets %d)", v, b, prev, nBuckets)
		}
		prev = b
		if v >= 1024 {
			if mid := bucketMid(b); math.Abs(float64(mid-v)) > float64(v)/512 {
				t.Errorf("bucketMid(bucket(%d)) = %d, more than 1/512 away", v, mid)
			}
		}
	}
}

func TestEmptyAndMerge(t *testing.T) {
	var a, b Histogram
	if a.Quantile(0.5) != 0 || a.Mean() != 0 || a.Max() != 0 {
		t.Error("empty histogram not zero")
	}
	a.Record(time.Millisecond)
	b.Record(3 * time.Millisecond)
	b.Record(-time.Second) // clamps to 0
	a.Merge(&b)
	if a.Count() != 3 || a.Max() != 3*time.Millisecond || a.Min() != 0 || a.Quantile(0.5) != time.Millisecond {
		t.Errorf("merged: count %d max %v min %v p50 %v", a.Count(), a.Max(), a.Min(), a.Quantile(0.5))
	}
}

func TestSummaryLineRoundTrips(t *testing.T) {
	var h Histogram
	for i := 1; i <= 1000; i++ {
		h.Record(time.Duration(i) * 100 * time.Microsecond) // 0.1..100 ms
	}
	s := Summarize(1000, 1000*1024, 2*time.Second, &h)
	line := s.String()
	const want = "1000 records sent, 500.000000 records/sec (0.49 MB/sec), 50.05 ms avg latency, 100.00 ms max latency, 50 ms 50th, 95 ms 95th, 99 ms 99th, 100 ms 99.9th."
	if line != want {
		t.Errorf("String:\n got %s\nwant %s", line, want)
	}
	got, err := ParseSummary(line)
	if err != nil {
		t.Fatal(err)
	}
	if got.Records != 1000 || got.RecordsPerSec != 500 || got.MBPerSec != 0.49 || got.AvgLatencyMs != 50.05 ||
		got.MaxLatencyMs != 100 || got.P50Ms != 50 || got.P95Ms != 95 || got.P99Ms != 99 || got.P999Ms != 100 {
		t.Errorf("ParseSummary = %+v", got)
	}
}

func TestParseSummaryRejectsOtherLines(t *testing.T) {
	for _, line := range []string{
		"",
		"5000 records sent, 1000.0 records/sec (0.95 MB/sec), 2.0 ms avg latency, 5.0 ms max latency.", // progress line
		"1000 records sent, 500.000000 records/sec (0.49 MB/sec), 50.05 ms avg latency, 100.00 ms max latency, 50 ms 50th, 95 ms 95th, 99 ms 99th.",
		"1000 records sent, 500.000000 records/sec (0.49 MB/sec), 50.05 ms avg latency, 100.00 ms max latency, 50 ms 50th, 95 ms 95th, 99 ms 99th, 99 ms 99.9th. and more",
		"x records sent",
	} {
		if _, err := ParseSummary(line); !errors.Is(err, ErrNotSummary) {
			t.Errorf("ParseSummary(%q) = %v, want ErrNotSummary", line, err)
		}
	}
}

func TestRecorderWindows(t *testing.T) {
	t0 := time.Unix(1000, 0)
	r := NewRecorder(t0)
	r.Record(2*time.Millisecond, 100)
	r.Record(4*time.Millisecond, 100)
	w := r.Window(t0.Add(2 * time.Second))
	if w.Records != 2 || w.AvgLatency != 3*time.Millisecond || w.MaxLatency != 4*time.Millisecond {
		t.Errorf("first window %+v", w)
	}
	if got, want := w.String(), "2 records sent, 1.0 records/sec (0.00 MB/sec), 3.0 ms avg latency, 4.0 ms max latency."; got != want {
		t.Errorf("window line %q, want %q", got, want)
	}
	r.Record(10*time.Millisecond, 100)
	w = r.Window(t0.Add(3 * time.Second))
	if w.Records != 1 || w.MaxLatency != 10*time.Millisecond || w.Elapsed != time.Second {
		t.Errorf("second window %+v: the first was not reset", w)
	}
	s := r.Summary(t0.Add(3 * time.Second))
	if s.Records != 3 || s.Bytes != 300 || s.ElapsedSec != 3 || s.RecordsPerSec != 1 || s.MaxLatencyMs != 10 {
		t.Errorf("summary %+v", s)
	}
}

func BenchmarkRecorderRecord(b *testing.B) {
	r := NewRecorder(time.Now())
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		r.Record(time.Duration(i%100000)*time.Microsecond, 100)
	}
}
