package producer

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/longhaul-kafka/longhaul/protocol"
)

func (s *sender) dialConfig() protocol.DialConfig {
	return protocol.DialConfig{
		ClientID:      s.cfg.clientID,
		TLS:           s.cfg.tls,
		SASL:          s.cfg.sasl,
		Dial:          s.cfg.dial,
		OnRequestDone: s.cfg.hooks.requestObserver(s),
	}
}

// insertByID inserts n into nodes, kept in id order. The sender loops
// over nodes in this order, not the map's, where the order changes what
// is sent (which node a pass unblocks or dials first, which broker gets
// control requests), so a randomized test's seed replays. Nodes are few
// and made once each.
func insertByID(nodes []*nodeState, n *nodeState) []*nodeState {
	i, _ := slices.BinarySearchFunc(nodes, n.id, func(x *nodeState, id int32) int { return cmp.Compare(x.id, id) })
	return slices.Insert(nodes, i, n)
}

// node returns the sender's state for broker id, creating it.
func (s *sender) node(id int32) *nodeState {
	n := s.nodes[id]
	if n == nil {
		n = &nodeState{id: id, admission: s.p.limiter.Node(id)}
		s.nodes[id] = n
		s.byID = insertByID(s.byID, n)
		s.p.mu.Lock()
		s.p.nodes[id] = n
		s.p.mu.Unlock()
	}
	return n
}

// dial starts connecting to n in the background unless it already is or is
// backing off; it returns when to look again.
func (s *sender) dial(n *nodeState, now time.Time) time.Time {
	if n.dialing || n.draining != nil {
		// A connection being renewed is drained first: a new one now
		// could carry a partition's next batch before its earlier ones
		// were answered on the old one, out of order.
		return time.Time{}
	}
	if now.Before(n.backoffUntil) {
		return n.backoffUntil
	}
	n.dialing = true
	addr := n.addr
	renewal := n.renewed && !s.cfg.regress.on(renewalResets)
	cfg := s.dialConfig()
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		ctx, cancel := context.WithTimeout(s.ctx, s.cfg.requestTimeout)
		c, err := protocol.Dial(ctx, addr, cfg)
		cancel()
		if err == nil {
			if err = protocol.RequireIdempotentProduce(c); err != nil {
				c.Close()
			}
		}
		s.p.post(func() { s.dialed(n, addr, c, err, renewal) })
	}()
	return time.Time{}
}

// dialed takes the outcome of dialing n at addr. renewal says the dial
// started in the pass that closed n's connection drained for its SASL
// renewal (checkConn): the new connection continues that one.
//
// A new connection otherwise resets the windows and arms the first-batch
// gate of every partition n leads (Limiter.NewConnection): a lost
// connection may mean a restarted broker. A renewal is no loss: the old
// connection answered everything sent on it, we closed it only because
// KIP-368 makes a session end (the Java client re-authenticates on the
// same connection), and the new one is dialed at once, to the same
// address. Resetting there starves partitions: when a broker's round trip
// is about the session's last 15 %, the gated batch's ack arrives only once
// its connection drains, so every connection would carry one batch, and a
// burst would run into delivery.timeout.ms. A dial started later (an idle
// connection renewed, data arriving after) is a new connection, as is one
// after a failed dial.
func (s *sender) dialed(n *nodeState, addr string, c *protocol.Conn, err error, renewal bool) {
	n.dialing = false
	if s.stopping {
		if c != nil {
			c.Close()
		}
		return
	}
	if n.addr != addr {
		// Metadata moved the broker while we dialed: whatever reached
		// the old address is not it. The next pass dials the new one.
		if c != nil {
			c.Close()
		}
		s.p.wakeSender()
		return
	}
	if err != nil {
		n.failures++
		n.backoffUntil = time.Now().Add(s.backoff(n.failures))
		n.lastErr = err
		s.p.log.Warn("connecting to broker failed", "node", n.id, "addr", n.addr, "err", err)
		s.cfg.hooks.connected(n, err)
		if !errors.Is(err, protocol.ErrIdempotenceUnsupported) {
			s.wantMetadata() // the broker may have moved
		}
		return
	}
	n.failures = 0
	n.lastErr = nil
	n.conn = c
	n.throttledUntil = time.Time{} // a throttle mutes the connection it was answered on
	// The handshake's round trip is the fastest answer this connection
	// has seen so far: a broker already queueing requests from the
	// start shows as such (holdLingered).
	n.rtMin, n.rtLast = c.HandshakeRTT(), 0
	n.connected.Store(true)
	if s.p.tel != nil && protocol.HasTelemetry(c) {
		s.p.tel.offered(n.addr) // a broker that takes client metrics
	}
	if !renewal {
		// A new connection may reach a broker that lost our state: every
		// partition it leads starts again at 5 with the first-batch gate.
		s.p.limiter.NewConnection(n.id)
	}
	// Kafka 0.11 (Produce v3) retains only the last batch per producer:
	// one batch in flight per partition there. Produce v4 (Kafka 1.0) and
	// later retain 5.
	windowCap := 0
	if v, ok := c.Version(0); ok && v < 4 && !s.cfg.regress.on(v3Uncapped) {
		windowCap = 1
	}
	s.p.limiter.SetNodeWindowCap(n.id, windowCap)
	s.unblock(n)
	s.rescan = true // windows of every partition n leads were reset
	s.cfg.hooks.connected(n, nil)
}

// connFailed drops n's connection after an error on c. A request timeout
// closes the connection too: a late response must never be matched.
func (s *sender) connFailed(n *nodeState, c *protocol.Conn, err error) {
	c.Close()
	msg := "broker connection lost; retrying its batches"
	switch c {
	case n.draining:
		n.draining = nil
		msg = "broker connection lost while renewing its SASL session; retrying its batches"
	case n.conn:
		n.conn = nil
	default:
		return // an older connection, already replaced
	}
	n.connected.Store(false)
	n.lastErr = err
	s.p.log.Info(msg, "node", n.id, "err", err)
	s.cfg.hooks.disconnected(n, err)
}

// checkConn looks at n's connections once per send pass, before any
// candidate is gathered for n, and returns when it wants to look again.
//
// A connection the broker closed (connections.max.idle.ms, a restart) is
// dropped, so the next batch dials at once rather than fail a write and
// back off.
//
// KIP-368: once a connection's SASL session is due for renewal
// ([protocol.Conn.RenewAt], 85-95 % of the lifetime the broker announced)
// no new request goes on it: it becomes n.draining and n.conn is nil, so
// n's partitions gather no candidates and dial waits. When the last
// request on it has been answered the connection is closed, reported with
// [ErrSessionRenewal], and the same pass dials a new one, which
// authenticates a new session. No batch is in flight when it closes, so
// none is cut; the broker would otherwise close the connection on the
// first request after the session ended, after reading but without
// handling it (retried as maybe written). Draining lasts about one round
// trip (a request timeout at most, which closes the connection anyway),
// well within the 5-15 % of the lifetime left.
func (s *sender) checkConn(n *nodeState, now time.Time) (next time.Time) {
	if c := n.conn; c != nil {
		done := c.Done()
		if s.cfg.regress.on(noCloseCheck) {
			done = nil
		}
		select {
		case <-done:
			s.connFailed(n, c, c.Err())
		default:
			renew := c.RenewAt()
			switch {
			case renew.IsZero() || s.cfg.regress.on(noSessionRenewal):
			case now.Before(renew):
				next = renew
			default:
				s.p.log.Debug("renewing the SASL session: draining the connection", "node", n.id, "in_flight", c.InFlight())
				n.conn = nil
				n.draining = c
			}
		}
	}
	// InFlight counts requests whose completion has not run; the sender
	// puts nothing new on a draining connection, so 0 stays 0. Completions
	// already posted are applied later as usual: closing does not change
	// their outcome.
	if c := n.draining; c != nil {
		select {
		case <-c.Done():
			// Broken while draining: its requests fail and are retried;
			// report the real cause, not a renewal.
			s.connFailed(n, c, c.Err())
			return next
		default:
		}
	}
	if c := n.draining; c != nil && c.InFlight() == 0 {
		n.draining = nil
		n.renewed = true // a dial in this pass continues it (dialed)
		n.connected.Store(false)
		c.Close()
		s.p.log.Debug("SASL session renewal: connection drained and closed", "node", n.id)
		s.cfg.hooks.disconnected(n, ErrSessionRenewal)
	}
	return next
}

// controlRenewal drops the control connection when its SASL session is
// due for renewal and no control request uses it, so the next Metadata or
// InitProducerId dials a fresh one rather than have the broker close it.
func (s *sender) controlRenewal(now time.Time) {
	c := s.control
	if c == nil || s.controlOps > 0 || s.cfg.regress.on(noSessionRenewal) || s.cfg.regress.on(noControlRenewal) {
		return
	}
	if renew := c.RenewAt(); !renew.IsZero() && !now.Before(renew) {
		c.Close()
		s.control = nil
	}
}

// backoff is retry.backoff.ms doubled per failure up to
// retry.backoff.max.ms, with 20% jitter, as the Java client does.
func (s *sender) backoff(failures int) time.Duration {
	d := s.cfg.retryBackoff
	for i := 1; i < failures && d < s.cfg.retryBackoffMax; i++ {
		d *= 2
	}
	d = min(d, s.cfg.retryBackoffMax)
	if d <= 0 {
		return 0
	}
	jitter := time.Duration(s.cfg.rand.send.Int64N(int64(d)/5 + 1))
	return d - d/10 + jitter
}

// fatalDialError reports whether err, from dialing a broker, is a refusal
// that retrying cannot fix until the configuration or the broker changes:
// SASL authentication failed or the mechanism is not enabled, our TLS
// verification of the broker's certificate failed (unknown CA, wrong host
// name, expired), the broker rejected the handshake with a TLS alert (for
// example our client certificate), or the broker does not speak TLS.
func fatalDialError(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, kerr.SaslAuthenticationFailed) || errors.Is(err, kerr.UnsupportedSaslMechanism) ||
		errors.Is(err, kerr.IllegalSaslState) {
		return true
	}
	var (
		verify   *tls.CertificateVerificationError
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
		header   tls.RecordHeaderError
		op       *net.OpError
	)
	switch {
	case errors.As(err, &verify), errors.As(err, &unknown), errors.As(err, &hostname),
		errors.As(err, &invalid), errors.As(err, &header):
		return true
	case errors.As(err, &op) && op.Op == "remote error":
		// crypto/tls reports a TLS alert from the peer this way.
		return true
	}
	return false
}

// fatalCause wraps err in ErrAuthentication if it is fatal, else nil.
func fatalCause(err error) error {
	if !fatalDialError(err) {
		return nil
	}
	return fmt.Errorf("%w: %w", ErrAuthentication, err)
}

// throttled takes note of a throttle time d in sr's answer. From Produce
// v6 on (KIP-219) a broker over a quota answers at once and then reads
// nothing from the connection for d: requests written meanwhile only wait
// in its socket, each behind the previous one's throttle, until they pass
// request.timeout.ms and close the connection with their batches' fate
// unknown. So nothing more is sent on the connection until d has passed
// (sendToNode; windows and the first-batch gate are untouched), and the
// requests already on it get their deadlines moved by the part of d not
// already muted, which the broker spends not reading them. Below v6 the
// broker delays its answer itself instead, so there is nothing to wait out.
func (s *sender) throttled(sr *sentRequest, d time.Duration, now time.Time) {
	n := sr.node
	if d <= 0 || sr.version < 6 || sr.conn != n.conn {
		return // an older connection's mute is not the current one's
	}
	s.stats.throttles.Add(1)
	if s.cfg.regress.on(throttleIgnored) {
		return
	}
	until := now.Add(d)
	if !until.After(n.throttledUntil) {
		return
	}
	ext := until.Sub(later(now, n.throttledUntil))
	n.throttledUntil = until
	s.stats.throttledNanos.Add(int64(ext))
	n.conn.ExtendDeadlines(ext)
}

// throttleEnds returns when n's throttle ends, or, once it has ended, lets
// the partitions held for it send again and returns the zero time.
func (s *sender) throttleEnds(n *nodeState, now time.Time) time.Time {
	if n.throttledUntil.IsZero() {
		return time.Time{}
	}
	if now.Before(n.throttledUntil) {
		return n.throttledUntil
	}
	n.throttledUntil = time.Time{}
	s.unblock(n)
	return time.Time{}
}

// later returns the later of two times.
func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
