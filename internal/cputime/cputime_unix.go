//go:build unix

package cputime

import (
	"syscall"
	"time"
)

// Known reports whether Process can read the CPU time on this platform.
const Known = true

// Process returns the user plus system CPU time this process has used,
// from getrusage(RUSAGE_SELF), or -1 (unknown) if the call fails.
func Process() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return -1
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
