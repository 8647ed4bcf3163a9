package soak

import (
	"fmt"
	"log/slog"
	"time"
)

// Config describes one soak. The zero value is a valid 20-second soak with
// a random seed.
type Config struct {
	// Seed drives every random choice. 0 picks one at random; the
	// [Result] reports the seed used.
	Seed uint64
	// Duration is how long producers write and faults fire, before the
	// final flush and checks. Default 20s.
	Duration time.Duration
	// Producers is the number of producers writing at once. Default 3.
	Producers int
	// RTT is node 0's emulated round trip; node 1 gets twice it and node
	// 2 half. Default 10ms.
	RTT time.Duration
	// FaultInterval is the mean time between faults (exponentially
	// distributed). Default 80ms.
	FaultInterval time.Duration
	// ExpireInterval is the mean time between producer-id expiries
	// (KIP-854), each done after a quiet period (see the package doc).
	// Default 5s; negative disables expiry.
	ExpireInterval time.Duration
	// RequestTimeout is the producers' request.timeout.ms; stalls last
	// longer than it. Default 600ms.
	RequestTimeout time.Duration
	// DeliveryTimeout is the producers' delivery.timeout.ms. Default 15s.
	DeliveryTimeout time.Duration
	// BufferMemory is each producer's buffer.memory in bytes. Default
	// 256 KiB, small so that Produce blocks often.
	BufferMemory int64
	// Rate is the records per second each producer aims at, in bursts.
	// Default 1500.
	Rate int
	// Logger receives the soak's progress and the producers' logs at the
	// level it enables. nil discards.
	Logger *slog.Logger
	// ReadBack runs the producers with read-back
	// (longhaul.readback.enable): records of unknown fate are settled by
	// reading the log back, and [Result.Readback] counts how.
	ReadBack bool

	// doctor, when set (tests only), rewrites each partition's log before
	// it is checked: the negative control that proves the checks catch
	// duplicates, reordering and loss.
	doctor func(topic string, partition int32, log []logRecord) []logRecord
	// hideStall, when set (tests only), stalls node 0 that long, 300 ms
	// into the run, without telling the stuck check: the negative control
	// that proves it catches a partition without progress.
	hideStall time.Duration
}

func (c Config) withDefaults() (Config, error) {
	if c.Duration == 0 {
		c.Duration = 20 * time.Second
	}
	if c.Producers == 0 {
		c.Producers = 3
	}
	if c.RTT == 0 {
		c.RTT = 10 * time.Millisecond
	}
	if c.FaultInterval == 0 {
		c.FaultInterval = 80 * time.Millisecond
	}
	if c.ExpireInterval == 0 {
		c.ExpireInterval = 5 * time.Second
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = 600 * time.Millisecond
	}
	if c.DeliveryTimeout == 0 {
		c.DeliveryTimeout = 15 * time.Second
	}
	if c.BufferMemory == 0 {
		c.BufferMemory = 256 << 10
	}
	if c.Rate == 0 {
		c.Rate = 1500
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	switch {
	case c.Duration < 0:
		return c, fmt.Errorf("%w: Duration %v must be positive", ErrInvalidConfig, c.Duration)
	case c.Producers < 1 || c.Producers > 64:
		return c, fmt.Errorf("%w: Producers %d must be 1..64", ErrInvalidConfig, c.Producers)
	case c.RTT < 0 || c.FaultInterval < 0 || c.RequestTimeout < 0 || c.DeliveryTimeout < 0:
		return c, fmt.Errorf("%w: durations must be positive", ErrInvalidConfig)
	case c.BufferMemory < 16<<10:
		return c, fmt.Errorf("%w: BufferMemory %d must be at least 16384", ErrInvalidConfig, c.BufferMemory)
	case c.Rate < 1:
		return c, fmt.Errorf("%w: Rate %d must be at least 1", ErrInvalidConfig, c.Rate)
	}
	return c, nil
}
