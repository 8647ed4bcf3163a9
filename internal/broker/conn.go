package broker

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/longhaul-kafka/longhaul/protocol"
)

// conn is one client connection to a node. Its reader goroutine reads and
// handles requests and queues their responses; its writer goroutine writes
// them in order, each at its due time. See the package doc.
type conn struct {
	n  *node
	nc net.Conn

	closeOnce sync.Once
	done      chan struct{} // closed by close

	qmu sync.Mutex
	// qmu guards the following.
	q     []*pending
	qdead bool // the writer has exited; push releases at once
	qsig  chan struct{}

	muteMu sync.Mutex
	// muteMu guards the following: the connection is muted for a throttle
	// (SetProduceQuota) from mutedFrom, when the answer that earned it was
	// written, to mutedUntil.
	mutedFrom, mutedUntil time.Time

	// SASL state ([Config.SASL]), touched only by the reader goroutine.
	saslMech   string    // chosen by SaslHandshake, "" before
	authed     bool      // SaslAuthenticate succeeded
	sessionEnd time.Time // zero: no session lifetime
	// keepFrame is set by a handler that stored part of the request
	// frame (Produce appends batches in place): the reader must read the
	// next request into a fresh buffer. Touched only by the reader
	// goroutine.
	keepFrame bool
}

// pending is a handled request waiting for its response to be written.
type pending struct {
	corr     int32
	resp     kmsg.Response // nil: nothing to write (acks=0)
	due      time.Time     // read time + RTT (+ request pacing)
	drop     bool          // DropProduceResponses: never write it
	close    bool          // CloseAfterRequests: close instead of writing
	mute     time.Duration // SetProduceQuota: read nothing more for this long once written
	inflight []inflightRef // released once written, dropped or abandoned
}

// inflightRef is one idempotent batch counted in its partition's in-flight
// statistics.
type inflightRef struct {
	p   *partition
	pid int64
	n   *node // the process that read it
	// w is the window its partition response announces (v14 at a node
	// not in old mode), 0 for none: the process has shown it once the
	// response is written (announced).
	w int32
	b procBatch // the batch, for its process's count (process.addInflight); p nil: not counted (checkWindow)
}

func newConn(n *node, nc net.Conn) *conn {
	return &conn{n: n, nc: nc, done: make(chan struct{}), qsig: make(chan struct{}, 1)}
}

// close closes the connection; the reader and writer then exit. Safe to
// call more than once and from any goroutine.
func (cc *conn) close() {
	cc.closeOnce.Do(func() {
		close(cc.done)
		cc.nc.Close()
	})
}

// push queues p for the writer, or releases it if the writer is gone.
func (cc *conn) push(p *pending) {
	cc.qmu.Lock()
	if cc.qdead {
		cc.qmu.Unlock()
		cc.n.c.release(p)
		return
	}
	cc.q = append(cc.q, p)
	cc.qmu.Unlock()
	select {
	case cc.qsig <- struct{}{}:
	default:
	}
}

// pop returns the next queued response, waiting for one; nil once the
// connection is closed.
func (cc *conn) pop() *pending {
	for {
		cc.qmu.Lock()
		if len(cc.q) > 0 {
			p := cc.q[0]
			cc.q[0] = nil
			cc.q = cc.q[1:]
			cc.qmu.Unlock()
			return p
		}
		cc.qmu.Unlock()
		select {
		case <-cc.qsig:
		case <-cc.done:
			return nil
		}
	}
}

// release ends the in-flight count of p's batches. Takes c.mu.
func (c *Cluster) release(p *pending) {
	if len(p.inflight) == 0 {
		return
	}
	c.mu.Lock()
	for _, r := range p.inflight {
		r.p.addInflight(r.pid, -1)
		if r.b.p != nil {
			r.n.proc.addInflight(r.b, -1)
		}
	}
	c.mu.Unlock()
	p.inflight = nil
}

// sleepUntil waits until t, returning false if the connection or the
// cluster closed first.
func (cc *conn) sleepUntil(t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		select {
		case <-cc.done:
			return false
		default:
			return true
		}
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return true
	case <-cc.done:
		return false
	case <-cc.n.c.die:
		return false
	}
}

// waitStall waits out a Stall of the node, if any.
func (cc *conn) waitStall() bool {
	for {
		cc.n.c.mu.Lock()
		until := cc.n.stallUntil
		cc.n.c.mu.Unlock()
		if !time.Now().Before(until) {
			return true
		}
		if !cc.sleepUntil(until) {
			return false
		}
	}
}

// writeLoop writes queued responses in request order. On exit (connection
// closed or a write failed) it closes the connection and releases every
// response still queued.
func (cc *conn) writeLoop() {
	c := cc.n.c
	defer c.wg.Done()
	defer func() {
		cc.close()
		cc.qmu.Lock()
		cc.qdead = true
		q := cc.q
		cc.q = nil
		cc.qmu.Unlock()
		for _, p := range q {
			c.release(p)
		}
		c.mu.Lock()
		delete(cc.n.conns, cc)
		c.mu.Unlock()
	}()
	var buf []byte
	for {
		p := cc.pop()
		if p == nil {
			return
		}
		if !cc.sleepUntil(p.due) || !cc.waitStall() {
			c.release(p)
			return
		}
		switch {
		case p.close:
			c.release(p)
			return
		case p.drop || p.resp == nil:
			c.release(p)
			continue
		}
		buf = protocol.AppendResponse(buf[:0], p.corr, p.resp)
		if at := cc.n.paceOut(len(buf)); !cc.sleepUntil(at) {
			c.release(p)
			return
		}
		// Release before writing: once the bytes are out the client may
		// send its next request, which must not be counted alongside
		// this one (the client no longer has it in flight). Likewise the
		// windows it announces count from now.
		c.announced(p)
		c.release(p)
		if p.mute > 0 {
			// Muted before the bytes go out: the client may answer at
			// once, and its next request must find the mute.
			cc.muteMu.Lock()
			now := time.Now()
			if until := now.Add(p.mute); until.After(cc.mutedUntil) {
				cc.mutedFrom, cc.mutedUntil = now, until
			}
			cc.muteMu.Unlock()
		}
		if _, err := cc.nc.Write(buf); err != nil {
			return
		}
	}
}

// readLoop reads, decodes and handles requests until the connection closes
// or a request must be answered by closing it.
func (cc *conn) readLoop() {
	c := cc.n.c
	defer c.wg.Done()
	r := bufio.NewReaderSize(cc.nc, 64<<10)
	var frame []byte // reused unless a handler kept it (keepFrame)
	for {
		var err error
		askedAt := time.Now()
		frame, err = protocol.ReadFrame(r, frame, DefaultMaxRequestBytes)
		if err != nil {
			cc.logClose("read", err)
			cc.close()
			return
		}
		readAt := time.Now()
		if muted, ok := cc.waitMute(askedAt, readAt); !ok {
			return
		} else if muted {
			readAt = time.Now() // a muted connection is not read: the request arrives now
		}
		if !cc.waitStall() {
			return
		}
		p, err := cc.handle(frame, readAt)
		if cc.keepFrame {
			cc.keepFrame = false
			if !c.cfg.reuseKeptFrames {
				frame = nil
			}
		}
		if err != nil {
			cc.logClose("request", err)
			// Answer what came before, then close: push a close marker
			// so the writer finishes the queue first.
			cc.push(&pending{due: readAt, close: true})
			return
		}
		cc.push(p)
		if p.close {
			return
		}
	}
}

// waitMute waits out a mute of the connection (SetProduceQuota) that a
// request read at readAt met, and reports whether it had to wait (false
// for ok if the connection or cluster closed meanwhile). A request that
// arrived while the reader waited for it (readAt after askedAt, so it
// arrived at readAt) after the throttled answer was written was sent by a
// client told to wait: counted for MutedSends.
func (cc *conn) waitMute(askedAt, readAt time.Time) (muted, ok bool) {
	cc.muteMu.Lock()
	from, until := cc.mutedFrom, cc.mutedUntil
	cc.muteMu.Unlock()
	if !readAt.Before(until) {
		return false, true
	}
	if readAt.After(askedAt) && readAt.After(from) {
		c := cc.n.c
		c.mu.Lock()
		c.mutedSends++
		if len(c.mutedFirst) < maxOverWindow {
			c.mutedFirst = append(c.mutedFirst, fmt.Sprintf("node %d: a request %v after a throttled answer, %v before the throttle ended",
				cc.n.id, readAt.Sub(from), until.Sub(readAt)))
		}
		c.mu.Unlock()
	}
	for {
		if !cc.sleepUntil(until) {
			return true, false
		}
		cc.muteMu.Lock()
		until = cc.mutedUntil
		cc.muteMu.Unlock()
		if !time.Now().Before(until) {
			return true, true
		}
	}
}

func (cc *conn) logClose(what string, err error) {
	if errors.Is(err, net.ErrClosed) {
		return
	}
	cc.n.c.logger.Debug("broker: closing connection", "node", cc.n.id, "remote", cc.nc.RemoteAddr().String(), "on", what, "err", err)
}

// paceOut reserves the node's response-direction bandwidth for n bytes and
// returns when the write may start. Without a cap it returns now.
func (n *node) paceOut(size int) time.Time {
	n.c.mu.Lock()
	defer n.c.mu.Unlock()
	now := time.Now()
	if n.bw <= 0 {
		return now
	}
	start := later(now, n.outNext)
	n.outNext = start.Add(bwDuration(size, n.bw))
	return n.outNext
}

// paceIn reserves the node's request-direction bandwidth for a request of
// size bytes read at readAt and returns when the request has "arrived".
// c.mu must be held.
func (n *node) paceIn(size int, readAt time.Time) time.Time {
	if n.bw <= 0 {
		return readAt
	}
	start := later(readAt, n.inNext)
	n.inNext = start.Add(bwDuration(size, n.bw))
	return n.inNext
}

func bwDuration(size int, bw int64) time.Duration {
	return time.Duration(float64(size) / float64(bw) * float64(time.Second))
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
