package main

import (
	"testing"

	"github.com/longhaul-kafka/longhaul/internal/leakcheck"
)

// TestMain fails the package's test run if a goroutine that a test started
// is still running once every test has returned.
func TestMain(m *testing.M) {
	leakcheck.VerifyTestMain(m)
}
