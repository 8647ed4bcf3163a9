package linkproxy

import "time"

// waiter blocks its goroutine until a due time. Each pump writer owns one;
// a waiter is not safe for concurrent use.
type waiter interface {
	// wait returns at or after due, never before it; at once if due has
	// passed.
	wait(due time.Time)
	// close releases what the waiter holds; it is not used afterwards.
	close()
}

// timerWaiter waits on a runtime timer. It is portable and follows
// testing/synctest's virtual clock, but on Linux the runtime sleeps for
// timers in whole milliseconds (epoll_wait's timeout), so a wait ends up
// to about 1 ms after due; [newWaiter] prefers a precise waiter where one
// exists.
type timerWaiter struct{ t *time.Timer }

func (w *timerWaiter) wait(due time.Time) {
	d := time.Until(due)
	if d <= 0 {
		return
	}
	if w.t == nil {
		w.t = time.NewTimer(d)
	} else {
		w.t.Reset(d)
	}
	<-w.t.C
}

func (w *timerWaiter) close() {
	if w.t != nil {
		w.t.Stop()
	}
}

// newWaiter returns a precise waiter if the platform has one (see
// newPreciseWaiter) and coarse is false, else a [timerWaiter].
func newWaiter(coarse bool) waiter {
	if !coarse {
		if w, err := newPreciseWaiter(); err == nil {
			return w
		}
	}
	return &timerWaiter{}
}
