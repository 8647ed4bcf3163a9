//go:build !linux

package linkproxy

// preciseKind is the waiter SetPreciseTimers(true) gives: outside Linux
// there is no precise waiter, so the runtime timer.
func preciseKind() waiter { return &timerWaiter{} }
