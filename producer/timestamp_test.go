package producer

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/longhaul-kafka/longhaul/internal/broker"
)

// TestZeroTimestampIsNow checks Record.Timestamp's promise, "the zero value
// means now", for records spread over batches, partitions and pauses longer
// than clockRebase: each zero timestamp is set to a time between the wall
// clock readings just before and just after its Produce call, the callback
// sees it, and the broker stores it (in milliseconds). A caller's timestamp
// is kept as it was. Records alternate between two topics, so the topic
// Produce remembers from the last record is checked to be the right one.
func TestZeroTimestampIsNow(t *testing.T) {
	c := startCluster(t, broker.Config{Topics: []broker.TopicConfig{
		{Name: "ts-a", Partitions: 4}, {Name: "ts-b", Partitions: 4}}})
	p := newTestProducer(t, c, BatchSize(2048))
	ctx := context.Background()
	given := time.Date(1999, 12, 31, 23, 59, 59, 0, time.UTC)

	type sent struct {
		rec           *Record
		before, after time.Time // wall clock readings around Produce
		zero          bool
	}
	var (
		mu   sync.Mutex
		errs []error
		all  []sent
		wg   sync.WaitGroup
	)
	cb := func(r *Record, err error) {
		defer wg.Done()
		if err != nil {
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
		}
	}
	for round := range 4 {
		for i := range 500 {
			topic := []string{"ts-a", "ts-b"}[i%2]
			r := &Record{Topic: topic, Value: []byte(strconv.Itoa(round*1000 + i))}
			zero := i%7 != 0
			if !zero {
				r.Timestamp = given
			}
			wg.Add(1)
			before := time.Now().Round(0)
			p.Produce(ctx, r, cb)
			all = append(all, sent{rec: r, before: before, after: time.Now().Round(0), zero: zero})
		}
		time.Sleep(clockRebase + 20*time.Millisecond) // past clockRebase, no batch open in between
	}
	wg.Wait()
	require.Empty(t, errs)

	stored := map[string]int64{} // topic/partition/offset -> broker's timestamp
	for _, topic := range []string{"ts-a", "ts-b"} {
		for part := range int32(4) {
			for _, lr := range c.Records(topic, part) {
				stored[fmt.Sprint(topic, "/", part, "/", lr.Offset)] = lr.Timestamp
				want := "ts-a"
				if n, _ := strconv.Atoi(string(lr.Value)); n%1000%2 == 1 {
					want = "ts-b"
				}
				require.Equal(t, want, topic, "record %s landed in the wrong topic", lr.Value)
			}
		}
	}
	require.Len(t, stored, len(all))
	for _, s := range all {
		ts := s.rec.Timestamp
		if !s.zero {
			assert.True(t, ts.Equal(given), "a caller's timestamp changed to %v", ts)
		} else {
			// produceCache.now counts on from its last wall-clock reading
			// with the monotonic clock, so a wall clock slewed since then
			// (NTP: at most 500 ppm, over at most clockRebase) may put the
			// timestamp that far outside the call's own readings.
			wall := ts.Round(0)
			slack := clockRebase / 2000
			assert.False(t, wall.Before(s.before.Add(-slack)) || wall.After(s.after.Add(slack)),
				"zero timestamp became %v, outside the Produce call's %v..%v (+-%v)", wall, s.before, s.after, slack)
		}
		key := fmt.Sprint(s.rec.Topic, "/", s.rec.Partition(), "/", s.rec.Offset)
		require.Contains(t, stored, key)
		assert.Equal(t, ts.UnixMilli(), stored[key], "broker's timestamp of %s", key)
	}
}

// TestProduceClockRebases checks produceCache.now's rule: within
// clockRebase of its base reading it counts on from it, later (or with no
// base, or a base in the future) it reads time.Now again.
func TestProduceClockRebases(t *testing.T) {
	// Virtual time: the rule is about how far apart two readings are, which
	// a real clock on a loaded machine does not control; here the test sets
	// the gap.
	synctest.Test(t, func(t *testing.T) {
		var pc produceCache
		before := time.Now()
		got := pc.now()
		require.False(t, pc.clockBase.IsZero())
		assert.Equal(t, got, pc.clockBase, "the first call reads the clock")
		assert.False(t, got.Before(before), "the first reading %v is before the call (%v)", got, before)

		base := pc.clockBase
		time.Sleep(clockRebase - time.Millisecond)
		next := pc.now()
		assert.Equal(t, base, pc.clockBase, "within clockRebase the base stays")
		assert.True(t, next.Equal(base.Add(clockRebase-time.Millisecond)), "counted on from the base: %v, base %v", next, base)

		for _, stale := range []time.Time{time.Now().Add(-clockRebase - time.Millisecond), time.Now().Add(time.Hour)} {
			pc.clockBase = stale
			before := time.Now()
			got := pc.now()
			after := time.Now()
			assert.NotEqual(t, stale, pc.clockBase, "a base %v from now is read again", time.Until(stale))
			assert.False(t, got.Before(before) || got.After(after), "now %v outside %v..%v", got, before, after)
		}
	})
}

// TestReusedRecordKeepsFilledTimestamp checks Record.Timestamp's promise
// for a reused Record: the time Produce filled in for a zero Timestamp
// stays, and the next Produce of the same Record writes it again, unless
// the caller zeroes it, when the next Produce takes a new time.
func TestReusedRecordKeepsFilledTimestamp(t *testing.T) {
	c := startCluster(t, broker.Config{Topics: []broker.TopicConfig{{Name: "ts-reuse", Partitions: 1}}})
	p := newTestProducer(t, c)
	r := &Record{Topic: "ts-reuse", Value: []byte("v")}
	produce := func() time.Time {
		done := make(chan error, 1)
		p.Produce(context.Background(), r, func(_ *Record, err error) { done <- err })
		require.NoError(t, <-done)
		return r.Timestamp
	}
	first := produce()
	require.False(t, first.IsZero(), "a zero Timestamp is filled in")
	time.Sleep(5 * time.Millisecond)
	assert.True(t, produce().Equal(first), "a reused Record keeps the filled-in time")
	r.Timestamp = time.Time{}
	third := produce()
	assert.True(t, third.After(first), "zeroed again, it takes a new time: %v after %v", third, first)
}
