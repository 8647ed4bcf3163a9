package producer

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/longhaul-kafka/longhaul/protocol"
)

func (s *sender) dialConfig() protocol.DialConfig {
	return protocol.DialConfig{
		ClientID: s.cfg.clientID,
		TLS:      s.cfg.tls,
		SASL:     s.cfg.sasl,
		Dial:     s.cfg.dial,
	}
}

// node returns the sender's state for broker id, creating it.
func (s *sender) node(id int32) *nodeState {
	n := s.nodes[id]
	if n == nil {
		n = &nodeState{id: id, lim: s.p.lim.Node(id)}
		s.nodes[id] = n
		s.p.mu.Lock()
		s.p.nodes[id] = n
		s.p.mu.Unlock()
	}
	return n
}

// dial starts connecting to n in the background unless it already is or is
// backing off; it returns when to look again.
func (s *sender) dial(n *nodeState, now time.Time) time.Time {
	if n.dialing {
		return time.Time{}
	}
	if now.Before(n.backoffUntil) {
		return n.backoffUntil
	}
	n.dialing = true
	addr := n.addr
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
		s.p.post(func() { s.dialed(n, addr, c, err) })
	}()
	return time.Time{}
}

// dialed takes the outcome of dialing n at addr.
func (s *sender) dialed(n *nodeState, addr string, c *protocol.Conn, err error) {
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
	n.connected.Store(true)
	// A new connection may reach a broker that lost our state: every
	// partition it leads starts again at 5 with the first-batch gate.
	s.p.lim.NewConnection(n.id)
	// Kafka 0.11 (Produce v3) retains only the last batch per producer:
	// one batch in flight per partition there. Produce v4 (Kafka 1.0) and
	// later retain 5.
	windowCap := 0
	if v, ok := c.Version(0); ok && v < 4 {
		windowCap = 1
	}
	s.p.lim.SetNodeWindowCap(n.id, windowCap)
	s.cfg.hooks.connected(n, nil)
	s.cfg.hooks.windowsChanged(s, n.id, WindowReconnect)
}

// connFailed drops n's connection after an error on c. A request timeout
// closes the connection too: a late response must never be matched.
func (s *sender) connFailed(n *nodeState, c *protocol.Conn, err error) {
	c.Close()
	if n.conn == c {
		n.conn = nil
		n.connected.Store(false)
		n.lastErr = err
		s.p.log.Info("broker connection lost; retrying its batches", "node", n.id, "err", err)
		s.cfg.hooks.disconnected(n, err)
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
	jitter := time.Duration(rand.Int64N(int64(d)/5 + 1))
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
