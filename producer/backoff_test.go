package producer

// Tests of the retry backoff: it doubles from retry.backoff.ms up to
// retry.backoff.max.ms, with jitter.

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRetryBackoffDoubles: RetryBackoff's doc, "the first wait before a
// retry ... it doubles up to RetryBackoffMax", with the jitter of a tenth
// either way that conns.go's backoff adds; and a retry.backoff.max.ms
// below retry.backoff.ms is raised to it, as in the Java client.
func TestRetryBackoffDoubles(t *testing.T) {
	p := backoffSender(t, RetryBackoff(100*time.Millisecond), RetryBackoffMax(time.Second))
	for failures, want := range map[int]time.Duration{1: 100 * time.Millisecond, 2: 200 * time.Millisecond,
		3: 400 * time.Millisecond, 4: 800 * time.Millisecond, 5: time.Second, 9: time.Second} {
		lo, hi := want, want
		for range 200 {
			d := p.backoff(failures)
			lo, hi = min(lo, d), max(hi, d)
		}
		assert.GreaterOrEqual(t, lo, want-want/10, "failures %d", failures)
		assert.LessOrEqual(t, hi, want+want/10, "failures %d", failures)
		assert.Less(t, lo, hi, "failures %d: jittered", failures)
	}
	q := backoffSender(t, RetryBackoff(2*time.Second), RetryBackoffMax(time.Second))
	assert.Equal(t, 2*time.Second, q.cfg.retryBackoffMax)
	assert.GreaterOrEqual(t, q.backoff(3), 1800*time.Millisecond)
}

// backoffSender is a sender that is not running, with the config opts
// give: its jitter source belongs to the sender goroutine (randSources),
// so the test must not draw from a running producer's.
func backoffSender(t *testing.T, opts ...Opt) *sender {
	t.Helper()
	c := defaultConfig()
	for _, o := range append([]Opt{BootstrapServers("127.0.0.1:1")}, opts...) {
		require.NoError(t, o.apply(&c))
	}
	require.NoError(t, c.validate())
	return &sender{cfg: &c}
}
