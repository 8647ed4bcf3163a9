//go:build unix

package linkproxy

import (
	"syscall"
	"time"
)

// processCPU returns the user plus system CPU time this process has used,
// or -1 (unknown) if getrusage fails.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return -1
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
