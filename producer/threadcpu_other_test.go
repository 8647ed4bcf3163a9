//go:build !linux

package producer

import (
	"testing"
	"time"
)

// threadCPU returns -1 (unknown): only Linux has RUSAGE_THREAD, so the
// benchmarks report no produce-cpu-ns/record here.
func threadCPU(*testing.B) time.Duration { return -1 }

// processCPU returns -1 (unknown) outside Linux.
func processCPU(*testing.B) time.Duration { return -1 }
