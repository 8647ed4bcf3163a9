package leakcheck

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) { VerifyTestMain(m) }

// parked blocks until stop is closed; its name is what a report must show.
func parked(stop <-chan struct{}) { <-stop }

// TestVerifyReportsLeak: a goroutine still running after the wait makes
// the run exit 1, with the goroutine's function on stderr.
func TestVerifyReportsLeak(t *testing.T) {
	stop := make(chan struct{})
	defer close(stop)
	var stderr bytes.Buffer
	code := verify(func() int { go parked(stop); return 0 }, 200*time.Millisecond, &stderr)
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr.String(), "leakcheck.parked")
}

// TestVerifyWaitsForExitingGoroutine: a goroutine that ends within the
// wait, later than goleak's own half second of retries, is no leak (a
// goroutine ending before Find would prove nothing, so this one ends after
// Find has reported it at least once).
func TestVerifyWaitsForExitingGoroutine(t *testing.T) {
	stop := make(chan struct{})
	done := make(chan struct{})
	var stderr bytes.Buffer
	code := verify(func() int {
		go func() { parked(stop); close(done) }()
		go func() { time.Sleep(2 * time.Second); close(stop) }()
		return 0
	}, time.Minute, &stderr)
	<-done
	assert.Zero(t, code, "stderr: %s", stderr.String())
	assert.Empty(t, stderr.String())
}

// TestVerifyKeepsFailedRunStatus: a failed run's status is kept and no
// check runs (nothing on stderr although a goroutine is running).
func TestVerifyKeepsFailedRunStatus(t *testing.T) {
	stop := make(chan struct{})
	defer close(stop)
	var stderr bytes.Buffer
	code := verify(func() int { go parked(stop); return 2 }, time.Minute, &stderr)
	require.Equal(t, 2, code)
	assert.Empty(t, stderr.String())
}
