package perfstat

import (
	"sync"
	"time"
)

// Recorder accumulates one run: a latency histogram, record and byte
// counts, and the current progress window. It is safe for concurrent use;
// producer callbacks call [Recorder.Record], a ticker calls
// [Recorder.Window].
type Recorder struct {
	mu      sync.Mutex // guards the following
	start   time.Time
	total   Histogram
	records int64
	bytes   int64
	win     windowAcc
}

type windowAcc struct {
	start   time.Time
	records int64
	bytes   int64
	sum     time.Duration
	max     time.Duration
}

// NewRecorder returns a Recorder whose run and first window start at start.
func NewRecorder(start time.Time) *Recorder {
	return &Recorder{start: start, win: windowAcc{start: start}}
}

// Record counts one acknowledged record of size bytes that took latency
// from Produce to its callback.
func (r *Recorder) Record(latency time.Duration, size int) {
	r.mu.Lock()
	r.total.Record(latency)
	r.records++
	r.bytes += int64(size)
	r.win.records++
	r.win.bytes += int64(size)
	r.win.sum += latency
	r.win.max = max(r.win.max, latency)
	r.mu.Unlock()
}

// Window returns the progress window that ends at now and starts the next
// one.
func (r *Recorder) Window(now time.Time) Window {
	r.mu.Lock()
	defer r.mu.Unlock()
	w := Window{Records: r.win.records, Bytes: r.win.bytes, Elapsed: now.Sub(r.win.start), MaxLatency: r.win.max}
	if w.Records > 0 {
		w.AvgLatency = r.win.sum / time.Duration(w.Records)
	}
	r.win = windowAcc{start: now}
	return w
}

// Summary returns the whole run, from the start to end.
func (r *Recorder) Summary(end time.Time) Summary {
	r.mu.Lock()
	defer r.mu.Unlock()
	return Summarize(r.records, r.bytes, end.Sub(r.start), &r.total)
}
