package main

import (
	"errors"
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

// TestRecRing checks the record slab and the callbacks' tally: slots come
// in order, a callback gets its record's stamp and counts its latency, a
// block is taken again only once all its records are back (published by
// the tally when its run of the block ends), a full slab says so, and a
// record from elsewhere is timed by its Timestamp.
func TestRecRing(t *testing.T) {
	type rec struct {
		a  int64
		ts time.Time
	}
	g := newRecRing(ringBlock+1, func(r *rec) { r.a = 7 })
	require.Len(t, g.recs, 2*ringBlock, "whole blocks")
	st := new(caseState)
	tally := &cbTally[rec]{st: st, ring: g}
	tsOf := func(r *rec) time.Time { return r.ts }
	var got []*rec
	for i := range 2 * ringBlock {
		s, r := g.take()
		require.Equal(t, i, s)
		require.Same(t, &g.recs[i], r)
		assert.Equal(t, int64(7), r.a, "init ran")
		g.stamp(s, clk.now()-int64(time.Second))
		got = append(got, r)
	}
	s, r := g.take()
	assert.Equal(t, -1, s, "every slot out: a full lap finds no block")
	assert.Nil(t, r)
	for _, r := range got[:ringBlock-1] {
		tally.done(r, tsOf, nil)
	}
	tally.done(got[ringBlock], tsOf, nil) // block 1 starts: block 0's run is published
	s, _ = g.take()
	assert.Equal(t, -1, s, "block 0 has one record out, block 1 all but one")
	tally.done(got[ringBlock-1], tsOf, nil) // the last of block 0: a run of its own, pending
	s, _ = g.take()
	assert.Equal(t, -1, s, "block 0's last record is back but its run is not published yet")
	tally.done(got[ringBlock+1], tsOf, nil) // publishes it
	s, r = g.take()
	assert.Equal(t, 0, s, "block 0 is free again")
	assert.Same(t, got[0], r)

	tally.flushHist()
	assert.Equal(t, int64(ringBlock+2), st.acked(), "every called-back record counted")
	q := quantile(make([]int64, nBuckets), st.hist.snapshot(), 0.5)
	assert.InDelta(t, float64(time.Second), float64(q), float64(time.Second)/10, "latency from the stamp beside the slab")

	other := &rec{ts: timeOf(clk.now() - int64(2*time.Second))}
	assert.Equal(t, -1, g.slot(other), "a record from outside the slab")
	assert.Equal(t, -1, (*recRing[rec])(nil).slot(got[0]), "no ring (--heap)")
	before := st.hist.snapshot()
	tally.done(other, tsOf, nil)
	tally.flushHist()
	q = quantile(before, st.hist.snapshot(), 0.5)
	assert.InDelta(t, float64(2*time.Second), float64(q), float64(time.Second)/5, "timed by its Timestamp")
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
