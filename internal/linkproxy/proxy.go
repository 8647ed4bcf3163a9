package linkproxy

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// dialTimeout bounds how long an accepted connection waits for the target.
const dialTimeout = 5 * time.Second

// Proxy forwards TCP connections from its listen address to a target
// address, adding a one-way delay per direction and cutting connections on
// request. The zero value is not usable; create one with [New].
// All methods are safe for concurrent use.
type Proxy struct {
	ln     net.Listener
	target string
	// coarse makes pump writers wait on the runtime timer instead of a
	// precise waiter (see [newWaiter]); set by SetPreciseTimers.
	coarse atomic.Bool
	// madeWaiter, if set (tests only, before any connection), is called
	// with every waiter a pump writer makes.
	madeWaiter func(waiter)

	// delay is the current one-way delay in nanoseconds; read by every
	// reader goroutine once per chunk, so a change applies to the next
	// chunk read, never to chunks already queued.
	delay atomic.Int64

	// dropReq and dropResp are DropRequests and DropResponses.
	dropReq, dropResp dropRule

	accepted  atomic.Int64
	droppedRq atomic.Int64
	droppedRs atomic.Int64
	cuts      atomic.Int64
	toTarget  atomic.Int64
	toClient  atomic.Int64
	chunks    atomic.Int64
	late      atomic.Int64 // nanoseconds
	inWrite   atomic.Int64 // nanoseconds
	closeOnce sync.Once
	done      chan struct{}
	wg        sync.WaitGroup

	// mu guards the following.
	mu     sync.Mutex
	conns  map[*link]struct{}
	closed bool
}

// Stats are counters since the proxy started. Bytes are counted when the
// proxy has written them to the other side.
type Stats struct {
	// Accepted is the number of client connections accepted.
	Accepted int64
	// Active is the number of connections currently proxied.
	Active int64
	// Cuts is the number of connections closed by [Proxy.CutAll],
	// [Proxy.CutOne] or [Proxy.CutRandomly].
	Cuts int64
	// BytesToTarget and BytesToClient count forwarded bytes per direction.
	BytesToTarget, BytesToClient int64
	// Chunks counts the chunks written, both directions (a chunk is what
	// one read took, at most [ChunkSize]).
	Chunks int64
	// Late is the time chunks waited past their release time before
	// their write began, summed over chunks: the delay this proxy added
	// beyond the one set (its goroutines scheduled late, a timer firing
	// late, or a destination not reading). Late / Chunks is the mean.
	Late time.Duration
	// InWrite is the time spent in writes to the destination, summed over
	// chunks. A write takes long when the destination's receive buffer
	// is full because it does not read (Kafka, for one, reads a
	// connection's next request only after answering the last), and the
	// chunks queued behind it become late: InWrite tells that part of
	// Late from the proxy's own.
	InWrite time.Duration
	// DroppedRequests and DroppedResponses count the requests and the
	// responses swallowed by [Proxy.DropRequests] and
	// [Proxy.DropResponses]; the connections they cut are not in Cuts.
	DroppedRequests, DroppedResponses int64
}

// New listens on listenAddr (for example "127.0.0.1:0" for a free port)
// and forwards each accepted connection to targetAddr with no delay until
// [Proxy.SetDelay] is called. The target is dialled per accepted connection;
// if that fails the client connection is closed. On error nothing is left
// listening.
func New(listenAddr, targetAddr string) (*Proxy, error) {
	ln, err := net.Listen("tcp", listenAddr)
	if err != nil {
		return nil, fmt.Errorf("linkproxy: listen %s: %w", listenAddr, err)
	}
	return Serve(ln, targetAddr), nil
}

// Serve is [New] with a listener the caller already holds, so that a
// port can be reserved (and advertised elsewhere) before the target is
// known. The proxy owns ln from now on and closes it in [Proxy.Close].
func Serve(ln net.Listener, targetAddr string) *Proxy {
	p := &Proxy{
		ln:     ln,
		target: targetAddr,
		done:   make(chan struct{}),
		conns:  make(map[*link]struct{}),
	}
	p.wg.Add(1)
	go p.acceptLoop()
	return p
}

// Addr returns the address the proxy listens on, as host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Target returns the address connections are forwarded to.
func (p *Proxy) Target() string { return p.target }

// SetDelay sets the one-way delay added in each direction, so the added
// round-trip time is 2*oneWay. It applies to bytes read from now on; bytes
// already queued keep the delay they were read with, and byte order is
// always preserved. It panics if oneWay is negative.
func (p *Proxy) SetDelay(oneWay time.Duration) {
	if oneWay < 0 {
		panic("linkproxy: negative delay")
	}
	p.delay.Store(int64(oneWay))
}

// SetPreciseTimers chooses how a chunk waits for its release time. On
// (the default), on Linux, a timerfd per direction of a connection wakes
// the writer at the due time; elsewhere, and when off, the runtime timer
// does, which on Linux wakes in whole milliseconds (up to about 1 ms late,
// which lengthens the emulated link). Either way no chunk is released
// before its time. The choice applies to each direction of a connection
// when its first chunk has to wait; directions already waiting keep
// theirs. It is there to measure the difference (BenchmarkRelease, the
// bench's --proxy-timer).
func (p *Proxy) SetPreciseTimers(on bool) { p.coarse.Store(!on) }

// Delay returns the current one-way delay.
func (p *Proxy) Delay() time.Duration { return time.Duration(p.delay.Load()) }

// Stats returns a snapshot of the counters.
func (p *Proxy) Stats() Stats {
	p.mu.Lock()
	active := int64(len(p.conns))
	p.mu.Unlock()
	return Stats{
		Accepted:      p.accepted.Load(),
		Active:        active,
		Cuts:          p.cuts.Load(),
		BytesToTarget: p.toTarget.Load(),
		BytesToClient: p.toClient.Load(),
		Chunks:        p.chunks.Load(),
		Late:          time.Duration(p.late.Load()),
		InWrite:       time.Duration(p.inWrite.Load()),

		DroppedRequests:  p.droppedRq.Load(),
		DroppedResponses: p.droppedRs.Load(),
	}
}

// CutAll closes every proxied connection now, on both sides, discarding
// bytes that are still queued. New connections are accepted as before.
// It returns the number of connections cut.
func (p *Proxy) CutAll() int {
	n := p.cutLinks(false)
	p.cuts.Add(int64(n))
	return n
}

// cutLinks cuts every proxied connection and returns how many it cut. The
// links are taken under p.mu and cut after it is released; closing marks
// the proxy closed in the same critical section, so no link accepted
// later can miss the cut.
func (p *Proxy) cutLinks(closing bool) int {
	p.mu.Lock()
	if closing {
		p.closed = true
	}
	links := make([]*link, 0, len(p.conns))
	for l := range p.conns {
		links = append(links, l)
	}
	p.mu.Unlock()
	for _, l := range links {
		l.cut()
	}
	return len(links)
}

// Close stops accepting, closes every proxied connection and waits for all
// goroutines of the proxy to finish. It is idempotent and returns the error
// from closing the listener, if any, the first time.
func (p *Proxy) Close() error {
	var err error
	p.closeOnce.Do(func() {
		close(p.done)
		err = p.ln.Close()
		p.cutLinks(true)
		p.wg.Wait()
	})
	return err
}

func (p *Proxy) acceptLoop() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return // listener closed
		}
		p.accepted.Add(1)
		p.wg.Add(1)
		go p.handle(c)
	}
}

// handle dials the target for client connection c and runs the link until
// both directions finish or the link is cut.
func (p *Proxy) handle(c net.Conn) {
	defer p.wg.Done()
	t, err := net.DialTimeout("tcp", p.target, dialTimeout)
	if err != nil {
		c.Close()
		return
	}
	l := newLink(p, c, t)
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		l.cut()
		return
	}
	p.conns[l] = struct{}{}
	p.mu.Unlock()

	l.run()

	p.mu.Lock()
	delete(p.conns, l)
	p.mu.Unlock()
}
