package producer

import "math/rand/v2"

// randSources are the one producer's sources of random choices, one per
// goroutine that draws, so no draw takes a lock: part for the partition
// choices (the sticky partition, RandomPartitioner's), drawn with
// acc.mu held; send for backoff jitter, drawn by the sender goroutine
// alone; telemetry for the first push's jitter, drawn by the client
// metrics push goroutine alone. A producer seeds them at random; a test seeds them from its
// schedule (seededRandom), so a failing randomized run takes the same
// choices when run again.
type randSources struct {
	part      *rand.Rand
	send      *rand.Rand
	telemetry *rand.Rand
}

// Stream identifiers: each source of one seed draws its own sequence.
const (
	randPartStream = 0x7061727469 // "parti"
	randSendStream = 0x73656e64   // "send"
	randTelStream  = 0x746c6d     // "tlm"
)

// newRandSources returns sources seeded from seed.
func newRandSources(seed uint64) randSources {
	return randSources{
		part:      rand.New(rand.NewPCG(seed, randPartStream)),
		send:      rand.New(rand.NewPCG(seed, randSendStream)),
		telemetry: rand.New(rand.NewPCG(seed, randTelStream)),
	}
}

// randomSources returns sources seeded at random, as every producer's are
// unless a test seeds them.
func randomSources() randSources { return newRandSources(rand.Uint64()) }

// seededRandom is a test hook, not public API: it seeds the producer's
// random choices (randSources) from seed, so a test that replays a
// schedule replays them too.
func seededRandom(seed uint64) Opt {
	return optFunc(func(c *config) error { c.rand = newRandSources(seed); return nil })
}
