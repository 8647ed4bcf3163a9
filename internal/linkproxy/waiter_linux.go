package linkproxy

import (
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// fdWaiter waits on a Linux timerfd read through the runtime's network
// poller. The kernel fires the timerfd at its nanosecond due time and the
// readiness event wakes the poller at once, where a runtime timer would
// wait for epoll_wait's whole-millisecond timeout and release chunks up to
// a millisecond late, which the client sees as a longer round trip.
type fdWaiter struct {
	fd  int
	f   *os.File // the same fd, registered with the poller (non-blocking)
	buf [8]byte  // the expiration count a read returns
	// fallback takes over if the timerfd ever fails, so a wait is never
	// cut short by an error.
	fallback timerWaiter
	failed   bool
}

// newPreciseWaiter returns an [fdWaiter].
func newPreciseWaiter() (waiter, error) {
	fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		return nil, err
	}
	// A non-blocking fd given to os.NewFile is added to the poller, so
	// Read parks the goroutine instead of blocking a thread.
	return &fdWaiter{fd: fd, f: os.NewFile(uintptr(fd), "linkproxy-timerfd")}, nil
}

func (w *fdWaiter) wait(due time.Time) {
	for !w.failed {
		// Go's monotonic clock is CLOCK_MONOTONIC, the timerfd's clock;
		// the loop re-checks after each expiry all the same, so the
		// wait never ends early.
		d := time.Until(due)
		if d <= 0 {
			return
		}
		spec := unix.ItimerSpec{Value: unix.NsecToTimespec(int64(d))}
		if err := unix.TimerfdSettime(w.fd, 0, &spec, nil); err != nil {
			w.failed = true
			break
		}
		if _, err := w.f.Read(w.buf[:]); err != nil {
			w.failed = true
			break
		}
	}
	w.fallback.wait(due)
}

func (w *fdWaiter) close() {
	w.f.Close()
	w.fallback.close()
}
