package producer

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// queueCycleAllocs is the allocations of one batch through a partition's
// queue, sealed, taken by the sender and sent, as a partition that sends
// one batch at a time does (many partitions, little data each).
func queueCycleAllocs() float64 {
	s := &sender{cfg: &config{}, active: partSet{bit: activeBit}, ready: partSet{bit: readyBit}}
	ps := &partitionState{}
	ps.buf = &partBuf{ps: ps}
	b := &batch{}
	return testing.AllocsPerRun(1000, func() {
		ps.buf.sealed = append(ps.buf.sealed, b)
		s.takeSealed(accHeld{}, ps)
		if s.popQueue(ps) != b {
			panic("popQueue returned another batch")
		}
		s.visit = s.ready.take(s.visit)
		s.ready.leave(ps)
	})
}

// A partition sending one batch at a time moves it through its queue
// without allocating. Negative control (slicing past the last batch, knob
// queueSlides: every batch allocates a new array): at commit 1a00859, this
// test.
func TestQueueCycleDoesNotAllocate(t *testing.T) {
	require.Zero(t, queueCycleAllocs())
}

// Several batches in the queue still come out oldest first.
func TestPopQueueKeepsOrder(t *testing.T) {
	s := &sender{cfg: &config{}, active: partSet{bit: activeBit}, ready: partSet{bit: readyBit}}
	ps := &partitionState{}
	ps.buf = &partBuf{ps: ps}
	bs := []*batch{{}, {}, {}}
	ps.buf.sealed = append(ps.buf.sealed, bs...)
	s.takeSealed(accHeld{}, ps)
	for _, want := range bs {
		require.Same(t, want, s.popQueue(ps))
	}
	require.Empty(t, ps.queue)
	require.Zero(t, ps.queuedPub.Load())
}
