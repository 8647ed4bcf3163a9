package main

import (
	"testing"

	"github.com/longhaul-kafka/longhaul/internal/leakcheck"
)

// TestMain fails the package's test run if a goroutine that a test started
// is still running once every test has returned: a Close that does not stop
// its goroutines, or a test that forgets to stop what it started. A
// goroutine on its way out is waited for (leakcheck.Wait).
func TestMain(m *testing.M) {
	leakcheck.VerifyTestMain(m)
}
