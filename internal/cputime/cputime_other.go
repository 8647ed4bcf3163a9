//go:build !unix

package cputime

import "time"

// Known reports whether Process can read the CPU time on this platform.
const Known = false

// Process returns -1 (unknown): this platform (Windows, Plan 9, wasm) has
// no getrusage.
func Process() time.Duration { return -1 }
