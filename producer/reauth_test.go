package producer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/longhaul-kafka/longhaul/internal/broker"
	"github.com/longhaul-kafka/longhaul/internal/memnet"
	"github.com/longhaul-kafka/longhaul/protocol"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/sasl/plain"
)

// KIP-368 re-authentication (issue 16): a SASL broker announces a session
// lifetime (connections.max.reauth.ms) and closes a connection on the
// first request read after it; the producer renews every connection
// before that, draining it first, so no batch is cut.

// saslPlain is the embedded broker's SASL listener for PLAIN alice/secret
// with session lifetime life.
func saslPlain(life time.Duration) *broker.SASLConfig {
	return &broker.SASLConfig{Mechanisms: []string{"PLAIN"}, SessionLifetime: life,
		Authenticate: func(mech string, msg []byte) ([]byte, error) {
			if parts := strings.Split(string(msg), "\x00"); len(parts) != 3 || parts[1] != "alice" || parts[2] != "secret" {
				return nil, errors.New("bad credentials")
			}
			return nil, nil
		}}
}

// connEvents records broker connects and disconnects with their causes,
// and produce attempts that ended without an acknowledgement.
type connEvents struct {
	mu          sync.Mutex
	connects    int
	renewals    int
	otherCauses []string
	rejected    int
}

func (e *connEvents) OnBrokerConnect(_ int32, _ string, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if err == nil {
		e.connects++
	}
}

func (e *connEvents) OnBrokerDisconnect(node int32, _ string, cause error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case errors.Is(cause, ErrSessionRenewal):
		e.renewals++
	case errors.Is(cause, ErrClosed):
	default:
		e.otherCauses = append(e.otherCauses, fmt.Sprintf("node %d: %v", node, cause))
	}
}

func (e *connEvents) OnBatchRejected(BatchInfo, error, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.rejected++
}

func (e *connEvents) snapshot() (connects, renewals, rejected int, other []string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.connects, e.renewals, e.rejected, append([]string(nil), e.otherCauses...)
}

// reauthScenario is one randomized run: a SASL cluster with session
// lifetime life, RTT rtt, and parts partitions over nodes nodes, produced
// to in bursts for run; drops injects that many connection drops at
// random times.
type reauthScenario struct {
	life, rtt, run time.Duration
	nodes          int
	parts          int32
	drops          int
	metaAge        time.Duration // metadata.max.age.ms: how often the control connection is used
	noRenewal      bool          // the negative control: no KIP-368 renewal
	noCtlRenewal   bool          // the negative control: control connections not renewed
}

type reauthResult struct {
	connects, renewals, rejected int
	other                        []string
	expired                      int64
	records                      int
}

func runReauth(t *testing.T, rng *rand.Rand, sc reauthScenario) reauthResult {
	var res reauthResult
	synctest.Test(t, func(t *testing.T) {
		c, n := memCluster(t, broker.Config{Nodes: sc.nodes, RTT: sc.rtt, SASL: saslPlain(sc.life),
			Topics: []broker.TopicConfig{{Name: "t", Partitions: sc.parts, Window: 20}}})
		ev := &connEvents{}
		opts := []Opt{SASL(plain.Auth{User: "alice", Pass: "secret"}.AsMechanism()), Hooks(ev),
			DeliveryTimeout(time.Minute), MetadataMaxAge(sc.metaAge)}
		if sc.noRenewal || sc.noCtlRenewal {
			opts = append(opts, bug(t, noSessionRenewal, sc.noRenewal), bug(t, noControlRenewal, sc.noCtlRenewal))
		}
		p := memProducer(t, c, n, opts...)
		l := newLedger("a", "t")
		dropAt := map[int]bool{}
		steps := int(sc.run / (10 * time.Millisecond))
		for range sc.drops {
			dropAt[rng.IntN(steps)] = true
		}
		for step := range steps {
			// Bursts and pauses: sometimes many records, often none,
			// so sessions end both on busy and on idle connections.
			if k := rng.IntN(10); k < 6 {
				for part := range sc.parts {
					l.produce(p, part, rng.IntN(20)+1, 50+rng.IntN(200))
				}
			}
			if dropAt[step] {
				c.DropConnections(int32(rng.IntN(sc.nodes)))
			}
			time.Sleep(10 * time.Millisecond)
		}
		require.True(t, l.waitAll(2*time.Minute), "every callback ran")
		require.Empty(t, l.failures(), "no record error")
		requireClean(t, c, "t", sc.parts, l)
		res.connects, res.renewals, res.rejected, res.other = ev.snapshot()
		res.expired = c.SessionsExpired()
		res.records = len(l.res)
	})
	return res
}

// TestReauthRenewsBeforeSessionEnds: randomized runs on virtual time (RTT
// 1-150 ms, lifetime 1-4 s, 1-2 nodes, 1-4 partitions, bursty load,
// metadata refreshed every 0.2-2.2 s, some runs with connection drops
// injected at random) of about four lifetimes each. In every run each
// record is written exactly once and in order with no error, and the
// broker never closed a connection, produce or control (Metadata), for an
// expired session: the producer renewed each one first. Without injected
// drops no produce attempt was rejected and every disconnect was a
// renewal (ErrSessionRenewal), several per run. The negative controls
// below show each check failing without the renewal.
func TestReauthRenewsBeforeSessionEnds(t *testing.T) {
	seeds := 10
	if testing.Short() {
		seeds = 4
	}
	for seed := range seeds {
		rng := rand.New(rand.NewPCG(uint64(seed), 16))
		sc := reauthScenario{
			life:  time.Second + time.Duration(rng.IntN(3000))*time.Millisecond,
			rtt:   time.Millisecond + time.Duration(rng.IntN(150))*time.Millisecond,
			nodes: 1 + rng.IntN(2),
			parts: 1 + rng.Int32N(4),
		}
		sc.run = 4 * sc.life
		sc.metaAge = 200*time.Millisecond + time.Duration(rng.IntN(2000))*time.Millisecond
		if seed%2 == 1 {
			sc.drops = 1 + rng.IntN(4)
		}
		t.Run(fmt.Sprintf("seed%d/life%v/rtt%v/drops%d", seed, sc.life, sc.rtt, sc.drops), func(t *testing.T) {
			res := runReauth(t, rng, sc)
			t.Logf("%d records, %d connects, %d renewals, %d other disconnects, %d attempts rejected",
				res.records, res.connects, res.renewals, len(res.other), res.rejected)
			require.Zero(t, res.expired, "the broker closed a connection for an expired session")
			require.GreaterOrEqual(t, res.renewals, 3, "sessions renewed by the producer")
			if sc.drops == 0 {
				require.Empty(t, res.other, "disconnects not caused by a renewal")
				require.Zero(t, res.rejected, "produce attempts cut")
			}
		})
	}
}

// TestReauthNegativeControl: with the renewal turned off the same load
// makes the broker close connections for expired sessions, cutting the
// requests that arrived too late (retried, seen by HookBatchRejected and
// HookBrokerDisconnect): the assertions of TestReauthRenewsBeforeSessionEnds
// fail without the renewal.
func TestReauthNegativeControl(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 16))
	needRegress(t)
	res := runReauth(t, rng, reauthScenario{life: 2 * time.Second, rtt: 20 * time.Millisecond,
		nodes: 1, parts: 2, run: 8 * time.Second, metaAge: 500 * time.Millisecond, noRenewal: true})
	require.Positive(t, res.expired, "sessions expired at the broker")
	require.Zero(t, res.renewals)
	require.NotEmpty(t, res.other, "disconnects caused by the broker")
	require.Positive(t, res.rejected, "produce attempts cut by the broker")
}

// TestReauthNegativeControlControlConnection: with only the control
// connection's renewal turned off, frequent metadata refreshes make the
// broker expire its sessions, while produce connections are still renewed:
// TestReauthRenewsBeforeSessionEnds's expired-session check covers the
// control connection.
func TestReauthNegativeControlControlConnection(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 16))
	needRegress(t)
	res := runReauth(t, rng, reauthScenario{life: 2 * time.Second, rtt: 20 * time.Millisecond,
		nodes: 1, parts: 2, run: 8 * time.Second, metaAge: 300 * time.Millisecond, noCtlRenewal: true})
	require.Positive(t, res.expired, "control sessions expired at the broker")
	require.Positive(t, res.renewals, "produce connections still renewed")
	require.Empty(t, res.other, "no produce connection closed by the broker")
}

// renewalRun produces a burst of 60 batches (240 records of 100 bytes,
// batch.size 512) to one partition of a SASL broker whose round trip
// (100 ms) is about the last 15 % of its session lifetime (200 ms): a
// renewed connection is drained before the answer to its first request
// arrives. It returns the records' failures, the window changes and the
// renewals seen; resets brings back the old rule (a connection replacing
// a renewed one resets windows and gates like any new connection).
func renewalRun(t *testing.T, resets bool) (failures []string, windows []windowChange, renewals int) {
	synctest.Test(t, func(t *testing.T) {
		c, n := memCluster(t, broker.Config{RTT: 100 * time.Millisecond, SASL: saslPlain(200 * time.Millisecond),
			Topics: []broker.TopicConfig{{Name: "t", Partitions: 1, Window: 20}}})
		ev, h := &connEvents{}, newRecorder()
		p := memProducer(t, c, n, SASL(plain.Auth{User: "alice", Pass: "secret"}.AsMechanism()), Hooks(ev, h),
			bug(t, renewalResets, resets))
		l := newLedger("a", "t")
		l.produce(p, 0, 240, 100)
		require.True(t, l.waitAll(time.Minute), "every callback ran")
		requireClean(t, c, "t", 1, l)
		require.Zero(t, c.SessionsExpired(), "the broker closed a connection for an expired session")
		failures, windows = l.failures(), h.windowsOf()
		_, renewals, _, _ = ev.snapshot()
	})
	return failures, windows, renewals
}

// TestRenewalContinuesConnection: a connection dialed in the pass that
// closed its node's connection drained for a SASL renewal continues it:
// the partitions' windows and first-batch gates carry over (the Java
// client re-authenticates on the same connection). With a round trip
// about the session's last 15 %, every record of a 60-batch burst is
// written once, in order, with no error, over several renewals, and no
// window is reset for a reconnect. Negative control: with the reset of a
// new connection (the old rule), each connection carries the one gated
// batch whose ack arrives while it drains, and the burst runs into
// delivery.timeout.ms (chaos seeds 17356, 23281, 40789).
func TestRenewalContinuesConnection(t *testing.T) {
	failures, windows, renewals := renewalRun(t, false)
	t.Logf("%d renewals, %d records failed", renewals, len(failures))
	require.Empty(t, failures)
	require.GreaterOrEqual(t, renewals, 3, "sessions renewed under load")
	for _, w := range windows {
		require.NotEqual(t, WindowReconnect, w.why, "window reset by a renewal: %v", windows)
	}
	require.Contains(t, windows, windowChange{"t", 0, 5, 20, WindowLearned})

	if !regressBuild {
		return // the negative control below needs -tags longhaul_regress
	}
	failures, windows, renewals = renewalRun(t, true)
	t.Logf("negative control: %d renewals, %d records failed", renewals, len(failures))
	require.NotEmpty(t, failures, "negative control: the old rule starves the burst")
	require.Contains(t, failures[0], ErrDeliveryTimeout.Error())
	require.GreaterOrEqual(t, renewals, 3)
	require.Contains(t, windows, windowChange{"t", 0, 20, 5, WindowReconnect})
}

// TestRenewalThenIdleIsNewConnection: a connection renewed while idle is
// closed and not replaced; the connection the next burst dials later is a
// new one, as after a loss: the partition's learned window starts again at
// 5 (the broker may have restarted meanwhile).
func TestRenewalThenIdleIsNewConnection(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, n := memCluster(t, broker.Config{RTT: 5 * time.Millisecond, SASL: saslPlain(time.Second),
			Topics: []broker.TopicConfig{{Name: "t", Partitions: 1, Window: 20}}})
		ev, h := &connEvents{}, newRecorder()
		p := memProducer(t, c, n, SASL(plain.Auth{User: "alice", Pass: "secret"}.AsMechanism()), Hooks(ev, h))
		l := newLedger("a", "t")
		l.produce(p, 0, 3, 100)
		require.True(t, l.waitAll(time.Minute))
		learned := windowChange{"t", 0, 5, 20, WindowLearned}
		require.Equal(t, []windowChange{learned}, h.windowsOf())

		time.Sleep(3 * time.Second) // sessions end; the idle connection is renewed and closed
		_, renewals, _, _ := ev.snapshot()
		require.Positive(t, renewals, "the idle connection was renewed")
		l.produce(p, 0, 3, 100)
		require.True(t, l.waitAll(time.Minute))
		require.Empty(t, l.failures())
		require.Equal(t, []windowChange{learned, {"t", 0, 20, 5, WindowReconnect}, learned}, h.windowsOf())
		requireClean(t, c, "t", 1, l)
	})
}

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
