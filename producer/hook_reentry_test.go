package producer

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/longhaul-kafka/longhaul/internal/broker"
)

// reentrantHook calls the Producer's non-waiting methods from its hooks, as
// a metrics hook reading InFlightLimit (named by HookWindowChanged's doc)
// or Stats would. The Hook contract forbids only the methods that wait
// (Flush, ProduceSync, Close), and windowsChanged says a hook may call
// Produce. Each call runs on a goroutine of its own and is given
// stuckAfter to return: a call still blocked then means the hook ran with
// acc.mu held, and would deadlock the sender if made directly (the
// hook then returns, so a failing run ends instead of hanging).
type reentrantHook struct {
	// p is set by setProducer once New returned; ready is closed then.
	// The sender starts inside New, so a hook (a connection, a producer
	// id) may run before p is set: each call waits for ready first.
	p     *Producer
	ready chan struct{}

	mu      sync.Mutex
	windows []windowChange
	rejects int
	calls   map[string]int // probes per hook
	stuck   []string       // the hook and call that found acc.mu held
}

const stuckAfter = 10 * time.Second

func (h *reentrantHook) call(where string, f func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		<-h.ready
		f()
	}()
	select {
	case <-done:
	case <-time.After(stuckAfter):
		h.mu.Lock()
		h.stuck = append(h.stuck, where)
		h.mu.Unlock()
	}
}

func (h *reentrantHook) OnWindowChanged(topic string, partition int32, old, new int, why WindowCause) {
	h.call("OnWindowChanged("+why.String()+") -> InFlightLimit", func() { h.p.InFlightLimit(topic, partition) })
	h.mu.Lock()
	h.windows = append(h.windows, windowChange{topic, partition, old, new, why})
	h.mu.Unlock()
}

func (h *reentrantHook) OnBatchRejected(BatchInfo, error, bool) {
	h.call("OnBatchRejected -> Stats", func() { h.p.Stats() })
	h.call("OnBatchRejected -> TryProduce", func() { h.p.TryProduce(&Record{Topic: "other", Value: []byte("x")}, nil) })
	h.mu.Lock()
	h.rejects++
	h.mu.Unlock()
}

// probe reads the producer from a hook as a metrics hook would.
func (h *reentrantHook) probe(where string) {
	h.call(where+" -> InFlightLimit", func() { h.p.InFlightLimit("t", 0) })
	h.call(where+" -> Stats", func() { h.p.Stats() })
	h.mu.Lock()
	h.calls[where]++
	h.mu.Unlock()
}

func (h *reentrantHook) OnBatchSent(BatchInfo)                   { h.probe("OnBatchSent") }
func (h *reentrantHook) OnBatchAcked(BatchInfo, int64)           { h.probe("OnBatchAcked") }
func (h *reentrantHook) OnProducerID(int64, int16, int64, int16) { h.probe("OnProducerID") }
func (h *reentrantHook) OnBrokerConnect(int32, string, error)    { h.probe("OnBrokerConnect") }
func (h *reentrantHook) OnBrokerDisconnect(int32, string, error) {
	h.probe("OnBrokerDisconnect")
}
func (h *reentrantHook) OnThrottle(int32, time.Duration) { h.probe("OnThrottle") }

func newReentrantHook() *reentrantHook {
	return &reentrantHook{calls: map[string]int{}, ready: make(chan struct{})}
}

// setProducer hands the hook the producer its calls go to.
func (h *reentrantHook) setProducer(p *Producer) {
	h.p = p
	close(h.ready)
}

func (h *reentrantHook) snapshot() (windows []windowChange, rejects int, stuck []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]windowChange(nil), h.windows...), h.rejects, append([]string(nil), h.stuck...)
}

// TestHookMayReadProducerOnLeaderChangeFromMetadata: a partition whose
// learned window (20) falls back to 5 because metadata names a new leader
// reports WindowLeaderChange to a hook that may call InFlightLimit. The
// change applied from a Metadata answer ran the hook with acc.mu held
// (applyMetadata), so that call deadlocked the sender: no partition sent
// again, and Close never returned.
func TestHookMayReadProducerOnLeaderChangeFromMetadata(t *testing.T) {
	c := startCluster(t, broker.Config{Nodes: 2, Topics: []broker.TopicConfig{{Name: "t", Partitions: 1, Window: 20}}})
	h := newReentrantHook()
	p := newTestProducer(t, c, Hooks(h), MetadataMaxAge(50*time.Millisecond))
	h.setProducer(p)

	produceN(t, p, "t", 0, "a", 3)
	windows, _, _ := h.snapshot()
	require.Equal(t, []windowChange{{"t", 0, 5, 20, WindowLearned}}, windows)

	// Nothing in flight: the periodic metadata refresh, not a produce
	// answer's KIP-951 hint, moves the partition.
	require.NoError(t, c.MoveLeader("t", 0, 1))
	waitFor(t, "the leader change to be reported", func() bool {
		windows, _, stuck := h.snapshot()
		return len(windows) == 2 || len(stuck) > 0
	})
	windows, _, stuck := h.snapshot()
	require.Empty(t, stuck, "a hook ran with acc.mu held")
	require.Equal(t, windowChange{"t", 0, 20, 5, WindowLeaderChange}, windows[1])

	// The producer goes on at the new leader.
	produceN(t, p, "t", 0, "b", 3)
	require.Len(t, c.Records("t", 0), 6)

	// Every other sender-side hook reads the producer too: a throttled
	// answer, a reconnect.
	c.SetProduceThrottle(1, time.Millisecond)
	c.DropConnections(1)
	produceN(t, p, "t", 0, "c", 3)
	_, _, stuck = h.snapshot()
	require.Empty(t, stuck, "a hook ran with acc.mu held")
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, hook := range []string{"OnBatchSent", "OnBatchAcked", "OnProducerID", "OnBrokerConnect", "OnBrokerDisconnect", "OnThrottle"} {
		assert.Positive(t, h.calls[hook], hook)
	}
}

// TestHookMayReadProducerWhenCloseFailsInFlight: Close reports each batch
// still in flight to HookBatchRejected (ErrClosed, not retrying); a hook
// that calls Stats or TryProduce there must not find acc.mu held
// (shutdown called it inside the lock, and Close never returned).
func TestHookMayReadProducerWhenCloseFailsInFlight(t *testing.T) {
	c := startCluster(t, broker.Config{Topics: []broker.TopicConfig{{Name: "t", Partitions: 1}}})
	h := newReentrantHook()
	p := newTestProducer(t, c, Hooks(h))
	h.setProducer(p)
	produceN(t, p, "t", 0, "a", 1) // connected, producer id known

	c.Stall(0, time.Hour) // the next batch stays in flight
	var (
		mu   sync.Mutex
		errs []error
	)
	for i := range 3 {
		r := &Record{Topic: "t", Value: []byte{'b', byte('0' + i)}}
		r.SetPartition(0)
		p.Produce(context.Background(), r, func(_ *Record, err error) {
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
		})
	}
	waitFor(t, "a batch in flight", func() bool { st := p.Stats(); return len(st.Partitions) > 0 && st.Partitions[0].InFlight > 0 })

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, p.Close(ctx), context.DeadlineExceeded)
	_, rejects, stuck := h.snapshot()
	require.Empty(t, stuck, "a hook ran with acc.mu held")
	require.Positive(t, rejects)
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, errs, 3)
	unknown := 0
	for _, err := range errs {
		assert.ErrorIs(t, err, ErrClosed)
		if IsFateUnknown(err) {
			unknown++
		}
	}
	assert.Positive(t, unknown, "the batch in flight fails fate unknown: %v", errs)
}
