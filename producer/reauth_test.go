package producer

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/longhaul-kafka/longhaul/internal/broker"
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
