//go:build unix

package main

import (
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestProcessCPU: where getrusage exists, processCPU is known (not -1) and
// counts this process's CPU: it grows while a loop burns some.
func TestProcessCPU(t *testing.T) {
	before := processCPU()
	require.GreaterOrEqual(t, before, time.Duration(0), "known on %s", runtime.GOOS)
	for i := 0; processCPU() <= before; i++ {
		require.Less(t, i, 1<<30, "processCPU stayed at %v while this loop ran", before)
		for range 1000 {
			burnSink = burnSink*6364136223846793005 + 1442695040888963407
		}
	}
}

// burnSink keeps TestProcessCPU's busy loop from being optimized away.
var burnSink uint64
