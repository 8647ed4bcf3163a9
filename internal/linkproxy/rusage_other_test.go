//go:build !unix

package linkproxy

import "time"

// processCPU returns -1 (unknown): there is no getrusage here, so
// BenchmarkRelease reports no cpu-µs/req.
func processCPU() time.Duration { return -1 }
