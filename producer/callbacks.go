package producer

import (
	"bytes"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
)

// completion is one outcome to report: a whole batch, or one record.
type completion struct {
	b       *batch // when set, every record of b gets err (nil: success)
	rec     *Record
	cb      Callback
	err     error
	gen     uint64 // rec's Flush generation
	counted bool   // the records count for Flush (flush.go)
	memory  int64  // buffer.memory to release once the callbacks ran
	p       *Producer
}

// callbackQueue runs callbacks one at a time on its own goroutine, in the
// order they were queued, so a slow callback never stalls the sender.
type callbackQueue struct {
	mu      sync.Mutex // guards the following
	q       []completion
	closed  bool
	signal  chan struct{}
	stopped chan struct{}
	gid     atomic.Uint64 // id of the goroutine running callbacks
}

// onOwnGoroutine reports whether the caller runs on one of the producer's
// own goroutines: the callback goroutine (a record callback, or
// HookRecordDone) or the sender goroutine (every other hook). There the
// calls that wait for callbacks, the sender or buffer.memory would wait for
// the goroutine they hold, and never return.
func (p *Producer) onOwnGoroutine() bool {
	cb, snd := p.cbs.gid.Load(), p.s.gid.Load()
	if cb == 0 && snd == 0 {
		return false
	}
	id := goroutineID()
	return id != 0 && (id == cb || id == snd)
}

// goroutineID returns the calling goroutine's id, parsed from the first
// line of its stack trace ("goroutine 42 [running]:"); 0 if that fails. Go
// offers no other way to tell a callback's own goroutine apart, and only
// the calls that wait (Flush, ProduceSync, Close, and Produce when
// buffer.memory is full) pay for it.
func goroutineID() uint64 {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	b = bytes.TrimPrefix(b, []byte("goroutine "))
	if i := bytes.IndexByte(b, ' '); i > 0 {
		b = b[:i]
	}
	id, err := strconv.ParseUint(string(b), 10, 64)
	if err != nil {
		return 0
	}
	return id
}

func newCallbackQueue() *callbackQueue {
	return &callbackQueue{signal: make(chan struct{}, 1), stopped: make(chan struct{})}
}

// push queues c; it reports false once the queue is closed.
func (q *callbackQueue) push(c completion) bool {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return false
	}
	q.q = append(q.q, c)
	q.mu.Unlock()
	select {
	case q.signal <- struct{}{}:
	default:
	}
	return true
}

// pushCounted queues the outcome of an accepted record or batch; after the
// callbacks run, p's outstanding count drops.
func (q *callbackQueue) pushCounted(c completion, p *Producer) {
	c.counted = true
	c.p = p
	if !q.push(c) {
		// Only after Close, when nothing else runs callbacks.
		var t doneTally
		c.run(&t)
		t.settle(p)
	}
}

// run calls c's callbacks, releases its buffer.memory and counts its
// records in t for Flush.
func (c completion) run(t *doneTally) {
	if c.b != nil {
		for _, pr := range c.b.records {
			c.p.cfg.hooks.recordDone(pr.rec, c.err)
			pr.cb(pr.rec, c.err)
		}
		if c.counted {
			c.release(t)
			t.addRecords(c.b.records)
		}
		c.b.recycle()
		return
	}
	if c.counted {
		c.p.cfg.hooks.recordDone(c.rec, c.err)
	}
	c.cb(c.rec, c.err)
	if c.counted {
		// Released after the callbacks, so buffer.memory bounds records
		// waiting for a slow callback too, and Produce blocks on them.
		// Memory is released per completion, not per pass like the Flush
		// counts: a callback's Produce (which fails with ErrBufferFull
		// rather than wait) needs the very bytes an earlier completion
		// of the pass holds.
		c.release(t)
		t.add(c.gen, 1)
	}
}

// release gives back c's buffer.memory now, once its callbacks ran (the
// negative control leaves it to the end of the pass, settle).
func (c completion) release(t *doneTally) {
	if t.held.hold(c.p, c.memory) {
		return
	}
	c.p.mem.Release(c.memory)
}

// doneTally counts the records called back in one pass of the callback
// goroutine, per Flush generation, so that acc.mu is taken once per
// pass (settle) rather than once per batch: Produce holds acc.mu for
// every record it places, and every acquisition from another goroutine
// costs it a cache-line transfer. Flush waiters are released at the end of
// the pass, after every callback of it ran.
type doneTally struct {
	gens []genCount // in the order seen; a generation may repeat
	// held is the negative control's buffer.memory left to the end of
	// the pass (releasePerPass); empty in the default build.
	held passMemory
}

func (t *doneTally) add(gen uint64, n int64) {
	if k := len(t.gens); k > 0 && t.gens[k-1].gen == gen {
		t.gens[k-1].n += n
		return
	}
	t.gens = append(t.gens, genCount{gen: gen, n: n})
}

// addRecords counts a batch's records; they were appended in order, so
// generations come in runs.
func (t *doneTally) addRecords(recs []pendingRecord) {
	for _, pr := range recs {
		t.add(pr.gen, 1)
	}
}

// settle counts what t holds as called back and empties it.
func (t *doneTally) settle(p *Producer) {
	t.held.release(p)
	if len(t.gens) == 0 {
		return
	}
	p.acc.settle(t.gens)
	t.gens = t.gens[:0]
}

func (q *callbackQueue) run() {
	q.gid.Store(goroutineID())
	defer close(q.stopped)
	var batch []completion
	var tally doneTally
	for {
		q.mu.Lock()
		batch, q.q = q.q, batch[:0]
		closed := q.closed
		q.mu.Unlock()
		var p *Producer
		for i := range batch {
			if batch[i].counted {
				p = batch[i].p
			}
			batch[i].run(&tally)
			batch[i] = completion{}
		}
		if p != nil {
			tally.settle(p)
		}
		if len(batch) > 0 {
			continue
		}
		if closed {
			return
		}
		<-q.signal
	}
}

// close runs what is queued, then stops the goroutine and waits for it.
func (q *callbackQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	select {
	case q.signal <- struct{}{}:
	default:
	}
	<-q.stopped
}
