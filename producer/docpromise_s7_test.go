package producer

// Tests for doc-comment promises checked in session 7's review: sentences
// of exported names' docs that no test held the code to, or that were
// false.

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
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
