package producer

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/longhaul-kafka/longhaul/internal/broker"
	"github.com/longhaul-kafka/longhaul/internal/memnet"
	"github.com/longhaul-kafka/longhaul/protocol"
)

// renewalRefusal is a hook and a dialer: once a connection is closed for
// its SASL renewal, every dial fails for refuse (a broker down, or
// restarting, at that moment).
type renewalRefusal struct {
	dial   func(ctx context.Context, network, addr string) (net.Conn, error)
	refuse time.Duration

	mu      sync.Mutex
	until   time.Time
	refused int
}

func (r *renewalRefusal) OnBrokerDisconnect(_ int32, _ string, cause error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if errors.Is(cause, ErrSessionRenewal) && r.until.IsZero() {
		r.until = time.Now().Add(r.refuse)
	}
}

func (r *renewalRefusal) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	r.mu.Lock()
	refuse := time.Now().Before(r.until)
	if refuse {
		r.refused++
	}
	r.mu.Unlock()
	if refuse {
		return nil, errors.New("connection refused (test)")
	}
	return r.dial(ctx, network, addr)
}

// renewalWithRefusedDial trickles records to one partition of a SASL
// broker (1 s sessions, 20 ms round trip) for 2.5 s, one each 2 ms, so
// batches wait while a connection drains and the renewal dials in the pass
// that closed it; dials fail for
// refuse after the first renewal. It returns the window changes and how
// many dials were refused.
func renewalWithRefusedDial(t *testing.T, refuse time.Duration) (windows []windowChange, refused int) {
	synctest.Test(t, func(t *testing.T) {
		c, n := memCluster(t, broker.Config{RTT: 20 * time.Millisecond, SASL: saslPlain(time.Second),
			Topics: []broker.TopicConfig{{Name: "t", Partitions: 1, Window: 20}}})
		rr, h := &renewalRefusal{dial: n.Dial, refuse: refuse}, newRecorder()
		p := memProducer(t, c, n, SASL(plain.Auth{User: "alice", Pass: "secret"}.AsMechanism()), Hooks(rr, h), Dialer(rr.Dial))
		l := newLedger("a", "t")
		for range 1250 {
			l.produce(p, 0, 1, 100)
			time.Sleep(2 * time.Millisecond)
		}
		require.True(t, l.waitAll(time.Minute))
		require.Empty(t, l.failures())
		requireClean(t, c, "t", 1, l)
		windows = h.windowsOf()
		rr.mu.Lock()
		refused = rr.refused
		rr.mu.Unlock()
	})
	return windows, refused
}

// TestRenewalAfterFailedDialIsNewConnection: the SASL renewal continues a
// connection only when the dial of the pass that closed the drained one
// succeeds (conns.go, dialed). When it fails (the broker down or
// restarting then), the connection dialed after the backoff is a new one:
// the window learned from the old broker is not trusted, it starts again
// at 5 with the first-batch gate (WindowReconnect), and is learned anew.
// Contrast: the same run with no refused dial keeps the window.
func TestRenewalAfterFailedDialIsNewConnection(t *testing.T) {
	learned := windowChange{"t", 0, 5, 20, WindowLearned}
	windows, refused := renewalWithRefusedDial(t, 0)
	require.Zero(t, refused)
	require.Equal(t, []windowChange{learned}, windows, "renewals carry the window over")

	windows, refused = renewalWithRefusedDial(t, 30*time.Millisecond)
	require.Positive(t, refused, "the renewal's dial was refused")
	require.Contains(t, windows, windowChange{"t", 0, 20, 5, WindowReconnect}, "%v", windows)
	require.Equal(t, learned, windows[len(windows)-1], "learned again from the new connection")
}

// relay forwards every connection made to a new address of n to upstream:
// the same broker, reached at another address. serve, when not nil, carries
// one connection's bytes (c from the client, up to upstream) instead of a
// plain copy each way; self is the relay's own address.
func relay(t *testing.T, n *memnet.Network, upstream string, serve func(self string, c, up net.Conn)) string {
	ln, err := n.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	self := ln.Addr().String()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := n.Dial(context.Background(), "tcp", upstream)
			if err != nil {
				c.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, c, up)
			mu.Unlock()
			if serve != nil {
				wg.Go(func() { serve(self, c, up) })
				continue
			}
			wg.Go(func() { io.Copy(up, c); up.Close() })
			wg.Go(func() { io.Copy(c, up); c.Close() })
		}
	})
	return self
}

// movedDuringRenewal trickles records to one partition of a SASL broker
// (1 s sessions, 20 ms round trip) and, the first time the node's
// connection is draining for its renewal, applies metadata that moves the
// node to another address (a relay to the same broker). It returns the
// window changes; continues brings back the bug (regress
// movedRenewalContinues).
func movedDuringRenewal(t *testing.T, continues bool) (windows []windowChange) {
	synctest.Test(t, func(t *testing.T) {
		c, n := memCluster(t, broker.Config{RTT: 20 * time.Millisecond, SASL: saslPlain(time.Second),
			Topics: []broker.TopicConfig{{Name: "t", Partitions: 1, Window: 20}}})
		moved := relay(t, n, c.Addr(), nil)
		h := newRecorder()
		p := memProducer(t, c, n, SASL(plain.Auth{User: "alice", Pass: "secret"}.AsMechanism()), Hooks(h),
			MetadataMaxAge(time.Hour), bug(t, movedRenewalContinues, continues))
		l := newLedger("a", "t")
		var applied atomic.Bool
		stop := make(chan struct{})
		watched := make(chan struct{})
		go func() {
			defer close(watched)
			for {
				select {
				case <-stop:
					return
				case <-time.After(time.Millisecond):
				}
				p.post(func() {
					if nd := p.s.nodes[0]; nd != nil && nd.draining != nil && !applied.Load() {
						applied.Store(true)
						p.s.applyMetadata(&protocol.MetadataResult{Brokers: map[int32]string{0: moved}, ControllerID: 0}, false)
					}
				})
			}
		}()
		for range 1250 {
			l.produce(p, 0, 1, 100)
			time.Sleep(2 * time.Millisecond)
		}
		close(stop)
		<-watched
		require.True(t, l.waitAll(time.Minute))
		require.Empty(t, l.failures())
		requireClean(t, c, "t", 1, l)
		require.True(t, applied.Load(), "the node moved while its connection drained")
		windows = h.windowsOf()
	})
	return windows
}

// TestRenewalToMovedBrokerIsNewConnection: metadata that moves a node to
// another address while its connection drains for a SASL renewal means
// another broker process (a replaced or restarted one, which may hold
// none of our state); the renewal must not carry the window learned from
// the old one to it. The draining connection is dropped like a live one
// (applyMetadata), and the connection dialed to the new address starts at
// 5 with the first-batch gate (WindowReconnect). Negative control
// (movedRenewalContinues, the code before): the drained connection closed
// in a pass with data waiting counted as renewed, whatever address the
// dial went to, and the window carried over.
func TestRenewalToMovedBrokerIsNewConnection(t *testing.T) {
	reset := windowChange{"t", 0, 20, 5, WindowReconnect}
	windows := movedDuringRenewal(t, false)
	require.Contains(t, windows, reset, "%v", windows)

	if !regressBuild {
		return // the negative control below needs -tags longhaul_regress
	}
	windows = movedDuringRenewal(t, true)
	require.NotContains(t, windows, reset, "negative control: %v", windows)
}
