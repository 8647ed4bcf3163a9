package linkproxy

import (
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

const (
	// ChunkSize is the largest number of bytes one read takes from a
	// connection; one chunk is the unit that gets a release time.
	ChunkSize = 64 << 10
	// MaxQueuedChunks is how many chunks may wait for their release time
	// per direction and connection before the proxy stops reading.
	MaxQueuedChunks = 4096
)

var bufPool = sync.Pool{New: func() any { b := make([]byte, ChunkSize); return &b }}

// chunk is bytes read at one instant that may be written at release.
// A chunk with cut set carries no bytes: at release the link is cut.
type chunk struct {
	buf     *[]byte
	n       int
	release time.Time
	cut     bool
}

// link is one proxied connection: client side c, target side t.
type link struct {
	p       *Proxy
	c, t    net.Conn
	cutOnce sync.Once
	isCut   atomic.Bool
	// requests and responses follow the Kafka frames of each direction.
	requests, responses *framer
}

func newLink(p *Proxy, c, t net.Conn) *link {
	m := &marks{}
	return &link{
		p: p, c: c, t: t,
		requests:  newFramer(false, &p.dropReq, &p.dropResp, m, &p.droppedRq),
		responses: newFramer(true, &p.dropReq, &p.dropResp, m, &p.droppedRs),
	}
}

// cut closes both sides; the pumps see errors and exit.
func (l *link) cut() {
	l.cutOnce.Do(func() {
		l.isCut.Store(true)
		l.c.Close()
		l.t.Close()
	})
}

// run pumps both directions and returns when both are done.
func (l *link) run() {
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); l.pump(l.c, l.t, &l.p.toTarget) }()
	go func() { defer wg.Done(); l.pump(l.t, l.c, &l.p.toClient) }()
	wg.Wait()
	l.cutOnce.Do(func() { l.c.Close(); l.t.Close() })
}

// pump copies src to dst with the proxy's delay. A reader goroutine stamps
// each chunk with read time + delay and queues it; this goroutine writes
// chunks in order once their release time has passed. Because the stamp is
// taken at read time, chunks in flight overlap their delays instead of
// adding them up. The reader follows the Kafka frames of its direction
// (framer) to carry out DropRequests and DropResponses.
//
// On EOF from src the queued bytes are still delivered and dst is
// half-closed, as a real link would. On any other error, or a write error,
// the whole link is closed: a broken connection breaks both sides.
func (l *link) pump(src, dst net.Conn, counter *atomic.Int64) {
	q := make(chan chunk, MaxQueuedChunks)
	readErr := make(chan error, 1)
	f := l.responses
	if src == l.c {
		f = l.requests
	}
	go func() {
		defer close(q)
		var carry [requestHeader]byte
		held := 0
		for {
			bp := bufPool.Get().(*[]byte)
			copy(*bp, carry[:held])
			n, err := src.Read((*bp)[held:])
			n += held
			fwd, cut := n, false
			if n > 0 {
				fwd, held, cut = f.scan((*bp)[:n], err != nil)
				copy(carry[:], (*bp)[n-held:n])
			}
			release := time.Now().Add(time.Duration(l.p.delay.Load()))
			if fwd > 0 {
				q <- chunk{buf: bp, n: fwd, release: release}
			} else {
				bufPool.Put(bp)
			}
			if cut {
				q <- chunk{cut: true, release: release}
				return
			}
			if err != nil {
				readErr <- err
				return
			}
		}
	}()

	// The waiter is made on the first chunk that has to wait, so links
	// without a delay hold no timer (nor, on Linux, a timerfd).
	var w waiter
	defer func() {
		if w != nil {
			w.close()
		}
	}()
	writeFailed := false
	for ch := range q {
		if writeFailed {
			if ch.buf != nil {
				bufPool.Put(ch.buf)
			}
			continue // drain so the reader can exit
		}
		if time.Until(ch.release) > 0 {
			if w == nil {
				w = newWaiter(l.p.coarse.Load())
				if l.p.madeWaiter != nil {
					l.p.madeWaiter(w)
				}
			}
			w.wait(ch.release)
		}
		if ch.cut {
			writeFailed = true
			l.cut()
			continue
		}
		start := time.Now()
		if late := start.Sub(ch.release); late > 0 {
			l.p.late.Add(int64(late))
		}
		l.p.chunks.Add(1)
		_, err := dst.Write((*ch.buf)[:ch.n])
		l.p.inWrite.Add(int64(time.Since(start)))
		bufPool.Put(ch.buf)
		if err != nil {
			writeFailed = true
			l.cut()
			continue
		}
		counter.Add(int64(ch.n))
	}
	if writeFailed {
		return
	}
	if err := <-readErr; isEOF(err) && !l.isCut.Load() {
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			cw.CloseWrite()
			return
		}
	}
	l.cut()
}

func isEOF(err error) bool { return errors.Is(err, io.EOF) }
