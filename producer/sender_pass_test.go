package producer

import (
	"testing"
	"testing/synctest"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-kafka/longhaul/internal/broker"
)

// Issue 20, keyed records over 1,000 partitions: a batch opens every few
// records, and each sender pass walked every partition under acc.mu.
// These count what a pass costs, not how long it takes.

// newBatchWakeups opens a batch on each of 200 partitions, one at a time,
// at one instant of virtual time, letting the sender settle after each, and
// returns how often the sender loop ran meanwhile.
func newBatchWakeups(t *testing.T) int64 {
	const parts = 200
	var loops int64
	synctest.Test(t, func(t *testing.T) {
		c, n := memCluster(t, broker.Config{Topics: []broker.TopicConfig{{Name: "t", Partitions: parts}}})
		p := memProducer(t, c, n, Linger(50*time.Millisecond))
		l := newLedger("a", "t")
		for part := range int32(parts) {
			l.produce(p, part, 1, 10)
		}
		require.True(t, l.waitAll(time.Minute), "warm-up")
		time.Sleep(time.Second)
		l0 := p.s.probe.loops.Load()
		for part := range int32(parts) {
			l.produce(p, part, 1, 10)
			synctest.Wait()
		}
		loops = p.s.probe.loops.Load() - l0
		t.Logf("sender loop iterations for %d new batches within one linger: %d", parts, loops)
		require.True(t, l.waitAll(time.Minute))
		require.Empty(t, l.failures())
	})
	return loops
}

// TestNewBatchDoesNotWakeSenderWithTimerSet: a new batch wakes the sender
// only when the sender would not wake by the batch's linger deadline anyway
// (wakeForLinger): here the first batch wakes it, and the 199 opened after
// it, whose linger ends no earlier than the timer it then set, do not. Every
// batch still goes out (the ledger). Negative control: at commit 1a00859
// (knob wakeEveryBatch), TestNewBatchDoesNotWakeSenderNegativeControl.
func TestNewBatchDoesNotWakeSenderWithTimerSet(t *testing.T) {
	require.LessOrEqual(t, newBatchWakeups(t), int64(10), "one wake-up, not one per batch")
}

// expireWalksUnderLoad produces one record a millisecond over 100
// partitions for two seconds of virtual time (open batches all along, each
// sent after its 5 ms linger) and returns the sender's loop iterations and
// expire's walks over the partitions in that time.
func expireWalksUnderLoad(t *testing.T) (loops, walks int64) {
	const parts = 100
	synctest.Test(t, func(t *testing.T) {
		c, n := memCluster(t, broker.Config{RTT: time.Millisecond, Topics: []broker.TopicConfig{{Name: "t", Partitions: parts}}})
		p := memProducer(t, c, n, Linger(5*time.Millisecond), DeliveryTimeout(30*time.Second), RequestTimeout(10*time.Second))
		l := newLedger("a", "t")
		for part := range int32(parts) {
			l.produce(p, part, 1, 10)
		}
		require.True(t, l.waitAll(time.Minute), "warm-up")
		l0, w0 := p.s.probe.loops.Load(), p.s.probe.expireWalks.Load()
		for i := range 2000 {
			l.produce(p, int32(i%parts), 1, 10)
			time.Sleep(time.Millisecond)
		}
		loops, walks = p.s.probe.loops.Load()-l0, p.s.probe.expireWalks.Load()-w0
		t.Logf("sender loop iterations %d, expire walks over the partitions %d", loops, walks)
		require.True(t, l.waitAll(time.Minute))
		require.Empty(t, l.failures())
	})
	return loops, walks
}

// TestExpireWalksOnlyWhenDue: expire looks at every partition only when a
// delivery timeout may be due (the earliest its last walk found), not in
// every sender pass; the sender still loops hundreds of times. Negative
// control: at commit 1a00859 (knob expireEveryPass),
// TestExpireWalksOnlyWhenDueNegativeControl.
func TestExpireWalksOnlyWhenDue(t *testing.T) {
	loops, walks := expireWalksUnderLoad(t)
	require.GreaterOrEqual(t, loops, int64(200), "the sender is busy")
	require.Less(t, walks*20, loops, "a walk in fewer than one pass in 20")
}

// looksWhileLingering opens a batch on each of 400 partitions with a 1 s
// linger, then seals 50 full batches on 50 of them, one at a time at one
// instant of virtual time, and returns how many partitions the sender
// looked at under acc.mu meanwhile.
func looksWhileLingering(t *testing.T) int64 {
	const parts = 400
	var looks int64
	synctest.Test(t, func(t *testing.T) {
		c, n := memCluster(t, broker.Config{Topics: []broker.TopicConfig{{Name: "t", Partitions: parts}}})
		p := memProducer(t, c, n, Linger(time.Second), DeliveryTimeout(time.Minute), RequestTimeout(10*time.Second))
		l := newLedger("a", "t")
		for part := range int32(parts) {
			l.produce(p, part, 1, 10)
		}
		require.True(t, l.waitAll(time.Minute), "warm-up")
		for part := range int32(parts) {
			l.produce(p, part, 1, 10) // lingers for a second
		}
		synctest.Wait()
		l0 := p.s.probe.looks.Load()
		for part := range int32(50) {
			l.produce(p, part, 1, 600) // above batch.size: sealed at once
			synctest.Wait()
		}
		looks = p.s.probe.looks.Load() - l0
		t.Logf("partitions looked at for 50 sealed batches while %d batches linger: %d", parts, looks)
		require.True(t, l.waitAll(time.Minute))
		require.Empty(t, l.failures())
	})
	return looks
}

// TestSenderPassLooksOnlyAtChanges: under acc.mu a sender pass looks
// only at the partitions with sealed batches, the batches whose linger
// ended and those kept open past it, not at every partition holding data
// (issue 20: at 1,000 keyed partitions that walk, in every pass, kept
// Produce waiting for the lock). Negative control: at commit 1a00859 (knob
// walkActive), TestSenderPassLooksOnlyAtChangesNegativeControl.
func TestSenderPassLooksOnlyAtChanges(t *testing.T) {
	require.LessOrEqual(t, looksWhileLingering(t), int64(50*20), "a few looks per sealed batch (one walk is 400)")
}

// TestPendingRecordFitsHalfALine: a batch's entry per record is 32 bytes,
// two to a cache line; what only a record waiting for metadata needs (when
// it was accepted, its copied bytes) lives in waitingRecord instead.
func TestPendingRecordFitsHalfALine(t *testing.T) {
	require.Equal(t, uintptr(32), unsafe.Sizeof(pendingRecord{}))
}

// TestDropOpenedCopiesOnlyPastHalf: dropping the entries a pass looked at
// leaves the rest in place until they are at most half of p.acc.opened, then
// moves them to the front, in order.
func TestDropOpenedCopiesOnlyPastHalf(t *testing.T) {
	p := &Producer{}
	parts := make([]*partBuf, 10)
	for i := range parts {
		parts[i] = &partBuf{ps: &partitionState{id: int32(i)}}
		p.acc.opened = append(p.acc.opened, openedBatch{pb: parts[i]})
	}
	first := &p.acc.opened[0]
	p.dropOpenedLocked(3)
	require.Equal(t, 3, p.acc.openedHead, "fewer than half dropped: nothing moved")
	require.Len(t, p.acc.opened, 10)
	require.Same(t, first, &p.acc.opened[0], "same array")
	require.Nil(t, p.acc.opened[0].pb, "dropped entries hold no partition")
	p.dropOpenedLocked(6)
	require.Zero(t, p.acc.openedHead, "past half: the rest moved to the front")
	require.Len(t, p.acc.opened, 4)
	for i, e := range p.acc.opened {
		require.Same(t, parts[6+i], e.pb)
	}
	p.dropOpenedLocked(4)
	require.Empty(t, p.acc.opened)
	require.Zero(t, p.acc.openedHead)
}
