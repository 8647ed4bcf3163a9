package producer

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A partSet lists each partition once, in the order it joined, and keep
// and take end or keep membership as the sender's pass needs.
func TestPartSetMembership(t *testing.T) {
	a, b, c := &partitionState{id: 0}, &partitionState{id: 1}, &partitionState{id: 2}
	s := partSet{bit: readyBit}
	other := partSet{bit: lingeringBit}
	s.add(b)
	s.add(a)
	s.add(b)
	other.add(a)
	require.Equal(t, []*partitionState{b, a}, s.members())
	require.True(t, s.has(a))
	require.False(t, s.has(c))
	require.True(t, other.has(a))
	require.False(t, other.has(b))

	s.keep(func(ps *partitionState) bool { return ps != b })
	require.Equal(t, []*partitionState{a}, s.members())
	require.False(t, s.has(b))
	require.True(t, other.has(a), "another set's membership is untouched")

	// Taken partitions stay members until they leave: one added again
	// while taken is not listed twice.
	s.add(c)
	taken := s.take(nil)
	require.Equal(t, []*partitionState{a, c}, taken)
	require.Zero(t, s.len())
	s.add(a)
	require.Zero(t, s.len())
	s.leave(a)
	s.add(a)
	require.Equal(t, []*partitionState{a}, s.members())
	require.True(t, s.has(c))
	s.leave(c)
	require.False(t, s.has(c))
}

// The backoff heap hands out partitions in deadline order, only once due,
// follows a changed deadline (fix), and lists each partition once.
func TestDeadlineHeapOrder(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var h deadlineHeap
	ps := make([]*partitionState, 5)
	for i, d := range []int{50, 10, 40, 20, 30} {
		ps[i] = &partitionState{id: int32(i), backoffUntil: t0.Add(time.Duration(d) * time.Millisecond)}
		h.wait(ps[i])
	}
	h.wait(ps[0])
	require.Equal(t, 5, h.Len())
	require.Equal(t, t0.Add(10*time.Millisecond), h.next())
	require.Nil(t, h.popDue(t0))

	ps[0].backoffUntil = t0.Add(5 * time.Millisecond) // 50 ms became 5 ms
	h.fix(ps[0])
	h.fix(&partitionState{}) // not listed: nothing happens
	var got []int32
	for p := h.popDue(t0.Add(25 * time.Millisecond)); p != nil; p = h.popDue(t0.Add(25 * time.Millisecond)) {
		got = append(got, p.id)
		require.Zero(t, p.backoffAt)
	}
	require.Equal(t, []int32{0, 1, 3}, got)
	require.Equal(t, t0.Add(30*time.Millisecond), h.next())
	h.wait(ps[1]) // due again later
	ps[1].backoffUntil = t0.Add(time.Second)
	h.fix(ps[1])
	require.Equal(t, int32(4), h.popDue(t0.Add(time.Minute)).id)
	require.Equal(t, int32(2), h.popDue(t0.Add(time.Minute)).id)
	require.Equal(t, int32(1), h.popDue(t0.Add(time.Minute)).id)
	require.Nil(t, h.popDue(t0.Add(time.Minute)))
	require.True(t, h.next().IsZero())
}
