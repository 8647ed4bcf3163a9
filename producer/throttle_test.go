package producer

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-kafka/longhaul/internal/broker"
)

// throttleLog records the instants of throttles and batch sends.
type throttleLog struct {
	mu        sync.Mutex
	throttled []time.Time
	sent      []time.Time
}

func (h *throttleLog) OnThrottle(int32, time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.throttled = append(h.throttled, time.Now())
}

func (h *throttleLog) OnBatchSent(BatchInfo) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.sent = append(h.sent, time.Now())
}

// TestThrottleDoesNotDelaySending checks HookThrottle's "the producer does
// not wait on its own": after a response throttled for 10 s (a broker
// since Kafka 2.0 mutes the connection itself), the next batch goes out at
// once, and it is acknowledged, since this broker does not mute.
func TestThrottleDoesNotDelaySending(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, n := memCluster(t, broker.Config{RTT: 10 * time.Millisecond, Topics: []broker.TopicConfig{{Name: "t", Partitions: 1}}})
		h := &throttleLog{}
		p := memProducer(t, c, n, Hooks(h), Linger(0))
		ctx := context.Background()
		require.NoError(t, p.ProduceSync(ctx, toPartition("t", 0, []byte("warm"))).FirstErr())
		c.SetProduceThrottle(0, 10*time.Second)
		require.NoError(t, p.ProduceSync(ctx, toPartition("t", 0, []byte("throttled"))).FirstErr())
		start := time.Now()
		require.NoError(t, p.ProduceSync(ctx, toPartition("t", 0, []byte("next"))).FirstErr())
		require.Less(t, time.Since(start), time.Second, "the next batch waited for the throttle")

		h.mu.Lock()
		defer h.mu.Unlock()
		require.Len(t, h.throttled, 2)
		require.Len(t, h.sent, 3)
		require.Equal(t, start, h.sent[2], "sent at once after the throttled answer")
	})
}
