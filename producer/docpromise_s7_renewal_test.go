package producer

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/longhaul-kafka/longhaul/internal/broker"
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
