package producer

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// draws returns what a producer configured by opts would choose, in turn:
// sticky partitions (moves, uniform and adaptive, among 5 and 50
// partitions), RandomPartitioner's partitions and backoff jitter.
func draws(t *testing.T, opts ...Opt) []int64 {
	t.Helper()
	c := defaultConfig()
	for _, o := range append([]Opt{RetryBackoff(100 * time.Millisecond)}, opts...) {
		require.NoError(t, o.apply(&c))
	}
	ts := &topicBuf{name: "t", ts: &topicState{name: "t"}, sticky: stickyPartitioner{current: -1, rand: c.rand.part}}
	s := &sender{cfg: &c}
	var out []int64
	for i := range 40 {
		n := int32(5 + 45*(i%2))
		out = append(out, int64(ts.sticky.pick(n, nil)))
		ts.sticky.move(n, nil, nil)
		out = append(out, int64(ts.sticky.current))
		ts.sticky.move(n, func(p int32) int { return int(p % 3) }, nil)
		out = append(out, int64(ts.sticky.current))
		p, _, err := placeWith(RandomPartitioner(), ts, &Record{Topic: "t"}, n, nil)
		require.NoError(t, err)
		out = append(out, int64(p), int64(s.backoff(1)))
	}
	return out
}

// TestSeededRandomReplays: with seededRandom, every random choice of the
// producer (sticky partition, RandomPartitioner, backoff jitter) is the
// same for the same seed and differs for another; without it (production)
// two producers choose differently.
func TestSeededRandomReplays(t *testing.T) {
	a := draws(t, seededRandom(42))
	require.Equal(t, a, draws(t, seededRandom(42)), "the same seed replays")
	require.NotEqual(t, a, draws(t, seededRandom(43)), "another seed draws otherwise")
	require.NotEqual(t, draws(t), draws(t), "production producers are seeded at random")
	jitter := map[int64]bool{}
	for i := 4; i < len(a); i += 5 {
		require.InDelta(t, float64(100*time.Millisecond), float64(a[i]), float64(10*time.Millisecond), "backoff within its 20% jitter")
		jitter[a[i]] = true
	}
	require.Greater(t, len(jitter), 10, "the jitter varies")
}

// TestProducerDrawsFromItsSources: a producer's topics draw their sticky
// partitions from its own source, the one seededRandom sets.
func TestProducerDrawsFromItsSources(t *testing.T) {
	p, err := New(BootstrapServers("127.0.0.1:1"), seededRandom(7))
	require.NoError(t, err)
	defer p.Close(t.Context())
	p.acc.mu.Lock()
	defer p.acc.mu.Unlock()
	require.Same(t, p.cfg.rand.part, p.acc.topic("t").sticky.rand)
	require.NotSame(t, p.cfg.rand.part, p.cfg.rand.send, "the sender's source is its own: no lock")
}

// TestNodesInIDOrder: the sender's node list stays in id order whatever
// order brokers are met in.
func TestNodesInIDOrder(t *testing.T) {
	var nodes []*nodeState
	for _, id := range []int32{5, 1, 9, 3, 0, 7} {
		nodes = insertByID(nodes, &nodeState{id: id})
	}
	var ids []int32
	for _, n := range nodes {
		ids = append(ids, n.id)
	}
	require.Equal(t, []int32{0, 1, 3, 5, 7, 9}, ids)
}
