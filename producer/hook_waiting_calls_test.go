package producer

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-kafka/longhaul/internal/broker"
)

// hookCallTimeout bounds each waiting call made from a hook, so that a call
// that would deadlock (the negative control) returns, cut short, instead of
// hanging the test.
const hookCallTimeout = time.Minute

// hookCall is the outcome of one call made from a hook, with the virtual
// time it took: inside a synctest bubble no time passes while the hook
// runs unless the call blocks.
type hookCall struct {
	err    error
	waited time.Duration
}

// hookCalls is what waitingHook saw.
type hookCalls struct {
	produce, flush, sync, close hookCall
	// skipped: Flush was not refused, so ProduceSync and Close were not
	// tried.
	skipped bool
}

// waitingHook calls the Producer's waiting methods from OnBatchAcked, on the
// sender goroutine, once: Produce of a record that does not fit in
// buffer.memory (the acked batch still holds its bytes), Flush and, if
// Flush was refused, ProduceSync and Close: not refused, these two would
// hang for good, whatever their ctx (ProduceSync withdraws its unsent
// records on the sender goroutine, Close waits for the sender to end).
type waitingHook struct {
	p      atomic.Pointer[Producer]
	budget int64
	fired  atomic.Bool
	got    chan hookCalls
}

func (h *waitingHook) OnBatchAcked(BatchInfo, int64) {
	p := h.p.Load()
	if p == nil || !h.fired.CompareAndSwap(false, true) {
		return
	}
	var cs hookCalls
	call := func(f func(ctx context.Context) error) hookCall {
		ctx, cancel := context.WithTimeout(context.Background(), hookCallTimeout)
		defer cancel()
		start := time.Now()
		err := f(ctx)
		return hookCall{err, time.Since(start)}
	}
	cs.produce = call(func(ctx context.Context) error {
		held := p.mem.Held()
		v := int(h.budget - held + 1)
		big := toPartition("t", 0, make([]byte, v))
		for int64(recordMemory(big)) <= h.budget-held {
			v++
			big = toPartition("t", 0, make([]byte, v))
		}
		if int64(recordMemory(big)) > h.budget-61 {
			return nil // cannot build the case; the check fails
		}
		outcome := make(chan error, 1)
		p.Produce(ctx, big, func(_ *Record, err error) { outcome <- err })
		return <-outcome
	})
	cs.flush = call(p.Flush)
	if cs.flush.err == ErrInCallback {
		cs.sync = call(func(ctx context.Context) error {
			return p.ProduceSync(ctx, toPartition("t", 0, []byte("inner"))).FirstErr()
		})
		cs.close = call(p.Close)
	} else {
		cs.skipped = true
	}
	h.got <- cs
}

// runWaitingHook produces one record with a waitingHook registered and
// returns what the hook's calls gave, once the record's callback ran.
func runWaitingHook(t *testing.T, opts ...Opt) (*broker.Cluster, *Producer, hookCalls) {
	t.Helper()
	c, n := memCluster(t, broker.Config{Topics: []broker.TopicConfig{{Name: "t", Partitions: 1}}})
	const budget = 16384
	h := &waitingHook{budget: budget, got: make(chan hookCalls, 1)}
	p := memProducer(t, c, n, append([]Opt{Hooks(h), BufferMemory(budget), MaxRequestSize(budget), BatchSize(budget)}, opts...)...)
	h.p.Store(p)
	first := make(chan error, 1)
	p.Produce(context.Background(), toPartition("t", 0, []byte("first")), func(_ *Record, err error) { first <- err })
	var cs hookCalls
	select {
	case cs = <-h.got:
	case <-time.After(10 * hookCallTimeout):
		t.Fatal("the hook's calls never returned")
	}
	require.NoError(t, <-first, "the record whose acknowledgement ran the hook")
	return c, p, cs
}

// TestWaitingCallsFromAHook: hooks run on the sender goroutine, so Flush,
// ProduceSync and Close called from one would wait for the sender the hook
// holds, and Produce for buffer.memory that only comes back once the sender
// has queued the callbacks. Each returns at once instead (no virtual time
// passes): Flush, ProduceSync and Close with ErrInCallback, Produce failing
// the record with ErrBufferFull; and the producer keeps working: the
// record is delivered, Close from the hook did not close it, later records
// are delivered and Close returns nil.
func TestWaitingCallsFromAHook(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, p, cs := runWaitingHook(t)
		require.ErrorIs(t, cs.produce.err, ErrBufferFull, "Produce from a hook must not wait for buffer.memory")
		require.Zero(t, cs.produce.waited)
		require.ErrorIs(t, cs.flush.err, ErrInCallback)
		require.Zero(t, cs.flush.waited)
		require.ErrorIs(t, cs.sync.err, ErrInCallback)
		require.Zero(t, cs.sync.waited)
		require.False(t, cs.skipped)
		require.ErrorIs(t, cs.close.err, ErrInCallback)
		require.Zero(t, cs.close.waited)

		require.NoError(t, p.ProduceSync(context.Background(), toPartition("t", 0, []byte("after"))).FirstErr(),
			"Close from the hook closed the producer")
		require.NoError(t, p.Flush(context.Background()))
		require.NoError(t, p.Close(context.Background()))
		require.Len(t, c.Records("t", 0), 2, "the records refused in the hook were not sent")
	})
}

// TestWaitingCallsFromAHookHangWithoutDetection is the negative control of
// TestWaitingCallsFromAHook: with the sender goroutine not told apart
// (regressions.hookWaitUndetected) Produce and Flush wait until their
// context ends, a deadlock only the timeout cuts short (ProduceSync and
// Close are not tried: no context would end their wait).
func TestWaitingCallsFromAHookHangWithoutDetection(t *testing.T) {
	needRegress(t)
	synctest.Test(t, func(t *testing.T) {
		undetected := bug(t, hookWaitUndetected, true)
		c, p, cs := runWaitingHook(t, undetected)
		for name, call := range map[string]hookCall{"Produce": cs.produce, "Flush": cs.flush} {
			require.ErrorIs(t, call.err, context.DeadlineExceeded, "%s from a hook did not hang", name)
			require.GreaterOrEqual(t, call.waited, hookCallTimeout, name)
		}
		require.True(t, cs.skipped)
		require.NoError(t, p.Close(context.Background()))
		require.Len(t, c.Records("t", 0), 1)
	})
}
