package protocol

import (
	"bufio"
	"container/heap"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
)

// DialConfig configures [Dial]. The zero value dials plain TCP without
// SASL, with a null client id and [DefaultMaxFrameSize].
type DialConfig struct {
	// ClientID is sent in every request header; "" sends a null client id.
	ClientID string
	// TLS, when non-nil, wraps the connection in TLS. An empty ServerName
	// is filled from the address's host.
	TLS *tls.Config
	// SASL, when non-nil, authenticates after ApiVersions with
	// SaslHandshake v1 + SaslAuthenticate (franz-go's plain, scram, oauth
	// and aws mechanisms work). Re-authentication (KIP-368) is left to
	// the caller: [Conn.RenewAt] says when the session should be renewed,
	// by dialing again, before the broker (connections.max.reauth.ms)
	// closes the connection at [Conn.SessionEnd].
	SASL sasl.Mechanism
	// Dial opens the raw connection; nil uses a net.Dialer. Tests pass
	// net.Pipe ends or proxies.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// MaxVersions optionally caps the version used per API key, for
	// example {0: 13} never to use Produce v14.
	MaxVersions map[int16]int16
	// MaxFrameSize bounds each response frame; 0 means
	// [DefaultMaxFrameSize]. A larger frame kills the connection.
	MaxFrameSize int
	// OnRequestDone, when non-nil, is called once for every request sent
	// with [Conn.Send] or [Conn.Do] (and the functions of this package
	// built on them) when it completes, just before its own completion
	// and on the same goroutine: addr is the connection's, key the
	// request's API key, latency the time since it was sent, err nil
	// when the broker answered (whatever the answer's error codes), else
	// the request's error. The handshake's requests (ApiVersions, SASL),
	// a request the broker's versions refuse before it is sent, and
	// [Conn.Produce] exchanges, whose callers see their completion, are
	// not reported. It must not block.
	OnRequestDone func(addr string, key int16, latency time.Duration, err error)
}

// Conn is a pipelined connection to one broker, made by [Dial]. Many
// requests are written back to back by one writer goroutine and their
// responses matched by correlation id by one reader goroutine; each request
// has its own deadline. It is safe for concurrent use. It never retries and
// never looks at error codes inside responses.
//
// Once broken (I/O error, undecodable frame) or closed it stays dead:
// [Conn.Done] is closed, [Conn.Err] says why, and every request queued or
// outstanding then, or sent later, completes with an error wrapping
// [ErrConnClosed].
type Conn struct {
	addr     string
	onDone   func(addr string, key int16, latency time.Duration, err error) // DialConfig.OnRequestDone
	nc       net.Conn
	br       *bufio.Reader
	clientID *string
	maxFrame int
	versions map[int16]int16 // negotiated; read-only after Dial
	// minVersions holds the broker's lowest version per negotiated key,
	// for requests sent below the negotiated version. Read-only after
	// Dial.
	minVersions map[int16]int16
	// features holds ApiVersions' finalized features (v3+, KIP-584),
	// name to max level, and featuresEpoch their epoch (-1: none
	// reported). Read-only after Dial.
	features      map[string]int16
	featuresEpoch int64
	// The SASL session (KIP-368); zero when it does not expire. Read-only
	// after Dial.
	sessionEnd time.Time
	renewAt    time.Time
	// handshakeRTT is how long the ApiVersions exchange that opened the
	// connection took. Read-only after Dial.
	handshakeRTT time.Duration

	nextID atomic.Int32
	wake   chan struct{} // cap 1: queue became non-empty
	done   chan struct{}
	// wmu is held by the writer while it writes, so Close can wait until
	// no caller bytes are read any more.
	wmu sync.Mutex

	// mu guards the following.
	mu      sync.Mutex
	closed  bool
	err     error
	pend    map[int32]*pending // queued or written, not yet completed
	queue   []*pending         // to be written, in Send order
	spare   []*pending         // the writer's previous queue, reused
	dl      deadlineHeap
	timer   *time.Timer
	armedAt time.Time
	// expired holds the ids of written requests that timed out: their
	// late responses are dropped. A response with any other id we are not
	// waiting for breaks the connection, as in the Java client: the
	// stream no longer pairs answers with requests.
	expired map[int32]struct{}
}

// maxExpired bounds Conn.expired: a connection with that many requests
// timed out and never answered is broken.
const maxExpired = 4096

// pending is one request between Send and its completion. Whoever removes
// it from Conn.pend (under mu) owns calling done: that is what makes every
// completion happen exactly once.
type pending struct {
	id         int32
	key        int16
	version    int16
	frame      *wireFrame // encoded by Send; returned to the pool after write
	deadline   time.Time
	heapIdx    int // index in Conn.dl, -1 when not in it
	written    bool
	noResponse bool // Produce with acks=0: the broker does not answer
	done       func(kmsg.Response, error)
	// A produce exchange ([Conn.Produce]) is decoded into res and
	// completed through produced instead of done.
	res      *ProduceResult
	produced func(error)

	// writing is set (under mu) while the writer may still read the
	// caller's record bytes referenced by frame. A completion decided
	// meanwhile is parked in resp/err and run by the writer once the
	// write returned, so done never runs while we still read the
	// caller's bytes.
	writing bool
	parked  bool
	resp    kmsg.Response
	err     error
}

// finish runs p's completion: resp is nil for a produce exchange, whose
// answer is in p.res.
func (p *pending) finish(resp kmsg.Response, err error) {
	if p.produced != nil {
		p.produced(err)
		return
	}
	p.done(resp, err)
}

// Addr returns the address the connection was dialed to.
func (c *Conn) Addr() string { return c.addr }

// HandshakeRTT returns how long the ApiVersions exchange that opened the
// connection took: the round trip to the broker with the least work a
// request can give it, before any request of ours could queue there.
func (c *Conn) HandshakeRTT() time.Duration { return c.handshakeRTT }

// Version returns the version [Conn.Send] uses for key: the highest both
// the broker and this package support (Produce up to [MaxProduceVersion]),
// capped by [DialConfig.MaxVersions]. ok is false when the broker lacks the
// key or no version is common.
func (c *Conn) Version(key int16) (v int16, ok bool) {
	v, ok = c.versions[key]
	return v, ok
}

// SessionEnd returns when the broker ends the connection's SASL session:
// the SessionLifetimeMs of its SaslAuthenticate v1+ answer (KIP-368),
// counted from just before our last SASL message was sent, so never later
// than the broker's own reckoning. A broker closes the connection when it
// reads a request after that instant (Kafka does not process it). The zero
// time means the session does not expire: no SASL, SaslAuthenticate v0,
// or a broker without connections.max.reauth.ms.
func (c *Conn) SessionEnd() time.Time { return c.sessionEnd }

// RenewAt returns when the connection's SASL session should be renewed:
// at a random 85 to 95 % of its lifetime (as the Java client). The rest,
// at least 5 % of the lifetime, is for the last requests sent to be read
// by the broker before [Conn.SessionEnd]: that holds while the one-way
// delay is under 5 % of the lifetime (a 300 ms round trip needs sessions
// of at least 3 s; Kafka's are usually hours). The zero time means never. A Conn does not renew itself: the caller stops sending
// on it, waits until [Conn.InFlight] is 0 and dials a new one.
func (c *Conn) RenewAt() time.Time { return c.renewAt }

// RequireIdempotentProduce returns an error wrapping
// [ErrIdempotenceUnsupported] unless c negotiated Produce v3 or later.
func RequireIdempotentProduce(c *Conn) error {
	if v, ok := c.Version(0); !ok || v < 3 {
		if !ok {
			v = -1
		}
		return fmt.Errorf("%w: broker %s, negotiated Produce v%d", ErrIdempotenceUnsupported, c.addr, v)
	}
	return nil
}

// Send queues req for writing and returns without waiting for the network.
// It sets req's version to [Conn.Version] of its key and encodes it before
// returning, so req itself is not used after Send returns and may be reused
// (for example sent again on another connection, or its Records set to
// nil).
//
// Every byte of req is copied, a [kmsg.ProduceRequest]'s record sets
// included; [Conn.Produce] writes them from the caller's memory instead.
//
// done is called exactly once,
// never from inside Send, on a goroutine of the connection, with:
//   - the decoded response (nil, nil for a Produce with Acks 0, once it is
//     written);
//   - an error wrapping [ErrUnsupportedVersion] if the broker lacks the key;
//   - a [*ConnError] wrapping [ErrRequestTimeout] if timeout (> 0) passed
//     first; the connection stays open and a late response is discarded;
//   - a [*ConnError] wrapping [ErrConnClosed] if the connection died while
//     the request was queued or outstanding, or was already dead.
//
// [SafeToRetry] tells whether the broker can have seen the request.
// Requests go on the wire in the order their Send calls queue them (for
// one goroutine, call order), which is what sequence-ordered produce
// batches rely on. timeout <= 0 means no deadline. Completions of different requests may run
// concurrently; done must not block for long.
func (c *Conn) Send(req kmsg.Request, timeout time.Duration, done func(kmsg.Response, error)) {
	c.send(req, -1, timeout, done)
}

// send is [Conn.Send] at no more than atMost (< 0: no cap). A cap below
// the broker's lowest version of the key fails like a missing key.
func (c *Conn) send(req kmsg.Request, atMost int16, timeout time.Duration, done func(kmsg.Response, error)) {
	key := req.Key()
	v, ok := c.Version(key)
	if ok && atMost >= 0 && v > atMost {
		v = atMost
		if v < c.minVersions[key] {
			ok = false
		}
	}
	if !ok {
		err := fmt.Errorf("%w: broker %s does not support api key %d (at most v%d asked)", ErrUnsupportedVersion, c.addr, key, atMost)
		go done(nil, err)
		return
	}
	req.SetVersion(v)
	if observe := c.onDone; observe != nil {
		start, inner := time.Now(), done
		done = func(r kmsg.Response, err error) { observe(c.addr, key, time.Since(start), err); inner(r, err) }
	}
	p := &pending{
		id:      c.nextID.Add(1) & 0x7fffffff,
		key:     key,
		version: v,
		heapIdx: -1,
		done:    done,
	}
	if pr, ok := req.(*kmsg.ProduceRequest); ok && pr.Acks == 0 {
		p.noResponse = true
	}
	p.frame = getFrame()
	p.frame.encode(req, p.id, c.clientID)
	c.enqueue(p, timeout)
}

// Produce sends req at [Conn.Version] of Produce, which must be 3 or later
// (idempotent batches), and decodes the broker's answer into res, which
// reset first: res.Partitions[i] answers req's i-th Add
// ([ProducePartitionResult.Answered] false for a partition the response
// left out, and for every partition with Acks 0). It returns without
// waiting for the network. req is encoded before Produce returns and may
// be reset and reused then.
//
// Ownership: the record sets of req's batches are not copied but written
// from the caller's memory (writev; sets under 1 KiB are copied), so they
// must stay unchanged until done has run; they may be read concurrently
// (the same batch sent again on another connection). res belongs to the
// connection until done runs. The connection keeps no reference to
// either after that.
//
// done is called exactly once, never from inside Produce, on a goroutine
// of the connection, with nil once res holds the answer (with Acks 0, once
// the request is written), or with an error as [Conn.Send] describes, res
// then unspecified. Besides those: an error wrapping
// [ErrUnsupportedVersion] when the negotiated Produce version is below 3;
// and when timeout passes while the writer still writes the request's
// record sets (the broker stopped reading), the connection is closed and
// done runs, with an error wrapping [ErrRequestTimeout], once the write
// has returned.
func (c *Conn) Produce(req *ProduceRequest, res *ProduceResult, timeout time.Duration, done func(error)) {
	v, ok := c.Version(0)
	if req.MaxVersion > 0 {
		v = min(v, req.MaxVersion)
	}
	if !ok || v < 3 {
		err := fmt.Errorf("%w: broker %s does not take Produce v3+ (negotiated v%d)", ErrUnsupportedVersion, c.addr, v)
		go done(err)
		return
	}
	res.reset(req, v)
	p := &pending{
		id:         c.nextID.Add(1) & 0x7fffffff,
		key:        0,
		version:    v,
		heapIdx:    -1,
		noResponse: req.Acks == 0,
		res:        res,
		produced:   done,
	}
	p.frame = getFrame()
	p.frame.encodeProduce(req, v, p.id, c.clientID)
	c.enqueue(p, timeout)
}

// enqueue queues p, encoded, for the writer, with timeout (<= 0: none),
// or completes it with the connection's error if it is dead.
func (c *Conn) enqueue(p *pending, timeout time.Duration) {
	if timeout > 0 {
		p.deadline = time.Now().Add(timeout)
	}
	c.mu.Lock()
	if c.closed {
		err := c.err
		c.mu.Unlock()
		putFrame(p.frame)
		go p.finish(nil, &ConnError{Addr: c.addr, Err: err})
		return
	}
	c.pend[p.id] = p
	c.queue = append(c.queue, p)
	if timeout > 0 {
		heap.Push(&c.dl, p)
		c.armLocked()
	}
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default: // the writer is already due to look at the queue
	}
}

// Do sends req like [Conn.Send] and waits for its completion. The request
// deadline is ctx's deadline, if any. If ctx ends first Do returns ctx.Err()
// and the request stays in flight; its eventual outcome is dropped. A
// deadline already passed fails Do with an error wrapping
// [context.DeadlineExceeded] without sending, even while ctx.Err() is still
// nil (a context's timer may fire late on a loaded machine). Do returns a
// response or an error, never neither, except for a Produce with Acks 0,
// which has no response: (nil, nil) once it is written.
func (c *Conn) Do(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	return c.do(ctx, req, -1)
}

// do is [Conn.Do] at no more than atMost (< 0: no cap); see [Conn.send].
func (c *Conn) do(ctx context.Context, req kmsg.Request, atMost int16) (kmsg.Response, error) {
	var timeout time.Duration
	if d, ok := ctx.Deadline(); ok {
		if timeout = time.Until(d); timeout <= 0 {
			// ctx's own timer may not have run yet: ctx.Err() can still
			// be nil, and returning it would report neither a response
			// nor an error.
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			return nil, context.DeadlineExceeded
		}
	}
	type result struct {
		resp kmsg.Response
		err  error
	}
	ch := make(chan result, 1)
	c.send(req, atMost, timeout, func(r kmsg.Response, err error) { ch <- result{r, err} })
	select {
	case r := <-ch:
		return r.resp, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// InFlight returns the number of requests queued or written and not yet
// completed.
func (c *Conn) InFlight() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.pend)
}

// ExtendDeadlines moves the deadline of every request queued or outstanding
// on c d later (d <= 0 changes nothing). A broker that answers with a
// throttle time from Produce v6 on (KIP-219) reads nothing more from the
// connection for that long, so the requests already sent wait that much
// longer through no fault of the broker's or the network's: a caller that
// extends their deadlines by the throttle keeps a request timeout from
// counting the time the connection is muted.
func (c *Conn) ExtendDeadlines(d time.Duration) {
	if d <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.dl {
		p.deadline = p.deadline.Add(d) // the same shift for all: the heap stays ordered
	}
	c.armLocked()
}

// Close closes the connection. Every queued or outstanding request
// completes with a [*ConnError] wrapping [ErrConnClosed]; those completions
// run on other goroutines, so Close may be called from a completion or
// while holding a lock that completions take. When Close returns the
// connection no longer reads any request's record bytes (a write in
// progress has returned), even if some completions have yet to run. The
// reader and writer goroutines exit shortly after. Close is idempotent and
// returns nil.
func (c *Conn) Close() error {
	if list, err := c.kill(fmt.Errorf("%w by Close", ErrConnClosed)); len(list) > 0 {
		go c.failAll(list, err)
	}
	if holdRefsWhileWriting {
		// The socket is closed, so a write in progress returns soon;
		// taking the writer's lock waits for it.
		c.wmu.Lock()
		//lint:ignore SA2001 the empty critical section is the wait
		c.wmu.Unlock()
	}
	return nil
}

// Done returns a channel closed when the connection is dead (closed or
// broken).
func (c *Conn) Done() <-chan struct{} { return c.done }

// Err returns why the connection died (wrapping [ErrConnClosed]), or nil
// while it is alive.
func (c *Conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// fail kills the connection because of cause and completes everything
// outstanding on the calling (connection) goroutine.
func (c *Conn) fail(cause error) {
	list, err := c.kill(cause)
	c.failAll(list, err)
}

// kill marks the connection dead and takes every pending request out of
// the maps, returning those the caller completes; requests the writer is
// still writing are parked for it to complete. Only the first call does
// anything.
func (c *Conn) kill(cause error) ([]*pending, error) {
	if !errors.Is(cause, ErrConnClosed) {
		cause = fmt.Errorf("%w: %w", ErrConnClosed, cause)
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, nil
	}
	c.closed = true
	c.err = cause
	list := make([]*pending, 0, len(c.pend))
	for _, p := range c.pend {
		if !c.parkLocked(p, nil, &ConnError{Addr: c.addr, Written: p.written, Err: cause}) {
			list = append(list, p)
		}
	}
	clear(c.pend)
	c.queue = nil
	c.dl = nil
	c.timer.Stop()
	close(c.done)
	c.mu.Unlock()
	c.nc.Close() // unblocks the reader and a writer stuck in Write
	return list, cause
}

func (c *Conn) failAll(list []*pending, err error) {
	for _, p := range list {
		p.finish(nil, &ConnError{Addr: c.addr, Written: p.written, Err: err})
	}
}

// parkLocked leaves p's completion to the writer if it is still writing p
// (and so may still read the caller's record bytes), reporting whether it
// did. The caller has taken p out of pend.
func (c *Conn) parkLocked(p *pending, resp kmsg.Response, err error) bool {
	if !p.writing {
		return false
	}
	p.parked, p.resp, p.err = true, resp, err
	return true
}

// complete runs p's completion now, or parks it if the writer is still
// writing p. Callers that saw p.writing false under mu after taking p out
// of pend may call p.finish directly.
func (c *Conn) complete(p *pending, resp kmsg.Response, err error) {
	c.mu.Lock()
	parked := c.parkLocked(p, resp, err)
	c.mu.Unlock()
	if !parked {
		p.finish(resp, err)
	}
}

// holdRefsWhileWriting is off only in a negative-control test.
var holdRefsWhileWriting = true

// writeLoop writes queued frames. It takes the whole queue at once and
// writes it with one writev (record sets of produce requests referenced in
// place), so a burst of Sends costs one syscall, and a slow reader on the
// broker side blocks only this goroutine. Connections without writev (TLS,
// pipes) get the segments through a bufio.Writer instead of one Write per
// segment.
func (c *Conn) writeLoop() {
	var bufs net.Buffers
	var batch, parked []*pending
	var bw *bufio.Writer
	var out io.Writer = c.nc
	if _, ok := c.nc.(*net.TCPConn); !ok {
		bw = bufio.NewWriterSize(c.nc, 64<<10)
		out = bw
	}
	for {
		select {
		case <-c.wake:
		case <-c.done:
			return
		}
		c.mu.Lock()
		taken := c.queue
		c.queue = c.spare[:0]
		batch = batch[:0]
		for _, p := range taken {
			// A request may have timed out while queued; its completion
			// already ran and it must not go on the wire.
			if c.pend[p.id] != p {
				putFrame(p.frame)
				p.frame = nil
				continue
			}
			// Marked before writing: once any byte may have left, the
			// broker may have seen the request.
			p.written = true
			// Only frames referencing the caller's bytes need their
			// completion held back while being written.
			p.writing = holdRefsWhileWriting && len(p.frame.refs) > 0
			batch = append(batch, p)
		}
		clear(taken)
		c.spare = taken
		c.mu.Unlock()
		if len(batch) == 0 {
			continue
		}

		bufs = bufs[:0]
		for _, p := range batch {
			bufs = p.frame.appendBuffers(bufs)
		}
		toWrite := bufs // WriteTo consumes its receiver
		var err error
		c.wmu.Lock()
		select {
		case <-c.done:
			// Closed since the queue was taken: Close may have returned
			// already, so the callers' bytes must not be read.
			err = ErrConnClosed
		default:
			if _, err = toWrite.WriteTo(out); err == nil && bw != nil {
				err = bw.Flush()
			}
		}
		c.wmu.Unlock()
		clear(bufs)
		for _, p := range batch {
			putFrame(p.frame)
			p.frame = nil
		}
		// Done with the callers' bytes: completions decided meanwhile
		// run now, and later ones run directly.
		parked = parked[:0]
		c.mu.Lock()
		for _, p := range batch {
			p.writing = false
			if p.parked {
				parked = append(parked, p)
			}
		}
		c.mu.Unlock()
		for i, p := range parked {
			resp, perr := p.resp, p.err
			p.resp, p.err = nil, nil
			parked[i] = nil
			p.finish(resp, perr)
		}
		if err != nil {
			c.fail(fmt.Errorf("write: %w", err))
			return
		}
		c.completeUnanswered(batch)
	}
}

// completeUnanswered completes acks=0 produce requests once written.
func (c *Conn) completeUnanswered(batch []*pending) {
	var done []*pending
	c.mu.Lock()
	for _, p := range batch {
		if p.noResponse && c.pend[p.id] == p {
			c.removeLocked(p)
			done = append(done, p)
		}
	}
	c.mu.Unlock()
	for _, p := range done {
		p.finish(nil, nil)
	}
}

// maxReusedFrame is the largest frame buffer readLoop keeps for the next
// frame.
const maxReusedFrame = 1 << 20

// readLoop reads response frames and completes their requests. A frame's
// buffer is read into again only after a produce exchange was decoded from
// it (its result copies what it keeps); any other frame gets a fresh
// buffer, because kmsg's decoded responses alias it (Fetch records).
func (c *Conn) readLoop() {
	var reuse []byte
	for {
		frame, err := ReadFrame(c.br, reuse, c.maxFrame)
		reuse = nil
		if err != nil {
			c.fail(fmt.Errorf("read: %w", err))
			return
		}
		id, err := ResponseCorrelationID(frame)
		if err != nil {
			c.fail(err)
			return
		}
		c.mu.Lock()
		p := c.pend[id]
		if p != nil && !p.written {
			c.mu.Unlock()
			c.fail(fmt.Errorf("%w: response for correlation id %d before its request was written", ErrMalformedResponse, id))
			return
		}
		writing := false
		if p != nil {
			c.removeLocked(p)
			// A broker may answer before our writev returned.
			writing = p.writing
		}
		_, late := c.expired[id]
		delete(c.expired, id)
		c.mu.Unlock()
		if p == nil && late {
			continue // timed out earlier: the late response is dropped
		}
		if p == nil {
			c.fail(fmt.Errorf("%w: response for correlation id %d, which no request is waiting for", ErrMalformedResponse, id))
			return
		}
		var resp kmsg.Response
		if p.res != nil {
			err = decodeProduceFrame(frame, p.version, id, p.res)
			if cap(frame) <= maxReusedFrame {
				reuse = frame[:0]
			}
		} else {
			resp, err = parseResponseAt(frame, p.key, p.version, id)
		}
		if err != nil {
			err = fmt.Errorf("%w: %w", ErrConnClosed, err)
			c.complete(p, nil, &ConnError{Addr: c.addr, Written: true, Err: err})
			c.fail(err)
			return
		}
		if writing {
			c.complete(p, resp, nil)
		} else {
			p.finish(resp, nil)
		}
	}
}

// removeLocked removes p from pend and the deadline heap.
func (c *Conn) removeLocked(p *pending) {
	delete(c.pend, p.id)
	if p.heapIdx >= 0 {
		heap.Remove(&c.dl, p.heapIdx)
		c.armLocked()
	}
}

// armLocked points the timer at the earliest deadline. One timer serves all
// requests; deadlines may expire in any order relative to Send order.
func (c *Conn) armLocked() {
	if len(c.dl) == 0 {
		c.timer.Stop()
		c.armedAt = time.Time{}
		return
	}
	next := c.dl[0].deadline
	if next.Equal(c.armedAt) {
		return
	}
	c.armedAt = next
	c.timer.Reset(time.Until(next))
}

// expire runs on the timer's goroutine and times out every request whose
// deadline has passed.
func (c *Conn) expire() {
	var list []*pending
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	now := time.Now()
	stuck, tooMany := false, false
	for len(c.dl) > 0 && !c.dl[0].deadline.After(now) {
		p := heap.Pop(&c.dl).(*pending)
		delete(c.pend, p.id)
		if p.written && !p.noResponse {
			if c.expired == nil {
				c.expired = make(map[int32]struct{})
			}
			c.expired[p.id] = struct{}{}
			tooMany = tooMany || len(c.expired) > maxExpired
		}
		if c.parkLocked(p, nil, &ConnError{Addr: c.addr, Written: true, Err: ErrRequestTimeout}) {
			stuck = true
		} else {
			list = append(list, p)
		}
	}
	c.armedAt = time.Time{}
	c.armLocked()
	c.mu.Unlock()
	for _, p := range list {
		p.finish(nil, &ConnError{Addr: c.addr, Written: p.written, Err: ErrRequestTimeout})
	}
	if stuck {
		// The writer is still writing a produce request past its
		// deadline: the broker stopped reading. Its completion must wait
		// until we no longer read the caller's bytes, and only closing
		// the socket guarantees the write returns.
		c.fail(fmt.Errorf("%w: a produce request was still being written at its deadline", ErrRequestTimeout))
	}
	if tooMany {
		c.fail(fmt.Errorf("%w: %d requests timed out without an answer", ErrRequestTimeout, maxExpired))
	}
}

// deadlineHeap is a min-heap of pending requests by deadline.
type deadlineHeap []*pending

func (h deadlineHeap) Len() int           { return len(h) }
func (h deadlineHeap) Less(i, j int) bool { return h[i].deadline.Before(h[j].deadline) }
func (h deadlineHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].heapIdx = i
	h[j].heapIdx = j
}
func (h *deadlineHeap) Push(x any) {
	p := x.(*pending)
	p.heapIdx = len(*h)
	*h = append(*h, p)
}
func (h *deadlineHeap) Pop() any {
	old := *h
	p := old[len(old)-1]
	old[len(old)-1] = nil
	p.heapIdx = -1
	*h = old[:len(old)-1]
	return p
}
