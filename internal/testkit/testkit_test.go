package testkit

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/longhaul-kafka/longhaul/internal/broker"
)

// TestStartCluster: the cluster serves during the test and is closed at
// its cleanup (DeleteTopic answers ErrClosed afterwards).
func TestStartCluster(t *testing.T) {
	var c *broker.Cluster
	t.Run("inner", func(t *testing.T) {
		c = StartCluster(t, broker.Config{Topics: []broker.TopicConfig{{Name: "t", Partitions: 1}}})
		_, err := c.DeleteTopic("t")
		require.NoError(t, err)
	})
	_, err := c.DeleteTopic("t")
	require.ErrorIs(t, err, broker.ErrClosed)
}

// TestGoroutinesLeft: a goroutine still running is counted; once it ends
// the count falls back to 0 (negative control and control).
func TestGoroutinesLeft(t *testing.T) {
	before := settledGoroutines()
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { <-stop; close(done) }()
	assert.Equal(t, 1, GoroutinesLeft(before, 30*time.Millisecond))
	close(stop)
	<-done
	assert.Zero(t, GoroutinesLeft(before, 5*time.Second))
}

// TestCheckNoLeaks: a leaked goroutine fails the test, with stacks.
func TestCheckNoLeaks(t *testing.T) {
	before := settledGoroutines()
	stop := make(chan struct{})
	defer close(stop)
	go func() { <-stop }()
	ft := &fakeT{TB: t}
	checkNoLeaks(ft, before, 30*time.Millisecond)
	assert.True(t, ft.failed)
	assert.Contains(t, ft.msg, "1 goroutines left")
}

// settledGoroutines waits until the goroutine count has stopped changing
// for 100 ms (an earlier test's cluster may still be winding down; a
// goroutine of it ending mid-test would cancel out the one the test
// starts) and returns it.
func settledGoroutines() int {
	n := runtime.NumGoroutine()
	for stable, deadline := time.Now(), time.Now().Add(5*time.Second); time.Since(stable) < 100*time.Millisecond && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
		if m := runtime.NumGoroutine(); m != n {
			n, stable = m, time.Now()
		}
	}
	return n
}

// fakeT records a failure instead of failing the test.
type fakeT struct {
	testing.TB
	failed bool
	msg    string
}

func (f *fakeT) Helper() {}
func (f *fakeT) Errorf(format string, args ...any) {
	f.failed = true
	f.msg = fmt.Sprintf(format, args...)
}
