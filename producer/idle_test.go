package producer

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-kafka/longhaul/internal/broker"
)

// idleWakeups warms a producer up on four partitions, lets everything
// settle, and returns how often its sender loop ran over the next minute of
// virtual time with nothing to send.
func idleWakeups(t *testing.T) int64 {
	var loops int64
	synctest.Test(t, func(t *testing.T) {
		c, n := memCluster(t, broker.Config{Topics: []broker.TopicConfig{{Name: "t", Partitions: 4}}})
		p := memProducer(t, c, n)
		l := newLedger("a", "t")
		warmUp(t, p, l, 0, 1, 2, 3)
		time.Sleep(10 * time.Second) // linger, backoffs and delivery timeouts all behind
		l0 := p.s.probe.loops.Load()
		time.Sleep(time.Minute)
		loops = p.s.probe.loops.Load() - l0
		t.Logf("sender loop iterations in one idle minute: %d", loops)
		// Still works after the pause.
		l.produce(p, 1, 5, 10)
		require.True(t, l.waitAll(time.Minute))
		require.Empty(t, l.failures())
	})
	return loops
}

// TestIdleSenderDoesNotWake: with nothing buffered and nothing due, the
// sender sleeps until an event or the next deadline (metadata.max.age.ms,
// 5 minutes by default) instead of waking every second (issue 20: 23
// wake-ups per second idle, kgo 3). A count over a fixed interval of
// virtual time. Negative control (the 1 s cap, knob idleTick): at commit
// 1a00859, TestIdleSenderDoesNotWakeNegativeControl.
func TestIdleSenderDoesNotWake(t *testing.T) {
	require.LessOrEqual(t, idleWakeups(t), int64(2), "sender wake-ups in an idle minute")
}

// visitsWhileBlocked fills the window of every partition of a 400-partition
// topic over a 1 s round trip, then produces 50 full batches to 50 of the
// partitions while every response is still on its way, and returns how many
// partitions the sender visited meanwhile.
func visitsWhileBlocked(t *testing.T) int64 {
	const parts = 400
	var visits int64
	synctest.Test(t, func(t *testing.T) {
		c, n := memCluster(t, broker.Config{RTT: time.Second, Topics: []broker.TopicConfig{{Name: "t", Partitions: parts}}})
		p := memProducer(t, c, n, DeliveryTimeout(time.Minute), RequestTimeout(30*time.Second))
		l := newLedger("a", "t")
		for part := range int32(parts) {
			l.produce(p, part, 1, 10)
		}
		require.True(t, l.waitAll(time.Minute), "warm-up: one batch per partition opens its gate")
		full := func(part int32) {
			r := &Record{Topic: "t", Value: make([]byte, 600)} // above batch.size: sealed at once
			r.SetPartition(part)
			p.Produce(t.Context(), r, nil)
		}
		for part := range int32(parts) {
			for range 6 { // window 5: five in flight, one waiting
				full(part)
			}
		}
		synctest.Wait()
		v0 := p.s.probe.visits.Load()
		for part := range int32(50) {
			full(part)
			synctest.Wait()
		}
		visits = p.s.probe.visits.Load() - v0
		t.Logf("partitions visited for 50 new batches while %d partitions wait for their window: %d", parts, visits)
		require.NoError(t, p.Flush(t.Context()))
	})
	return visits
}

// TestSenderVisitsOnlyReadyPartitions: a new batch makes the sender look at
// its own partition, not at every partition holding data (issue 20: the
// send loop walked every partition on every pass, 15.5 % of CPU at 10 000
// partitions). A count, not a timing. Negative control (every partition
// visited on every pass, knob visitAll): at commit 1a00859,
// TestSenderVisitsOnlyReadyPartitionsNegativeControl.
func TestSenderVisitsOnlyReadyPartitions(t *testing.T) {
	require.Less(t, visitsWhileBlocked(t), int64(400), "fewer visits than one walk over every partition")
}

// TestNewBatchAfterWithdrawnHeldBatchKeepsItsLinger: an open batch held
// past linger.ms (its partition could not send: five batches in flight fill
// the window over a 1 s round trip) and then emptied by a withdrawal does
// not leave its "held" mark to the partition's next batch, which goes out
// after its own linger, not at delivery.timeout.ms.
func TestNewBatchAfterWithdrawnHeldBatchKeepsItsLinger(t *testing.T) {
	took, err := afterWithdrawnHeldBatch(t, false)
	require.NoError(t, err)
	require.Less(t, took, 2*time.Second, "linger plus one round trip, not delivery.timeout.ms")
}

// Negative control: with the mark inherited (knob keepHeldMark, the bug
// 07d9567 fixed) the next batch is never sent and fails at
// delivery.timeout.ms.
func TestNewBatchAfterWithdrawnHeldBatchNegativeControl(t *testing.T) {
	needRegress(t)
	took, err := afterWithdrawnHeldBatch(t, true)
	require.ErrorIs(t, err, ErrDeliveryTimeout)
	require.GreaterOrEqual(t, took, 2*time.Second)
}

// afterWithdrawnHeldBatch holds an open batch past linger.ms behind a full
// window, withdraws it, and returns how long the partition's next record
// took and its error.
func afterWithdrawnHeldBatch(t *testing.T, keep bool) (took time.Duration, err error) {
	synctest.Test(t, func(t *testing.T) {
		c, n := memCluster(t, broker.Config{RTT: time.Second, Topics: []broker.TopicConfig{{Name: "t", Partitions: 1}}})
		p := memProducer(t, c, n, Linger(5*time.Millisecond), RequestTimeout(10*time.Second), DeliveryTimeout(30*time.Second),
			bug(t, keepHeldMark, keep))
		small := func() *Record { return &Record{Topic: "t", Value: []byte("v")} }
		require.NoError(t, p.ProduceSync(t.Context(), small()).FirstErr(), "warm-up opens the gate")
		full := make(chan error, 5)
		for range 5 { // above batch.size: each sealed at once; the window is full
			p.Produce(t.Context(), &Record{Topic: "t", Value: make([]byte, 600)}, func(_ *Record, err error) { full <- err })
		}
		// Lingers past linger.ms behind the full window, then is withdrawn.
		ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
		werr := p.ProduceSync(ctx, small()).FirstErr()
		cancel()
		require.ErrorIs(t, werr, context.DeadlineExceeded)
		for range 5 {
			require.NoError(t, <-full)
		}
		time.Sleep(100 * time.Millisecond)
		start := time.Now()
		err = p.ProduceSync(t.Context(), small()).FirstErr()
		took = time.Since(start)
	})
	return took, err
}
