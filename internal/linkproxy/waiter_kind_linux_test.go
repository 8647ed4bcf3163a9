package linkproxy

// preciseKind is the waiter SetPreciseTimers(true) gives: a timerfd on
// Linux.
func preciseKind() waiter { return &fdWaiter{} }
