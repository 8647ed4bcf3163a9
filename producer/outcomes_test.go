package producer

// Tests of the outcome a record gets from Produce, ProduceSync and Close
// in the cases their docs name: a nil record, a ctx already done, records
// that already had their outcome, and Close failing sent and unsent
// batches apart.

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/longhaul-kafka/longhaul/internal/broker"
)

// unstartedProducer is a producer whose brokers never answer: enough for
// promises about what Produce does before any broker is involved.
func unstartedProducer(t *testing.T, opts ...Opt) *Producer {
	t.Helper()
	p, err := New(append([]Opt{BootstrapServers("127.0.0.1:1")}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = p.Close(ctx)
	})
	return p
}

// TestNilRecordCalledBackOnCallbackGoroutine: Produce's doc says records
// that fail before being placed in a partition ("invalid, closed, no
// metadata") are called back from the callback goroutine, one callback at
// a time, and only after Close has returned from the caller's. A nil record
// is invalid: while the callback goroutine is held in an earlier callback,
// its callback must not run (it ran at once, on the caller's goroutine,
// beside the held one).
func TestNilRecordCalledBackOnCallbackGoroutine(t *testing.T) {
	for _, try := range []bool{false, true} {
		p := unstartedProducer(t)
		hold, held := make(chan struct{}), make(chan struct{})
		var release sync.Once
		t.Cleanup(func() { release.Do(func() { close(hold) }) }) // before Close, which waits for callbacks
		// An empty topic is rejected through the callback goroutine, which
		// then waits in this callback.
		p.Produce(t.Context(), &Record{}, func(*Record, error) {
			close(held)
			<-hold
		})
		<-held
		var ran atomic.Bool
		errc := make(chan error, 1)
		cb := func(r *Record, err error) {
			ran.Store(true)
			errc <- err
		}
		if try {
			p.TryProduce(nil, cb)
		} else {
			p.Produce(t.Context(), nil, cb)
		}
		require.False(t, ran.Load(), "TryProduce=%v: nil record's callback ran beside the running one, on the caller's goroutine", try)
		release.Do(func() { close(hold) })
		require.ErrorIs(t, <-errc, ErrInvalidRecord)
	}
}

// TestCloseFailsSentAndUnsentApart: Close's doc: once ctx ends it fails
// what is undelivered with ErrClosed, "as a *DeliveryError marked
// FateUnknown when it had been sent", and returns "an error wrapping
// ctx's". A batch in flight to a stalled broker and one held behind it
// (the partition's first batch goes alone) fail apart: the first maybe
// written, the second certainly not, and never in the log.
func TestCloseFailsSentAndUnsentApart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, n := memCluster(t, broker.Config{Topics: []broker.TopicConfig{{Name: "t", Partitions: 2}}})
		p := memProducer(t, c, n)
		warm := &Record{Topic: "t", Value: []byte("warm")}
		warm.SetPartition(1)
		require.NoError(t, p.ProduceSync(t.Context(), warm).FirstErr())

		c.Stall(0, 3*time.Second)
		errs := make(chan error, 2)
		sent := &Record{Topic: "t", Value: []byte("sent")}
		sent.SetPartition(0)
		p.Produce(t.Context(), sent, func(_ *Record, err error) { errs <- err })
		time.Sleep(100 * time.Millisecond)
		require.Equal(t, 1, p.Stats().Partitions[0].InFlight, "the first batch is in flight")
		held := &Record{Topic: "t", Value: []byte("held")}
		held.SetPartition(0)
		p.Produce(t.Context(), held, func(_ *Record, err error) { errs <- err })
		time.Sleep(100 * time.Millisecond)

		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		defer cancel()
		require.ErrorIs(t, p.Close(ctx), context.DeadlineExceeded)
		for _, fateUnknown := range []bool{true, false} {
			err := <-errs
			require.ErrorIs(t, err, ErrClosed)
			var de *DeliveryError
			require.ErrorAs(t, err, &de)
			assert.Equal(t, fateUnknown, de.FateUnknown, "%v", err)
			assert.Equal(t, fateUnknown, IsFateUnknown(err))
		}
		time.Sleep(3 * time.Second) // the stall ends; the broker handles what it read
		for _, r := range c.Records("t", 0) {
			assert.NotEqual(t, "held", string(r.Value), "a record reported without FateUnknown is not in the log")
		}
	})
}

// TestProduceSyncOutcomesKept: "Records that already had their outcome
// keep it" when ProduceSync's ctx ends: a record rejected at once keeps
// its ErrInvalidRecord and a delivered one its success and offset, while
// one still waiting (for its topic's partitions) is withdrawn with ctx's
// error.
func TestProduceSyncOutcomesKept(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, n := memCluster(t, broker.Config{Topics: []broker.TopicConfig{{Name: "t", Partitions: 1}}})
		p := memProducer(t, c, n, MaxBlock(time.Hour))
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		defer cancel()
		res := p.ProduceSync(ctx, &Record{Value: []byte("no topic")}, &Record{Topic: "t", Value: []byte("ok")}, &Record{Topic: "nowhere", Value: []byte("w")})
		require.Len(t, res, 3)
		assert.ErrorIs(t, res[0].Err, ErrInvalidRecord)
		assert.NotErrorIs(t, res[0].Err, context.DeadlineExceeded)
		assert.NoError(t, res[1].Err)
		assert.Equal(t, int64(0), res[1].Record.Offset)
		assert.ErrorIs(t, res[2].Err, context.DeadlineExceeded)
		assert.False(t, IsFateUnknown(res[2].Err))
		assert.Equal(t, int64(-1), res[2].Record.Offset)
	})
}

// TestProduceWithDoneContext: a ctx already done when Produce is called
// fails the record with ctx's error, not sent, even with buffer.memory
// free (Produce's doc said ctx only bounded the wait for room, and had "no
// other effect"); the next record with a live ctx is written.
func TestProduceWithDoneContext(t *testing.T) {
	c := startCluster(t, broker.Config{Topics: []broker.TopicConfig{{Name: "t", Partitions: 1}}})
	p := newTestProducer(t, c)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	errc := make(chan error, 1)
	p.Produce(ctx, &Record{Topic: "t", Value: []byte("late")}, func(_ *Record, err error) { errc <- err })
	require.ErrorIs(t, <-errc, context.Canceled)
	require.NoError(t, p.ProduceSync(t.Context(), &Record{Topic: "t", Value: []byte("live")}).FirstErr())
	rs := c.Records("t", 0)
	require.Len(t, rs, 1)
	assert.Equal(t, "live", string(rs[0].Value))
}
