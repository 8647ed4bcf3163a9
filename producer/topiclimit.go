package producer

import (
	"errors"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// batchLimit is what the producer has learned of one topic's largest
// record batch (its max.message.bytes) from the broker refusing batches
// as too large. Reading the topic's config would need
// DESCRIBE_CONFIGS on the topic, which many producers are not granted, so
// the limit is learned from answers every producer gets: a batch of n
// bytes refused as too large says the limit is below n, one written says
// it is at least its size. Batches are then built to a target between the
// two (target), so a topic whose limit is below batch.size is split once,
// not on every batch.
//
// The sender goroutine alone writes it; place reads it under
// acc.mu. A reader may see refused and taken from different updates:
// each is a bound on its own, so the target is still one that a batch
// between them would take.
type batchLimit struct {
	refused atomic.Int64 // smallest batch refused as too large, wire bytes; 0 = none
	taken   atomic.Int64 // largest batch written since refused was set, wire bytes
	since   atomic.Int64 // when refused was first set, ns since the sender's base
}

// limitClose is how near the target stays below the smallest refused size
// before it stops probing upwards: within a sixteenth, batches are built
// to the largest size written, and no further batch is refused.
const limitClose = 16

// target is the size to build t's batches to, at most batchSize: the
// largest written batch once it is within a sixteenth of the smallest
// refused one, else halfway between the two, so each refusal halves the
// gap and each written batch raises the floor. With nothing refused (or
// after metadata.max.age.ms, when the topic's config may have changed) it
// is batchSize. refused says whether anything was learned.
func (l *batchLimit) target(batchSize int, fresh func(since int64) bool) (target int, refused int64) {
	r := l.refused.Load()
	if r == 0 || !fresh(l.since.Load()) {
		return batchSize, 0
	}
	hi, lo := r-1, l.taken.Load()
	t := lo + (hi-lo)/2
	if hi-lo <= hi/limitClose {
		t = lo
	}
	return int(min(int64(batchSize), t)), r
}

// refusedBatch notes that a batch of size wire bytes was refused as too
// large at now (ns since the sender's base). What was learned more than
// maxAge ago is forgotten first.
func (l *batchLimit) refusedBatch(size, now int64, maxAge time.Duration) {
	if r := l.refused.Load(); r != 0 && now-l.since.Load() > int64(maxAge) {
		l.refused.Store(0)
		l.taken.Store(0)
	}
	if r := l.refused.Load(); r != 0 && r <= size {
		return
	}
	if l.refused.Load() == 0 {
		l.since.Store(now)
	}
	l.refused.Store(size)
	if l.taken.Load() >= size {
		l.taken.Store(0) // the topic's limit went down: what was written says nothing now
	}
}

// written notes that a batch of size wire bytes was written. A batch as
// large as one refused means the limit went up: what was learned is
// forgotten, and so is all of it after maxAge.
func (l *batchLimit) written(size, now int64, maxAge time.Duration) {
	r := l.refused.Load()
	switch {
	case r == 0:
	case size >= r || now-l.since.Load() > int64(maxAge):
		l.refused.Store(0)
		l.taken.Store(0)
	case size > l.taken.Load():
		l.taken.Store(size)
	}
}

// tooLargeAnswer reports whether cause is the broker refusing a batch for
// the topic's max.message.bytes (MESSAGE_TOO_LARGE). RECORD_LIST_TOO_LARGE,
// a batch larger than a log segment, teaches nothing: segment.bytes is at
// least 1 MiB (Kafka 4.0 on), the size of max.request.size's default, so
// such a batch is split and the next is built as before.
func tooLargeAnswer(cause error) bool {
	return errors.Is(cause, kerr.MessageTooLarge)
}

// limitFresh reports whether a limit learned at since (ns since the
// sender's base) is younger than metadata.max.age.ms: a topic's config
// can change, and a limit kept for good would keep batches small after it
// was raised.
func (a *accumulator) limitFresh(since int64) bool {
	return time.Since(a.base)-time.Duration(since) <= a.cfg.metadataMaxAge
}

// batchTarget is the size t's batches are built to: batch.size, or less
// once t refused a batch as too large (batchLimit). A record larger than
// that goes in a batch of its own, which the broker takes or refuses: a
// record is never failed on a remembered answer, since the topic's limit
// may have been raised since. Called with acc.mu held.
func (a *accumulator) batchTarget(t *topicBuf) int {
	target, _ := t.ts.limit.target(a.cfg.batchSize, a.limitFresh)
	return target
}
