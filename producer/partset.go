package producer

import (
	"container/heap"
	"time"
)

// setBit names one of the sets of partitions a goroutine keeps; a
// partition carries one bit per set it is in (partitionState.member for
// the sender's). The set keeps the bit and its list in step, so no caller
// can list a partition twice or forget to clear its mark.
type setBit uint8

// The sender's sets.
const (
	readyBit     setBit = 1 << iota // sender.ready: to visit in the next pass (markReady)
	lingeringBit                    // sender.lingering: a lingered batch kept open (lingeredKeptOpen)
	activeBit                       // sender.active: batches taken from the accumulator, until pruned
)

// partSet is a set of partitions in the order they joined. Membership is
// a bit in the partition: a check or an insertion hashes nothing and
// allocates nothing but the list's growth, as cheap as a boolean beside a
// list, and iteration follows the order of joining, which decides the
// order partitions go into a request.
type partSet struct {
	bit  setBit
	list []*partitionState
}

// has reports whether ps is in the set.
func (s *partSet) has(ps *partitionState) bool { return ps.member&s.bit != 0 }

// add puts ps at the end of the set unless it is in it already.
func (s *partSet) add(ps *partitionState) {
	if ps.member&s.bit == 0 {
		ps.member |= s.bit
		s.list = append(s.list, ps)
	}
}

// len is the number of partitions listed.
func (s *partSet) len() int { return len(s.list) }

// members is the set in order, to read; changing the set while ranging
// over it is done with keep or take.
func (s *partSet) members() []*partitionState { return s.list }

// keep drops, in order, the partitions for which f reports false.
func (s *partSet) keep(f func(*partitionState) bool) {
	s.list = keepMembers(s.list, f, s.leave)
}

// keepMembers keeps, in order, the members of list for which f reports
// true, and calls leave for each of the others: partSet's and bufSet's
// keep.
func keepMembers[T any](list []T, f func(T) bool, leave func(T)) []T {
	kept := list[:0]
	for _, x := range list {
		if f(x) {
			kept = append(kept, x)
		} else {
			leave(x)
		}
	}
	clear(list[len(kept):])
	return kept
}

// take empties the set's list, handing it over, and starts a new one in
// spare (a list take returned before, its capacity reused). The partitions
// taken stay members until leave: one added again meanwhile is not listed
// twice, as the sender's pass needs (a partition marked ready while the
// pass visits it is visited once).
func (s *partSet) take(spare []*partitionState) []*partitionState {
	out := s.list
	s.list = spare[:0]
	return out
}

// leave ends ps's membership; it must not be in the set's list (take).
func (s *partSet) leave(ps *partitionState) { ps.member &^= s.bit }

// The accumulator's sets (under acc.mu; the bit is in partBuf.member).
const (
	activeBufBit setBit = 1 << iota // accumulator.active: holding an open or sealed batch, until expire's walk finds it empty
	sealedInBit                     // accumulator.sealedIn: batches sealed since the sender's last take
)

// bufSet is partSet for the accumulator's halves of partitions (partBuf),
// under acc.mu: a bit in the partBuf, kept in step with the list by the
// set alone.
type bufSet struct {
	bit  setBit
	list []*partBuf
}

// add puts pb at the end of the set unless it is in it already.
func (s *bufSet) add(pb *partBuf) {
	if pb.member&s.bit == 0 {
		pb.member |= s.bit
		s.list = append(s.list, pb)
	}
}

// len is the number of partitions listed.
func (s *bufSet) len() int { return len(s.list) }

// members is the set in order, to read.
func (s *bufSet) members() []*partBuf { return s.list }

// keep drops, in order, the partitions for which f reports false.
func (s *bufSet) keep(f func(*partBuf) bool) {
	s.list = keepMembers(s.list, f, s.leave)
}

// drain calls f for every member in order and empties the set, keeping
// its list's array.
func (s *bufSet) drain(f func(*partBuf)) {
	for i, pb := range s.list {
		s.leave(pb)
		f(pb)
		s.list[i] = nil
	}
	s.list = s.list[:0]
}

// leave ends pb's membership; the caller drops it from the list.
func (s *bufSet) leave(pb *partBuf) { pb.member &^= s.bit }

// deadlineHeap holds partitions waiting for their backoff to end
// (partitionState.backoffUntil), earliest first, so a pass finds the ones
// due and the next wake-up without looking at the others. Each partition
// knows its place (partitionState.backoffAt, index + 1, 0 outside), so a
// changed deadline moves it in place (fix).
type deadlineHeap []*partitionState

func (h deadlineHeap) Len() int           { return len(h) }
func (h deadlineHeap) Less(i, j int) bool { return h[i].backoffUntil.Before(h[j].backoffUntil) }
func (h deadlineHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].backoffAt, h[j].backoffAt = i+1, j+1
}

func (h *deadlineHeap) Push(x any) {
	ps := x.(*partitionState)
	ps.backoffAt = len(*h) + 1
	*h = append(*h, ps)
}

func (h *deadlineHeap) Pop() any {
	old := *h
	ps := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	ps.backoffAt = 0
	return ps
}

// wait lists ps until its backoffUntil; a no-op if it is listed.
func (h *deadlineHeap) wait(ps *partitionState) {
	if ps.backoffAt == 0 {
		heap.Push(h, ps)
	}
}

// fix moves ps to its place after its backoffUntil changed; a no-op if it
// is not listed.
func (h *deadlineHeap) fix(ps *partitionState) {
	if ps.backoffAt != 0 {
		heap.Fix(h, ps.backoffAt-1)
	}
}

// popDue removes and returns the partition whose backoff ended first if
// it ended by now, else nil.
func (h *deadlineHeap) popDue(now time.Time) *partitionState {
	if len(*h) == 0 || now.Before((*h)[0].backoffUntil) {
		return nil
	}
	return heap.Pop(h).(*partitionState)
}

// next is the earliest deadline listed, zero if none.
func (h deadlineHeap) next() time.Time {
	if len(h) == 0 {
		return time.Time{}
	}
	return h[0].backoffUntil
}
