package producer

// prefetch asks the CPU to bring b's cache lines into its cache for
// writing, without waiting for them: b is where Produce's next record is
// expected to go (produceCache.ahead), and Produce calls it once
// acc.mu is released. A batch buffer's lines were last read by
// another core (the connection's writev) tens of milliseconds earlier, so
// the Append that writes them waits for each line, and at 1 KiB records
// that wait, paid at the next locked instruction (acc.mu's unlock),
// was a tenth of the client's CPU. Prefetched, the lines arrive while the
// caller prepares its next record. A prefetch is a hint, not a memory
// access: it changes no byte and reads none that Go can observe, so it
// does not race with a Produce on another goroutine writing there.
func prefetch(b []byte) {
	if len(b) > 0 {
		prefetchLines(&b[0], len(b))
	}
}
