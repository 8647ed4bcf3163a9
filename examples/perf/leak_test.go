package main

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's test run if a goroutine that a test started
// is still running once every test has returned: a Close that does not stop
// its goroutines, or a test that forgets to stop what it started. goleak
// retries for a short while, so a goroutine that is on its way out is not
// reported.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
