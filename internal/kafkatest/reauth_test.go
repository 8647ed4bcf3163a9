package kafkatest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/longhaul-kafka/longhaul/internal/testhooks"
	"github.com/longhaul-kafka/longhaul/producer"
)

// reauthHook counts, through the producer's hooks, connections renewed by
// the producer, connections lost otherwise (the broker closing an expired
// session), and produce attempts that ended without an acknowledgement.
type reauthHook struct {
	mu       sync.Mutex
	connects int
	renewals int
	other    []string
	rejected int
}

func (h *reauthHook) OnBrokerConnect(_ int32, _ string, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err == nil {
		h.connects++
	}
}

func (h *reauthHook) OnBrokerDisconnect(node int32, _ string, cause error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case errors.Is(cause, producer.ErrSessionRenewal):
		h.renewals++
	case errors.Is(cause, producer.ErrClosed):
	default:
		h.other = append(h.other, fmt.Sprintf("node %d: %v", node, cause))
	}
}

func (h *reauthHook) OnBatchRejected(b producer.BatchInfo, err error, retrying bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.rejected++
}

// testReauth produces for about 12 s (500 records/s, 2 partitions) over
// the REAUTH listener, whose PLAIN sessions last 3 s
// (connections.max.reauth.ms). Every record arrives exactly once and in
// order with no error. With renewal (KIP-368) every connection the
// producer gave up was renewed by it (ErrSessionRenewal), at least three,
// none was closed by the broker, and no produce attempt was cut. The
// negative control turns renewal off (testhooks.NoSessionRenewal, in the
// longhaul_regress build only): the
// broker closes connections whose session ended and cuts the requests
// that reached it too late (retried), so the first assertions can fail.
func testReauth(t *testing.T, e *secEnv, renew bool) {
	if !renew && testhooks.NoSessionRenewal == nil {
		t.Skip("negative control: needs -tags longhaul_regress (the producer sets testhooks.NoSessionRenewal only there)")
	}
	const n, parts = 6000, 2
	topic := fmt.Sprintf("sec-reauth-%v", renew)
	e.c.CreateTopic(t, topic, parts, 1, nil)
	h := &reauthHook{}
	opts := []producer.Opt{producer.SASL(plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism()), producer.Hooks(h),
		producer.Linger(2 * time.Millisecond)}
	if !renew {
		opts = append(opts, testhooks.NoSessionRenewal.(producer.Opt))
	}
	began := time.Now()
	p := newLonghaul(t, e.c.ListenerBootstrap("REAUTH"), nil, opts...)
	run := startLonghaul(p, topic, n, parts, 5) // 500 records/s: 12 s
	sent := run.wait(t, 2*time.Minute)
	elapsed := time.Since(began)
	require.Empty(t, run.failures())
	rep := checkLog(t, e.c, topic, parts, sent)
	assert.Equal(t, n, rep.Acked)
	h.mu.Lock()
	defer h.mu.Unlock()
	t.Logf("renew=%v: %v producing, %d connects, %d renewals, %d other disconnects %v, %d attempts rejected",
		renew, elapsed.Round(time.Millisecond), h.connects, h.renewals, len(h.other), h.other, h.rejected)
	if renew {
		assert.GreaterOrEqual(t, h.renewals, 3, "sessions renewed by the producer")
		assert.Empty(t, h.other, "connections the broker closed")
		assert.Zero(t, h.rejected, "produce attempts cut")
		return
	}
	assert.Zero(t, h.renewals)
	assert.NotEmpty(t, h.other, "the broker closes expired sessions")
	assert.Positive(t, h.rejected, "requests that arrived after the session end were cut")
}
