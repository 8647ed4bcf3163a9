package main

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBenchClockTracksMonotonic checks that the bench clock (the
// time-stamp counter where the kernel keeps time with it) advances with the
// runtime's monotonic clock to well within the histogram's 6 % buckets,
// and that the check would catch a clock whose rate is off.
func TestBenchClockTracksMonotonic(t *testing.T) {
	c := newBenchClock(tscUsable(), 20*time.Millisecond)
	drift := func(c *benchClock) float64 {
		m0, c0 := time.Since(epoch), c.now()
		time.Sleep(50 * time.Millisecond)
		m1, c1 := time.Since(epoch), c.now()
		return float64(c1-c0)/float64(m1-m0) - 1
	}
	assert.InDelta(t, 0, drift(c), 0.01, "clock rate against the monotonic clock (tsc %v)", c.tsc)
	assert.InDelta(t, float64(time.Since(epoch)), float64(c.now()), float64(time.Millisecond), "readings are the time since epoch")
	if c.tsc {
		bad := *c
		bad.nsPerTick *= 1.1 // negative control: a 10 % wrong rate
		assert.Greater(t, drift(&bad), 0.05, "negative control: a wrong rate must show")
	}
	assert.False(t, newBenchClock(false, 0).tsc, "without tsc: time.Since")
}

// TestTimeOf checks that a reading turns into the Timestamp a client
// writes (wall time now, with a monotonic reading) and back.
func TestTimeOf(t *testing.T) {
	now := clk.now()
	ts := timeOf(now)
	assert.WithinDuration(t, time.Now(), ts, time.Second)
	assert.Contains(t, ts.String(), " m=+", "with a monotonic reading")
	assert.Equal(t, now, nsOf(ts))
}

// TestRecQueue checks the record slab and the callbacks' tally: a new slab
// hands its slots out in order, the loop sees a callback's slots only once
// its run of queueRun is given back and then gets them oldest first, an
// empty queue says so, a callback gets its record's stamp and counts its
// latency, and a record from elsewhere is timed by its Timestamp.
func TestRecQueue(t *testing.T) {
	type rec struct {
		a  int64
		ts time.Time
	}
	const n = 3 * queueRun
	g := newRecQueue(n, func(r *rec) { r.a = 7 })
	st := new(caseState)
	tally := &cbTally[rec]{st: st, queue: g}
	tsOf := func(r *rec) time.Time { return r.ts }
	var got []*rec
	for i := range n {
		s, r := g.take()
		require.Equal(t, i, s, "a new slab hands its slots out in order")
		require.Same(t, &g.recs[s], r)
		assert.Equal(t, int64(7), r.a, "init ran")
		g.stamp(s, clk.now()-int64(time.Second))
		got = append(got, r)
	}
	s, r := g.take()
	assert.Equal(t, -1, s, "every slot out")
	assert.Nil(t, r)
	// Called back out of slab order: the second run's records, then
	// the first's.
	order := append(slices.Clone(got[queueRun:2*queueRun]), got[:queueRun]...)
	for _, r := range order[:queueRun-1] {
		tally.done(r, tsOf, nil)
	}
	s, _ = g.take()
	assert.Equal(t, -1, s, "a run not yet full is not given back")
	for _, r := range order[queueRun-1:] {
		tally.done(r, tsOf, nil)
	}
	for i := range 2 * queueRun {
		_, r = g.take()
		require.Same(t, order[i], r, "free slots come back in the order they were given back")
	}
	s, _ = g.take()
	assert.Equal(t, -1, s, "the loop took both runs")

	tally.flushHist()
	assert.Equal(t, int64(2*queueRun), st.acked(), "every called-back record counted")
	q := quantile(make([]int64, nBuckets), st.hist.snapshot(), 0.5)
	assert.InDelta(t, float64(time.Second), float64(q), float64(time.Second)/10, "latency from the stamp beside the slab")

	other := &rec{ts: timeOf(clk.now() - int64(2*time.Second))}
	assert.Equal(t, -1, g.slot(other), "a record from outside the slab")
	assert.Equal(t, -1, (*recQueue[rec])(nil).slot(got[0]), "no queue (--heap)")
	before := st.hist.snapshot()
	tally.done(other, tsOf, nil)
	tally.flushHist()
	q = quantile(before, st.hist.snapshot(), 0.5)
	assert.InDelta(t, float64(2*time.Second), float64(q), float64(time.Second)/5, "timed by its Timestamp")
}

// recycler is how a test drives a way of recycling records: take a free
// slot (-1 if none), give one back after its callback.
type recycler interface {
	take() int
	give(s int)
}

// queueRecycler is a recQueue driven as the bench drives it, through a
// cbTally.
type queueRecycler struct {
	g     *recQueue[int64]
	tally *cbTally[int64]
}

func newQueueRecycler(n int) queueRecycler {
	g := newRecQueue[int64](n, nil)
	return queueRecycler{g, &cbTally[int64]{st: new(caseState), queue: g}}
}

func (r queueRecycler) take() int  { s, _ := r.g.take(); return s }
func (r queueRecycler) give(s int) { r.tally.done(&r.g.recs[s], nil, nil) }

// latestFirst hands out the slot given back last first, as a free list or
// stack does: a negative control.
type latestFirst struct{ free []int }

func (l *latestFirst) take() int {
	if len(l.free) == 0 {
		return -1
	}
	s := l.free[len(l.free)-1]
	l.free = l.free[:len(l.free)-1]
	return s
}
func (l *latestFirst) give(s int) { l.free = append(l.free, s) }

// wholeBlocks frees slots a block of queueRun at a time, once every slot
// of the block is back, and hands out the next free block in slab order:
// session 7's recRing, a negative control.
type wholeBlocks struct {
	back []int // per block: slots given back
	out  []int // per block: slots handed out
	next int
	n    int
}

func (w *wholeBlocks) take() int {
	if w.next%queueRun == 0 {
		found := false
		for range len(w.back) {
			b := w.next / queueRun
			if w.back[b] == w.out[b] {
				w.back[b], w.out[b], found = 0, 0, true
				break
			}
			w.next = (b + 1) * queueRun % w.n
		}
		if !found {
			return -1
		}
	}
	s := w.next
	w.next = (w.next + 1) % w.n
	w.out[s/queueRun]++
	return s
}
func (w *wholeBlocks) give(s int) { w.back[s/queueRun]++ }

func newWholeBlocks(n int) *wholeBlocks {
	return &wholeBlocks{back: make([]int, n/queueRun), out: make([]int, n/queueRun), n: n}
}

// clientModel runs a client that holds inFlight records and calls them
// back oldest first, except each heldEvery-th record, which it holds for
// holdFor records more (a slow partition; 0: none), over rc's slots. It
// returns how many takes found no free slot and the median of how many
// records came back between a record's return and its reuse.
func clientModel(t *testing.T, rc recycler, inFlight, records, heldEvery, holdFor int) (dry, age int) {
	type out struct{ slot, due int }
	backAt := map[int]int{} // slot -> returns counted when it came back
	var normal, slow []out  // each in order of due
	var returns int
	var ages []int
	for i := range records {
		if s := rc.take(); s < 0 {
			dry++
		} else {
			if at, ok := backAt[s]; ok {
				ages = append(ages, returns-at)
			}
			if heldEvery > 0 && i%heldEvery == 0 {
				slow = append(slow, out{s, i + inFlight + holdFor})
			} else {
				normal = append(normal, out{s, i + inFlight})
			}
		}
		// Call back what is due, in order of due.
		for {
			q := &normal
			if len(slow) > 0 && (len(normal) == 0 || slow[0].due < normal[0].due) {
				q = &slow
			}
			if len(*q) == 0 || (*q)[0].due > i {
				break
			}
			rc.give((*q)[0].slot)
			backAt[(*q)[0].slot] = returns
			returns++
			*q = (*q)[1:]
		}
	}
	require.NotEmpty(t, ages)
	slices.Sort(ages)
	return dry, ages[len(ages)/2]
}

// TestRecQueueReusesOldest checks that the loop reuses the record given
// back longest ago, not one the client's acknowledgement path may still be
// writing on another core: the median reuse comes at least the slab's
// spare records (less two runs) after the return. Negative control: a
// free list handing the latest out first reuses records a run after their
// return, which the same measure must show.
func TestRecQueueReusesOldest(t *testing.T) {
	const inFlight, spare = 5000, 4096
	dry, age := clientModel(t, newQueueRecycler(inFlight+spare), inFlight, 50000, 0, 0)
	assert.Zero(t, dry)
	assert.GreaterOrEqual(t, age, spare-2*queueRun, "records are reused oldest first")

	l := new(latestFirst)
	for s := range inFlight + spare {
		l.give(s)
	}
	_, hot := clientModel(t, l, inFlight, 50000, 0, 0)
	t.Logf("median reuse age: queue %d, latest first %d records", age, hot)
	assert.Less(t, hot, 2*queueRun, "negative control: latest first reuses a record just given back")
}

// TestRecQueueSlowRecordsHoldNoOthers checks that records a client holds
// long (a slow partition's) keep only their own slots out: with one in 64
// records held for twice the in-flight count, the loop never finds the
// slab empty. Negative control: freeing slots only by whole blocks, as the
// ring did, lets each slow record hold its block, and the loop runs dry
// (in the bench it then scanned the whole ring on every record: 55 % of
// kgo's client CPU at 1 KiB).
func TestRecQueueSlowRecordsHoldNoOthers(t *testing.T) {
	const inFlight, spare = 5000, 4096
	n := inFlight + spare
	dry, _ := clientModel(t, newQueueRecycler(n), inFlight, 60000, queueRun, 2*inFlight)
	assert.Zero(t, dry, "slots free as their runs come back")

	dry, _ = clientModel(t, newWholeBlocks(n/queueRun*queueRun), inFlight, 60000, queueRun, 2*inFlight)
	t.Logf("takes that found no free slot, whole blocks: %d of 60000", dry)
	assert.Greater(t, dry, 1000, "negative control: whole blocks held by one slow record each")
}

// TestRecQueueConcurrent runs the loop and a client's callbacks on their
// own goroutines, as the bench does (under -race: the runs given back
// under mu, the stamps read after the client's hand-off): no slot is handed
// out while its record is still out, and every record's stamp reaches its
// callback.
func TestRecQueueConcurrent(t *testing.T) {
	const n, records = 4 * queueRun, 200000
	g := newRecQueue[int64](n, nil)
	st := new(caseState)
	tally := &cbTally[int64]{st: st, queue: g}
	out := make([]bool, n) // slot handed out and not called back; guarded by the channel's hand-offs
	client := make(chan int, n/2)
	done := make(chan struct{})
	var dry int
	go func() { // the client: calls back one record at a time, in order
		defer close(done)
		for s := range client {
			assert.True(t, out[s], "called back while out")
			out[s] = false
			tally.done(&g.recs[s], nil, nil)
		}
		tally.flushHist()
	}()
	for range records {
		s, _ := g.take()
		if s < 0 {
			dry++ // the callbacks' run is not full yet: the bench would allocate
			continue
		}
		require.False(t, out[s], "slot %d handed out twice", s)
		out[s] = true
		g.stamp(s, clk.now()-int64(time.Hour))
		client <- s
	}
	close(client)
	<-done
	assert.Equal(t, int64(records-dry), st.acked(), "every record called back and counted")
	q := quantile(make([]int64, nBuckets), st.hist.snapshot(), 0.5)
	assert.InDelta(t, float64(time.Hour), float64(q), float64(time.Hour)/10, "each callback read its own record's stamp")
}

// TestTallyRuns checks that the tally publishes a run of equal buckets at
// its size limit and when its bucket changes, so a window's edge misses at
// most one run.
func TestTallyRuns(t *testing.T) {
	st := new(caseState)
	tally := &cbTally[struct{ ts time.Time }]{st: st}
	r := &struct{ ts time.Time }{ts: timeOf(clk.now() - int64(time.Hour))}
	tsOf := func(r *struct{ ts time.Time }) time.Time { return r.ts }
	for range tallyRun + 1 {
		tally.done(r, tsOf, nil)
	}
	assert.Equal(t, int64(tallyRun), st.acked(), "a full run is published; the next one is pending")
	r.ts = timeOf(clk.now())
	tally.done(r, tsOf, nil)
	assert.Equal(t, int64(tallyRun+1), st.acked(), "a new bucket publishes the pending run")
	tally.done(r, tsOf, errors.New("boom"))
	assert.Equal(t, int64(1), st.failed.Load())
	assert.Equal(t, int64(tallyRun+1), st.acked(), "a failure is not acknowledged")
}

// TestValueForOwn checks that --own-values gives a record that carried the
// shared value its own buffer instead of writing the counter into the
// shared one (longhaul's records start with the shared value), and
// reuses a record's own buffer.
func TestValueForOwn(t *testing.T) {
	cfg := clientConfig{recordSize: 16, ownValues: true}
	shared := make([]byte, 16)
	v := cfg.valueFor(shared, shared, 5)
	assert.NotSame(t, &shared[0], &v[0])
	assert.Equal(t, make([]byte, 16), shared, "the shared value is untouched")
	w := cfg.valueFor(v, shared, 6)
	assert.Same(t, &v[0], &w[0], "the record's own buffer is reused")
	assert.Equal(t, byte(6), w[7])
	cfg.ownValues = false
	assert.Same(t, &shared[0], &cfg.valueFor(v, shared, 7)[0])
}
