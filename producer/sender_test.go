package producer

import (
	"testing"
	"time"
)

// TestEarliestTreatsZeroAsNone is the regression test for a sender that
// slept a full second instead of linger.ms: a zero "next wake" swallowed
// every linger deadline.
func TestEarliestTreatsZeroAsNone(t *testing.T) {
	now := time.Now()
	later := now.Add(time.Second)
	cases := []struct {
		name string
		a, b time.Time
		want time.Time
	}{
		{"zero first", time.Time{}, now, now},
		{"zero second", now, time.Time{}, now},
		{"both zero", time.Time{}, time.Time{}, time.Time{}},
		{"earlier second", later, now, now},
		{"earlier first", now, later, now},
	}
	for _, tc := range cases {
		if got := earliest(tc.a, tc.b); !got.Equal(tc.want) {
			t.Errorf("%s: earliest = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestAddSeqWraps(t *testing.T) {
	cases := []struct {
		seq  int32
		n    int
		want int32
	}{
		{0, 5, 5},
		{2147483645, 2, 2147483647},
		{2147483645, 3, 0},
		{2147483647, 10, 9},
	}
	for _, tc := range cases {
		if got := addSeq(tc.seq, tc.n); got != tc.want {
			t.Errorf("addSeq(%d, %d) = %d, want %d", tc.seq, tc.n, got, tc.want)
		}
	}
}
