package main

import (
	"fmt"
	"os"
	"runtime"
	"sync"
	"time"

	"github.com/longhaul-kafka/longhaul/internal/cputime"
)

var warnNoCPU sync.Once

// processCPU returns this process's CPU time, or -1 (unknown) where the
// platform (Windows, Plan 9, wasm) has no getrusage: the client CPU columns
// then show "-" instead of a figure, and the first call says so on stderr,
// so a "-" is not taken for a missing run.
func processCPU() time.Duration {
	if !cputime.Known {
		warnNoCPU.Do(func() {
			fmt.Fprintf(os.Stderr, "bench: client CPU is unavailable on %s (no getrusage); CPU columns show -\n", runtime.GOOS)
		})
	}
	return cputime.Process()
}
