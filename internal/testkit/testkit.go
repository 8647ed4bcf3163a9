// Package testkit holds the helpers that tests of several packages share:
// starting an embedded cluster for one test and waiting for goroutines to
// wind down. It is imported by tests and by the soak (which checks for
// leaked goroutines itself); it never imports package testing's flags or
// changes global state.
//
// # Concurrency
//
// Every function is safe for concurrent use.
package testkit

import (
	"runtime"
	"testing"
	"time"

	"github.com/longhaul-kafka/longhaul/internal/broker"
)

// StartCluster starts an embedded cluster for one test and closes it at
// the test's cleanup, reporting an error from Close there. It fails the
// test at once if the cluster cannot start.
func StartCluster(t testing.TB, cfg broker.Config) *broker.Cluster {
	t.Helper()
	c, err := broker.Start(cfg)
	if err != nil {
		t.Fatalf("broker.Start: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("broker Close: %v", err)
		}
	})
	return c
}

// GoroutinesLeft waits up to d for the number of goroutines to fall back
// to before (a count taken with runtime.NumGoroutine before the code under
// test started its own) and returns how many more there still are, 0 when
// they all ended. It polls on the real clock; inside a synctest bubble,
// synctest itself reports leaked goroutines.
func GoroutinesLeft(before int, d time.Duration) int {
	deadline := time.Now().Add(d)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	return max(runtime.NumGoroutine()-before, 0)
}

// CheckNoLeaks fails t, with every goroutine's stack, if goroutines
// started since before are still running after 5 s.
func CheckNoLeaks(t testing.TB, before int) {
	t.Helper()
	checkNoLeaks(t, before, 5*time.Second)
}

func checkNoLeaks(t testing.TB, before int, d time.Duration) {
	t.Helper()
	if n := GoroutinesLeft(before, d); n > 0 {
		buf := make([]byte, 1<<16)
		buf = buf[:runtime.Stack(buf, true)]
		t.Errorf("%d goroutines left (had %d):\n%s", n, before, buf)
	}
}
