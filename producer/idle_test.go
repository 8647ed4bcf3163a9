package producer

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-kafka/longhaul/internal/broker"
)

// idleWakeups warms a producer up on four partitions, lets everything
// settle, and returns how often its sender loop ran over the next minute of
// virtual time with nothing to send.
func idleWakeups(t *testing.T, tick bool) int64 {
	var loops int64
	synctest.Test(t, func(t *testing.T) {
		c, n := memCluster(t, broker.Config{Topics: []broker.TopicConfig{{Name: "t", Partitions: 4}}})
		p := memProducer(t, c, n, optFunc(func(c *config) error { c.regress.idleTick = tick; return nil }))
		l := newLedger("a", "t")
		warmUp(t, p, l, 0, 1, 2, 3)
		time.Sleep(10 * time.Second) // linger, backoffs and delivery timeouts all behind
		l0 := p.s.loops.Load()
		time.Sleep(time.Minute)
		loops = p.s.loops.Load() - l0
		t.Logf("sender loop iterations in one idle minute: %d", loops)
		// Still works after the pause.
		l.produce(p, 1, 5, 10)
		require.True(t, l.waitAll(time.Minute))
		require.Empty(t, l.failures())
	})
	return loops
}

// TestIdleSenderDoesNotWake: with nothing buffered and nothing due, the
// sender sleeps until an event or the next deadline (metadata.max.age.ms,
// 5 minutes by default) instead of waking every second (issue 20: 23
// wake-ups per second idle, kgo 3). A count over a fixed interval of
// virtual time; the negative control brings back the 1 s cap.
func TestIdleSenderDoesNotWake(t *testing.T) {
	require.LessOrEqual(t, idleWakeups(t, false), int64(2), "sender wake-ups in an idle minute")
}

func TestIdleSenderDoesNotWakeNegativeControl(t *testing.T) {
	require.GreaterOrEqual(t, idleWakeups(t, true), int64(55), "the 1 s cap wakes the sender about 60 times a minute")
}
