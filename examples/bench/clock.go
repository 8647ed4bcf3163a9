package main

import (
	"bytes"
	"os"
	"time"
)

// benchClock is the clock of the per-record stamps and latencies: every
// record is stamped when it is handed to the client, and its callback reads
// the clock again. At 100-byte records that is two readings per record on
// the bench's serial path (about 2 million records/s), and the runtime's
// monotonic clock (time.Since: the vDSO's clock_gettime behind a switch to
// the system stack) costs about twice a direct counter read, a share of
// the client process's CPU on Kafka that is charged to every Go client
// alike (HISTORY.md has the figures). Where the kernel itself
// keeps time with the CPU's time-stamp counter (clocksource tsc:
// invariant, synchronized across CPUs), the bench reads the counter
// directly and scales it by a rate calibrated
// against the monotonic clock at start; elsewhere it uses time.Since.
// Readings are nanoseconds since epoch.
type benchClock struct {
	tsc       bool
	tsc0      uint64  // the counter at epoch
	nsPerTick float64 // calibrated against the monotonic clock
}

// epoch is when the program started, with its wall and monotonic readings.
var epoch = time.Now()

// clk is the bench's clock, calibrated once at start.
var clk = newBenchClock(tscUsable(), 20*time.Millisecond)

// newBenchClock returns a clock reading the time-stamp counter when tsc,
// with its rate measured over calib; else one reading time.Since(epoch).
func newBenchClock(tsc bool, calib time.Duration) *benchClock {
	if !tsc {
		return &benchClock{}
	}
	// The counter and the monotonic clock are read back to back at both
	// ends; calib of 20 ms makes a microsecond between two reads an error
	// of 5e-5, far below the histogram's 6 % buckets.
	t0, c0 := time.Since(epoch), rdtsc()
	time.Sleep(calib)
	t1, c1 := time.Since(epoch), rdtsc()
	perTick := float64(t1-t0) / float64(c1-c0)
	// Counter value at epoch: back from c0 by the time since epoch.
	return &benchClock{tsc: true, nsPerTick: perTick, tsc0: c0 - uint64(float64(t0)/perTick)}
}

// now is the time since epoch in nanoseconds, always > 0 after start.
func (c *benchClock) now() int64 {
	if c.tsc {
		return int64(float64(rdtsc()-c.tsc0) * c.nsPerTick)
	}
	return int64(time.Since(epoch))
}

// timeOf is the time ns nanoseconds after epoch, with a monotonic reading:
// a record's Timestamp (its create time in Kafka) for a clock reading.
func timeOf(ns int64) time.Time { return epoch.Add(time.Duration(ns)) }

// nsOf is timeOf's inverse.
func nsOf(t time.Time) int64 { return int64(t.Sub(epoch)) }

// tscUsable reports whether the time-stamp counter can serve as the clock:
// amd64, and Linux keeps its own time with it (it checks that the counter
// is invariant and in step across CPUs before it selects it).
func tscUsable() bool {
	if !haveTSC {
		return false
	}
	cs, err := os.ReadFile("/sys/devices/system/clocksource/clocksource0/current_clocksource")
	return err == nil && string(bytes.TrimSpace(cs)) == "tsc"
}
