//go:build !unix

package main

import (
	"fmt"
	"os"
	"runtime"
	"sync"
	"time"
)

var warnNoCPU sync.Once

// processCPU returns -1 (unknown): this platform (Windows, Plan 9, wasm)
// has no getrusage, so the client CPU columns show "-" instead of a figure.
// The first call says so on stderr, so a "-" is not taken for a missing run.
func processCPU() time.Duration {
	warnNoCPU.Do(func() {
		fmt.Fprintf(os.Stderr, "bench: client CPU is unavailable on %s (no getrusage); CPU columns show -\n", runtime.GOOS)
	})
	return -1
}
