package linkproxy

import (
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// earlyWaits waits for each of dues in turn (offsets from now, some
// already past) and returns how many waits ended before their due time.
func earlyWaits(w waiter, dues []time.Duration) int {
	early := 0
	for _, d := range dues {
		due := time.Now().Add(d)
		w.wait(due)
		if time.Now().Before(due) {
			early++
		}
	}
	return early
}

// waitDues is a mix of past, tiny, sub-millisecond and multi-millisecond
// offsets: the cases where a timer rounding to milliseconds, or a timerfd
// armed relative to a stale clock reading, would end early.
func waitDues() []time.Duration {
	rng := rand.New(rand.NewPCG(7, 19))
	dues := []time.Duration{-time.Millisecond, 0, 1, time.Microsecond}
	for range 200 {
		dues = append(dues, time.Duration(rng.Int64N(int64(3*time.Millisecond))))
	}
	return dues
}

// earlyWaiter returns 500 µs before due: the negative control.
type earlyWaiter struct{ timerWaiter }

func (w *earlyWaiter) wait(due time.Time) { w.timerWaiter.wait(due.Add(-500 * time.Microsecond)) }

// TestWaitersNeverEndEarly checks the waiter contract the delay model rests
// on (no chunk before its release time) for both waiters, and that the
// check catches a waiter that ends early.
func TestWaitersNeverEndEarly(t *testing.T) {
	for _, coarse := range []bool{false, true} {
		w := newWaiter(coarse)
		assert.Zero(t, earlyWaits(w, waitDues()), "coarse=%v: waits ended before due", coarse)
		w.close()
	}
	ew := &earlyWaiter{}
	defer ew.close()
	assert.Positive(t, earlyWaits(ew, waitDues()), "negative control: a waiter ending 500 µs early went unnoticed")
}

// TestNewWaiterKinds checks which waiter SetPreciseTimers' two settings
// give: a timerfd on Linux unless coarse, else the runtime timer.
func TestNewWaiterKinds(t *testing.T) {
	precise := newWaiter(false)
	defer precise.close()
	assert.IsType(t, preciseKind(), precise)
	coarse := newWaiter(true)
	defer coarse.close()
	assert.IsType(t, &timerWaiter{}, coarse)
}

// TestSetPreciseTimersPerDirection checks through a proxy that each
// direction of a delayed connection makes one waiter when its first chunk
// waits, of the kind set then (precise by default), and keeps it when the
// setting changes.
func TestSetPreciseTimersPerDirection(t *testing.T) {
	target, _ := echoServer(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var mu sync.Mutex
	var made []waiter
	p := &Proxy{ln: ln, target: target, done: make(chan struct{}), conns: make(map[*link]struct{})}
	p.madeWaiter = func(w waiter) { mu.Lock(); made = append(made, w); mu.Unlock() }
	p.wg.Add(1)
	go p.acceptLoop()
	t.Cleanup(func() { p.Close() })
	// Long enough that a chunk always has to wait, even on a loaded
	// machine; a chunk picked up after its release makes no waiter.
	p.SetDelay(50 * time.Millisecond)

	roundTripOne(t, dial(t, p.Addr())) // the default
	p.SetPreciseTimers(false)
	coarseConn := dial(t, p.Addr())
	roundTripOne(t, coarseConn)
	p.SetPreciseTimers(true)
	roundTripOne(t, coarseConn) // keeps its waiters
	roundTripOne(t, dial(t, p.Addr()))

	mu.Lock()
	defer mu.Unlock()
	require.Len(t, made, 6, "one waiter per direction and connection")
	precise := preciseKind()
	for i, w := range made {
		if i == 2 || i == 3 {
			assert.IsType(t, &timerWaiter{}, w, "waiter %d", i)
		} else {
			assert.IsType(t, precise, w, "waiter %d", i)
		}
	}
}

// TestPumpReleasesAtReadTimePlusDelay runs one pump over in-memory pipes on
// virtual time: chunks read at irregular instants, some closer together
// than the delay, are each written exactly delay after they were read, in
// order; none is late, so Stats.Late stays 0. Then a destination that
// stops reading holds the writer, and Late is exactly the time the queued
// chunks waited past their release.
func TestPumpReleasesAtReadTimePlusDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const delay = 25 * time.Millisecond
		p := &Proxy{done: make(chan struct{}), conns: make(map[*link]struct{})}
		p.SetDelay(delay)
		p.SetPreciseTimers(false) // the runtime timer follows the virtual clock
		srcIn, src := net.Pipe()
		dst, dstOut := net.Pipe()
		l := newLink(p, src, dst)
		var counted atomic.Int64
		pumped := make(chan struct{})
		go func() { defer close(pumped); l.pump(src, dst, &counted) }()

		gaps := []time.Duration{0, time.Millisecond, 300 * time.Microsecond, 40 * time.Millisecond, 1, 7 * time.Millisecond, 24 * time.Millisecond}
		type arrival struct {
			b  byte
			at time.Time
		}
		arrivals := make(chan arrival, len(gaps)+2)
		go func() {
			buf := make([]byte, 16)
			for {
				n, err := dstOut.Read(buf)
				for _, b := range buf[:n] {
					arrivals <- arrival{b, time.Now()}
				}
				if err != nil {
					close(arrivals)
					return
				}
			}
		}()
		sent := make([]time.Time, len(gaps))
		for i, g := range gaps {
			time.Sleep(g)
			sent[i] = time.Now()
			_, err := srcIn.Write([]byte{byte(i)})
			require.NoError(t, err)
		}
		for i := range gaps {
			a := <-arrivals
			require.Equal(t, byte(i), a.b, "order")
			assert.Equal(t, delay, a.at.Sub(sent[i]), "chunk %d", i)
		}
		synctest.Wait() // the pump counts a chunk's bytes after its write returns
		st := p.Stats()
		assert.Equal(t, int64(len(gaps)), st.Chunks)
		assert.Zero(t, st.Late)
		assert.Zero(t, st.InWrite, "the destination reads at once")
		assert.Equal(t, int64(len(gaps)), counted.Load())
		srcIn.Close()
		<-pumped
		dstOut.Close()
		for range arrivals {
		}
	})
}

// TestLateIsTimePastRelease pins Stats.Late and Stats.InWrite on virtual
// time: a destination that reads nothing for hold after the first chunk's
// release keeps the writer blocked on that chunk for hold (InWrite), so
// each chunk queued behind it starts its write hold - its own offset after
// its release (Late).
func TestLateIsTimePastRelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const delay, hold = 10 * time.Millisecond, 30 * time.Millisecond
		p := &Proxy{done: make(chan struct{}), conns: make(map[*link]struct{})}
		p.SetDelay(delay)
		p.SetPreciseTimers(false)
		srcIn, src := net.Pipe()
		dst, dstOut := net.Pipe()
		l := newLink(p, src, dst)
		pumped := make(chan struct{})
		go func() { defer close(pumped); l.pump(src, dst, new(atomic.Int64)) }()
		offsets := []time.Duration{0, 2 * time.Millisecond, 5 * time.Millisecond}
		start := time.Now()
		for i, off := range offsets {
			time.Sleep(time.Until(start.Add(off)))
			_, err := srcIn.Write([]byte{byte(i)})
			require.NoError(t, err)
		}
		time.Sleep(time.Until(start.Add(delay + hold)))
		got := make([]byte, len(offsets))
		_, err := io.ReadFull(dstOut, got)
		require.NoError(t, err)
		synctest.Wait()
		// Chunk 0 was on time; chunk i waited until the read at
		// delay+hold, its release being delay+offsets[i].
		var want time.Duration
		for _, off := range offsets[1:] {
			want += hold - off
		}
		assert.Equal(t, want, p.Stats().Late)
		assert.Equal(t, hold, p.Stats().InWrite, "chunk 0's write waited for the read; the others' did not")
		srcIn.Close()
		<-pumped
		dstOut.Close()
	})
}
