package cputime

import (
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestProcess: where getrusage exists (Known), Process is known (not -1)
// and counts this process's CPU: it grows while a loop burns some;
// elsewhere it is -1.
func TestProcess(t *testing.T) {
	before := Process()
	if !Known {
		require.Equal(t, time.Duration(-1), before, "unknown on %s", runtime.GOOS)
		return
	}
	require.GreaterOrEqual(t, before, time.Duration(0), "known on %s", runtime.GOOS)
	for i := 0; Process() <= before; i++ {
		require.Less(t, i, 1<<30, "Process stayed at %v while this loop ran", before)
		for range 1000 {
			burnSink = burnSink*6364136223846793005 + 1442695040888963407
		}
	}
}

// burnSink keeps TestProcess's busy loop from being optimized away.
var burnSink uint64
