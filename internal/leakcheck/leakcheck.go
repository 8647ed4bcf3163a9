package leakcheck

import (
	"fmt"
	"io"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// Wait is how long VerifyTestMain waits, after the tests passed, for
// goroutines to end before it reports them.
const Wait = 10 * time.Second

// VerifyTestMain runs m's tests and exits with their status. When they
// passed, it then waits up to [Wait] for every goroutine the tests started
// to end; if some are still running, it prints their stacks to stderr and
// exits with status 1. A run that failed exits with its own status without
// the check, so a leak does not hide the failure that caused it.
func VerifyTestMain(m *testing.M) {
	os.Exit(verify(m.Run, Wait, os.Stderr))
}

// verify is VerifyTestMain with the run, the wait and stderr given.
func verify(run func() int, wait time.Duration, stderr io.Writer) int {
	code := run()
	if code != 0 {
		return code
	}
	deadline := time.Now().Add(wait)
	for {
		err := goleak.Find() // itself retries for about half a second
		if err == nil {
			return 0
		}
		if time.Now().After(deadline) {
			fmt.Fprintf(stderr, "leakcheck: goroutines still running %v after the tests passed: %v\n", wait, err)
			return 1
		}
		time.Sleep(100 * time.Millisecond)
	}
}
