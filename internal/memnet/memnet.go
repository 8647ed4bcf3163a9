// Package memnet is an in-memory network for tests: listeners and
// connections that never touch the operating system, so a broker and its
// clients can run inside a testing/synctest bubble on virtual time.
//
// A [Network] hands out listeners ([Network.Listen], the shape of
// net.Listen and of broker.Config.Listen) and dials them
// ([Network.Dial], the shape of net.Dialer.DialContext and of
// producer.Dialer). Each connection is a pair of [Conn] ends joined by two
// unbounded byte queues: a Write never blocks, a Read blocks (on a channel,
// which synctest counts as durably blocked) until data, Close or a
// deadline. Nothing in this package starts a goroutine or reads the real
// clock, so everything created inside a bubble stays inside it.
package memnet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"sync"
	"time"
)

// Network is one in-memory network. The zero value is not usable; call
// [New]. It is safe for concurrent use.
type Network struct {
	mu        sync.Mutex
	listeners map[string]*Listener
	nextPort  int
}

// New returns an empty network.
func New() *Network {
	return &Network{listeners: make(map[string]*Listener), nextPort: 1}
}

// ErrRefused is returned by [Network.Dial] for an address nobody listens
// on, like ECONNREFUSED.
var ErrRefused = errors.New("memnet: connection refused")

// Listen listens on addr ("host:port"); port 0 picks a free port. network
// is ignored. Listening on an address already in use is an error.
func (n *Network) Listen(network, addr string) (net.Listener, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("memnet: listen %q: %w", addr, err)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if port == "0" {
		for {
			port = strconv.Itoa(n.nextPort)
			n.nextPort++
			if n.listeners[net.JoinHostPort(host, port)] == nil {
				break
			}
		}
	}
	addr = net.JoinHostPort(host, port)
	if n.listeners[addr] != nil {
		return nil, fmt.Errorf("memnet: listen %s: address in use", addr)
	}
	l := &Listener{n: n, addr: memAddr(addr), conns: make(chan *Conn, 64), done: make(chan struct{})}
	n.listeners[addr] = l
	return l, nil
}

// Dial connects to a listener of the network. It fails with [ErrRefused]
// if nobody listens on addr, or with ctx's error if ctx is done first.
func (n *Network) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	n.mu.Lock()
	l := n.listeners[addr]
	n.mu.Unlock()
	if l == nil {
		return nil, fmt.Errorf("memnet: dial %s: %w", addr, ErrRefused)
	}
	client, server := Pipe(memAddr("client"), l.addr)
	select {
	case l.conns <- server:
		return client, nil
	case <-l.done:
		return nil, fmt.Errorf("memnet: dial %s: %w", addr, ErrRefused)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Listener is a [net.Listener] of a [Network].
type Listener struct {
	n     *Network
	addr  memAddr
	conns chan *Conn
	once  sync.Once
	done  chan struct{}
}

// Accept waits for the next connection; after Close it returns an error
// wrapping net.ErrClosed.
func (l *Listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, fmt.Errorf("memnet: accept %s: %w", l.addr, net.ErrClosed)
	}
}

// Close stops the listener and frees its address; connections already
// accepted stay open. Dials queued but not yet accepted are closed.
func (l *Listener) Close() error {
	l.once.Do(func() {
		close(l.done)
		l.n.mu.Lock()
		if l.n.listeners[string(l.addr)] == l {
			delete(l.n.listeners, string(l.addr))
		}
		l.n.mu.Unlock()
		for {
			select {
			case c := <-l.conns:
				c.Close()
			default:
				return
			}
		}
	})
	return nil
}

// Addr returns the listener's address.
func (l *Listener) Addr() net.Addr { return l.addr }

type memAddr string

func (a memAddr) Network() string { return "memnet" }
func (a memAddr) String() string  { return string(a) }

// queue is one direction of a connection: bytes written and not yet read.
type queue struct {
	mu     sync.Mutex
	buf    []byte
	closed bool          // the writing end closed: EOF after buf
	signal chan struct{} // closed and replaced when buf grows or closed is set
}

func newQueue() *queue { return &queue{signal: make(chan struct{})} }

func (q *queue) wakeLocked() {
	close(q.signal)
	q.signal = make(chan struct{})
}

// Conn is one end of an in-memory connection.
type Conn struct {
	local, remote memAddr
	in, out       *queue

	mu         sync.Mutex // guards the following
	closed     bool
	done       chan struct{} // closed by Close of this end
	rdDeadline time.Time
	dlChanged  chan struct{} // closed and replaced when the read deadline moves
}

// Pipe returns the two ends of a new connection.
func Pipe(a, b net.Addr) (*Conn, *Conn) {
	q1, q2 := newQueue(), newQueue()
	ca := &Conn{local: memAddr(a.String()), remote: memAddr(b.String()), in: q1, out: q2, done: make(chan struct{}), dlChanged: make(chan struct{})}
	cb := &Conn{local: memAddr(b.String()), remote: memAddr(a.String()), in: q2, out: q1, done: make(chan struct{}), dlChanged: make(chan struct{})}
	return ca, cb
}

// Read reads available bytes, waiting for some; io.EOF once the other end
// closed and everything was read; os.ErrDeadlineExceeded past the read
// deadline; net.ErrClosed after Close.
func (c *Conn) Read(b []byte) (int, error) {
	for {
		c.mu.Lock()
		closed, deadline, dlCh := c.closed, c.rdDeadline, c.dlChanged
		c.mu.Unlock()
		if closed {
			return 0, fmt.Errorf("memnet: read: %w", net.ErrClosed)
		}
		q := c.in
		q.mu.Lock()
		if len(q.buf) > 0 {
			n := copy(b, q.buf)
			q.buf = q.buf[n:]
			if len(q.buf) == 0 {
				q.buf = nil
			}
			q.mu.Unlock()
			return n, nil
		}
		if q.closed {
			q.mu.Unlock()
			return 0, io.EOF
		}
		sig := q.signal
		q.mu.Unlock()
		var timer *time.Timer
		var timeout <-chan time.Time
		if !deadline.IsZero() {
			d := time.Until(deadline)
			if d <= 0 {
				return 0, fmt.Errorf("memnet: read: %w", os.ErrDeadlineExceeded)
			}
			timer = time.NewTimer(d)
			timeout = timer.C
		}
		select {
		case <-sig:
		case <-c.done:
		case <-dlCh:
		case <-timeout:
		}
		if timer != nil {
			timer.Stop()
		}
	}
}

// Write queues b for the other end; it never blocks. It fails with
// net.ErrClosed after Close and with io.ErrClosedPipe once the other end
// closed.
func (c *Conn) Write(b []byte) (int, error) {
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return 0, fmt.Errorf("memnet: write: %w", net.ErrClosed)
	}
	q := c.out
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return 0, fmt.Errorf("memnet: write: %w", io.ErrClosedPipe)
	}
	q.buf = append(q.buf, b...)
	q.wakeLocked()
	return len(b), nil
}

// Close closes this end: its reads and writes fail, the other end reads
// EOF once it has read what was written, and its writes fail.
func (c *Conn) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	close(c.done)
	c.mu.Unlock()
	for _, q := range []*queue{c.in, c.out} {
		q.mu.Lock()
		if !q.closed {
			q.closed = true
			q.wakeLocked()
		}
		q.mu.Unlock()
	}
	return nil
}

// LocalAddr returns this end's address.
func (c *Conn) LocalAddr() net.Addr { return c.local }

// RemoteAddr returns the other end's address.
func (c *Conn) RemoteAddr() net.Addr { return c.remote }

// SetDeadline sets the read deadline; writes never block, so they need
// none.
func (c *Conn) SetDeadline(t time.Time) error { return c.SetReadDeadline(t) }

// SetReadDeadline makes a Read waiting at t, or starting after it, fail
// with os.ErrDeadlineExceeded. The zero time means none.
func (c *Conn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	c.rdDeadline = t
	close(c.dlChanged)
	c.dlChanged = make(chan struct{})
	c.mu.Unlock()
	return nil
}

// SetWriteDeadline is accepted and ignored: writes never block.
func (c *Conn) SetWriteDeadline(t time.Time) error { return nil }
