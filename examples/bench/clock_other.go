//go:build !amd64

package main

// rdtsc is not available off amd64; benchClock falls back to the runtime's
// monotonic clock (haveTSC false), so this is never called.
func rdtsc() uint64 { panic("bench: rdtsc on a non-amd64 machine") }

const haveTSC = false
