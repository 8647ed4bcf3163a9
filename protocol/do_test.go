package protocol

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// lateTimerCtx is a context whose deadline has passed but whose own timer
// has not fired yet: Deadline is in the past, Done is not closed and Err is
// nil. context.WithTimeout is in that state between its deadline and the
// moment its timer goroutine runs, which on a loaded machine is long
// enough for a caller to reach Do.
type lateTimerCtx struct {
	context.Context
	deadline time.Time
}

func (c lateTimerCtx) Deadline() (time.Time, bool) { return c.deadline, true }

// TestDoPassedDeadlineBeforeContextTimer: Do with a deadline already passed
// fails with context.DeadlineExceeded and sends nothing, even while
// ctx.Err() is still nil. It returned ctx.Err(), so (nil, nil): a Metadata
// caller (read-back's leader lookup) then panicked on the nil response,
// seen under -race on a loaded machine.
func TestDoPassedDeadlineBeforeContextTimer(t *testing.T) {
	b := newFakeBroker(t)
	var sent atomic.Int32
	b.handle = func(h RequestHeader, req kmsg.Request, reply func(any)) {
		sent.Add(1)
		reply(mdEcho(req))
	}
	c := dialT(t, b.listen(), DialConfig{})
	ctx := lateTimerCtx{Context: context.Background(), deadline: time.Now().Add(-time.Millisecond)}
	if ctx.Err() != nil {
		t.Fatal("the context must look not ended yet")
	}
	resp, err := c.Do(ctx, mdReq("late"))
	if resp != nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Do = (%v, %v), want (nil, DeadlineExceeded)", resp, err)
	}
	// The connection is untouched: the next request is answered, and the
	// late one was never sent.
	if r, err := c.Do(context.Background(), mdReq("next")); err != nil || respTopic(r) != "next" {
		t.Fatalf("next Do: %v", err)
	}
	if n := sent.Load(); n != 1 {
		t.Fatalf("%d requests reached the broker, want 1", n)
	}
}

// TestDoAlwaysResponseOrError: whatever ends a pending Do first - Close,
// its context being cancelled, or both at the same moment - Do returns a
// non-nil error (and no response), and a response arriving for a request
// whose Do already returned is dropped without harm to the next one.
func TestDoAlwaysResponseOrError(t *testing.T) {
	for _, tc := range []struct {
		name          string
		close, cancel bool
	}{
		{"close", true, false},
		{"cancel", false, true},
		{"close and cancel at once", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newFakeBroker(t)
			got := make(chan func(any), 1)
			b.handle = func(h RequestHeader, req kmsg.Request, reply func(any)) {
				if respTopic(mdEcho(req)) == "held" {
					got <- reply
					return
				}
				reply(mdEcho(req))
			}
			c := dialT(t, b.listen(), DialConfig{})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			type result struct {
				resp kmsg.Response
				err  error
			}
			out := make(chan result, 1)
			held := mdReq("held")
			go func() {
				r, err := c.Do(ctx, held)
				out <- result{r, err}
			}()
			reply := <-got // written and pending: the broker holds it
			start := make(chan struct{})
			fired := make(chan struct{}, 2)
			if tc.close {
				go func() { <-start; c.Close(); fired <- struct{}{} }()
			}
			if tc.cancel {
				go func() { <-start; cancel(); fired <- struct{}{} }()
			}
			close(start)
			r := <-out
			if r.err == nil || r.resp != nil {
				t.Fatalf("Do = (%v, %v), want an error", r.resp, r.err)
			}
			if !errors.Is(r.err, ErrConnClosed) && !errors.Is(r.err, context.Canceled) {
				t.Fatalf("Do error %v", r.err)
			}
			if !tc.close && !errors.Is(r.err, context.Canceled) {
				t.Fatalf("Do error %v, want context.Canceled", r.err)
			}
			if !tc.cancel && !errors.Is(r.err, ErrConnClosed) {
				t.Fatalf("Do error %v, want ErrConnClosed", r.err)
			}
			if tc.close {
				<-fired
				if tc.cancel {
					<-fired
				}
				return
			}
			<-fired
			// The late response of the cancelled request is consumed and
			// dropped; the connection goes on.
			reply(mdEcho(held))
			if r, err := c.Do(context.Background(), mdReq("next")); err != nil || respTopic(r) != "next" {
				t.Fatalf("next Do: %v", err)
			}
			if c.InFlight() != 0 {
				t.Fatal("the cancelled request stayed in flight")
			}
		})
	}
}
