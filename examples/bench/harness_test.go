package main

import (
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

// TestRecRing checks the record slab: slots come in order, a record's
// callback gets its stamp back and frees the slot, busy slots are skipped,
// a full slab says so, and a record from elsewhere is not taken for one of
// its own.
func TestRecRing(t *testing.T) {
	type rec struct{ a int64 }
	g := newRecRing(4, func(r *rec) { r.a = 7 })
	var got []*rec
	for i := range 4 {
		s, r := g.take()
		require.Equal(t, i, s)
		require.Same(t, &g.recs[i], r)
		assert.Equal(t, int64(7), r.a, "init ran")
		g.out(s, int64(100+i))
		got = append(got, r)
	}
	s, r := g.take()
	assert.Equal(t, -1, s, "every slot out: a full lap finds none")
	assert.Nil(t, r)
	sent, ok := g.back(got[2])
	require.True(t, ok)
	assert.Equal(t, int64(102), sent, "the stamp of its own slot")
	_, ok = g.back(&rec{})
	assert.False(t, ok, "a record from outside the slab")
	var nilRing *recRing[rec]
	_, ok = nilRing.back(got[0])
	assert.False(t, ok, "no ring (--heap)")
	s, r = g.take()
	assert.Equal(t, 2, s, "slots 0, 1 and 3 are still out: skipped")
	assert.Same(t, got[2], r)
	g.out(s, 0)
	assert.Equal(t, int64(1), g.sent[2], "a zero stamp is stored as 1, so the slot reads as out")
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
