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

// TestRecStack checks the record slab and the callbacks' tally: the loop
// gets the latest slots given back first, sees a callback's slots only once
// its run of stackRun is given back, an empty stack says so, a callback
// gets its record's stamp and counts its latency, and a record from
// elsewhere is timed by its Timestamp.
func TestRecStack(t *testing.T) {
	type rec struct {
		a  int64
		ts time.Time
	}
	const n = 3 * stackRun
	g := newRecStack(n, func(r *rec) { r.a = 7 })
	st := new(caseState)
	tally := &cbTally[rec]{st: st, stack: g}
	tsOf := func(r *rec) time.Time { return r.ts }
	var got []*rec
	for i := range n {
		s, r := g.take()
		require.Equal(t, n-1-i, s, "a new slab hands its slots out from the top")
		require.Same(t, &g.recs[s], r)
		assert.Equal(t, int64(7), r.a, "init ran")
		g.stamp(s, clk.now()-int64(time.Second))
		got = append(got, r)
	}
	s, r := g.take()
	assert.Equal(t, -1, s, "every slot out")
	assert.Nil(t, r)
	for _, r := range got[:stackRun-1] {
		tally.done(r, tsOf, nil)
	}
	s, _ = g.take()
	assert.Equal(t, -1, s, "a run not yet full is not given back")
	tally.done(got[2*stackRun], tsOf, nil) // completes the run
	for i := range stackRun {
		s, r = g.take()
		if i == 0 {
			require.Same(t, got[2*stackRun], r, "the latest given back comes first")
		} else {
			require.Same(t, got[stackRun-1-i], r, "then the run's others, latest first")
		}
	}
	s, _ = g.take()
	assert.Equal(t, -1, s, "the loop took the whole run")

	tally.flushHist()
	assert.Equal(t, int64(stackRun), st.acked(), "every called-back record counted")
	q := quantile(make([]int64, nBuckets), st.hist.snapshot(), 0.5)
	assert.InDelta(t, float64(time.Second), float64(q), float64(time.Second)/10, "latency from the stamp beside the slab")

	other := &rec{ts: timeOf(clk.now() - int64(2*time.Second))}
	assert.Equal(t, -1, g.slot(other), "a record from outside the slab")
	assert.Equal(t, -1, (*recStack[rec])(nil).slot(got[0]), "no stack (--heap)")
	before := st.hist.snapshot()
	tally.done(other, tsOf, nil)
	tally.flushHist()
	q = quantile(before, st.hist.snapshot(), 0.5)
	assert.InDelta(t, float64(2*time.Second), float64(q), float64(time.Second)/5, "timed by its Timestamp")
}

// recycler is how reuseAge drives a way of recycling records: take a free
// slot (-1 if none), give one back after its callback.
type recycler interface {
	take() int
	give(s int)
}

// stackRecycler is a recStack driven as the bench drives it, through a
// cbTally.
type stackRecycler struct {
	g     *recStack[int64]
	tally *cbTally[int64]
}

func (r stackRecycler) take() int  { s, _ := r.g.take(); return s }
func (r stackRecycler) give(s int) { r.tally.done(&r.g.recs[s], nil, nil) }

// slabOrder hands slots out in slab order as they come back, oldest back
// first: how session 7's recRing recycled, the negative control.
type slabOrder struct{ q []int }

func (o *slabOrder) take() int {
	if len(o.q) == 0 {
		return -1
	}
	s := o.q[0]
	o.q = o.q[1:]
	return s
}
func (o *slabOrder) give(s int) { o.q = append(o.q, s) }

// reuseAge runs a client that holds inFlight records and calls them back
// oldest first, over the given slots, and returns the median of how many
// records came back between a record's return and its reuse: how cold a
// reused record is.
func reuseAge(t *testing.T, rc recycler, inFlight, records int) int {
	backAt := map[int]int{} // slot -> returns counted when it came back
	var held []int
	var returns int
	var ages []int
	for range records {
		s := rc.take()
		require.GreaterOrEqual(t, s, 0, "the slab ran dry")
		if at, ok := backAt[s]; ok {
			ages = append(ages, returns-at)
		}
		held = append(held, s)
		if len(held) > inFlight {
			rc.give(held[0])
			backAt[held[0]] = returns
			returns++
			held = held[1:]
		}
	}
	require.NotEmpty(t, ages)
	slices.Sort(ages)
	return ages[len(ages)/2]
}

// TestRecStackReusesLatest checks that the loop gets back a record its
// client called back a moment ago (hot in cache), whatever the slab's
// size: at most two runs ago. Negative control: handing slots out in slab
// order, as the ring did, reuses a record only after the slab's spare
// records went round, which the same measure must show.
func TestRecStackReusesLatest(t *testing.T) {
	const inFlight, spare = 5000, 4096
	g := newRecStack[int64](inFlight+spare, nil)
	age := reuseAge(t, stackRecycler{g, &cbTally[int64]{st: new(caseState), stack: g}}, inFlight, 50000)
	t.Logf("median reuse age: stack %d records", age)
	assert.LessOrEqual(t, age, 2*stackRun, "records come back hot")

	o := new(slabOrder)
	for s := range inFlight + spare {
		o.give(s)
	}
	cold := reuseAge(t, o, inFlight, 50000)
	t.Logf("median reuse age: slab order %d records", cold)
	assert.Greater(t, cold, spare/2, "negative control: slab order reuses cold records")
}

// TestRecStackConcurrent runs the loop and a client's callbacks on their
// own goroutines, as the bench does (under -race: the runs given back
// under mu, the stamps read after the client's hand-off): no slot is handed
// out while its record is still out, and every record's stamp reaches its
// callback.
func TestRecStackConcurrent(t *testing.T) {
	const n, records = 4 * stackRun, 200000
	g := newRecStack[int64](n, nil)
	st := new(caseState)
	tally := &cbTally[int64]{st: st, stack: g}
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
