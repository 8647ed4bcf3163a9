package producer

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/longhaul-kafka/longhaul/internal/broker"
)

// The sender sleeps until something changes in the states where nothing
// it can do helps: it must not loop without blocking (a livelock: a core
// at 100 % in the user's process) or wake on a short timer that is always
// already due. Under testing/synctest a loop like that shows as many loop
// iterations over a stretch of virtual time in which nothing happened
// (and, if it never blocks, as virtual time that does not advance: the
// test hits its real timeout). Found while looking into the hang of
// TestMemoryReleasedPerCompletion, whose goroutine dumps showed the sender
// runnable: there it was not spinning but woken every 5 minutes of virtual
// time by metadata.max.age.ms, the timer that kept synctest from reporting
// the test's own deadlock (see memoryPerCompletion).

// stuckLoops counts the sender's loop iterations over a stretch of
// virtual time in three states, each settled first:
//   - memory: buffer.memory is all held by completions queued behind a
//     callback that blocks, and a Produce waits for it;
//   - inflight: records wait for a topic's metadata while the refresh
//     asking for it is in flight (the broker stalls);
//   - backoff: a batch waits for its partition's leader, which metadata
//     keeps reporting as none, so refreshes back off one after another.
//
// It also returns the metadata requests sent in the backoff state.
func stuckLoops(t *testing.T) (memory, inflight, backoff, refreshes int64) {
	t.Run("memory", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			c, n := memCluster(t, broker.Config{Topics: []broker.TopicConfig{{Name: "t", Partitions: 2}}})
			p := memProducer(t, c, n, BufferMemory(8192), MaxRequestSize(8192))
			require.NoError(t, p.ProduceSync(context.Background(), toPartition("t", 0, []byte("v"))).FirstErr())
			release, entered := make(chan struct{}), make(chan struct{})
			defer close(release)
			p.Produce(context.Background(), toPartition("t", 0, []byte("v")), func(*Record, error) { close(entered); <-release })
			<-entered
			// Fill buffer.memory with records that fit (one that did not
			// would wait here for ever: nothing is released while the
			// callback blocks).
			for i := 0; i < 10; i++ {
				r := toPartition("t", 1, make([]byte, 2000))
				if int64(recordMemory(r)) > 8192-p.mem.Held() {
					break
				}
				p.Produce(context.Background(), r, nil)
				time.Sleep(100 * time.Millisecond) // sent and acked: a batch each
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			waited := make(chan error, 1)
			go func() { waited <- p.mem.Acquire(ctx, 4000) }() // as Produce does
			time.Sleep(10 * time.Second)                       // every batch acked and queued
			require.Greater(t, p.mem.Held()+4000, int64(8192), "the acquire waits")
			l0 := p.s.probe.loops.Load()
			time.Sleep(time.Minute)
			memory = p.s.probe.loops.Load() - l0
			cancel()
			require.ErrorIs(t, <-waited, context.Canceled, "it waited for the whole minute")
		})
	})

	t.Run("inflight", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			c, n := memCluster(t, broker.Config{Topics: []broker.TopicConfig{{Name: "t", Partitions: 1}, {Name: "u", Partitions: 1}}})
			p := memProducer(t, c, n, RequestTimeout(10*time.Minute), DeliveryTimeout(20*time.Minute), MaxBlock(20*time.Minute))
			require.NoError(t, p.ProduceSync(context.Background(), toPartition("t", 0, []byte("v"))).FirstErr())
			time.Sleep(time.Second)
			c.Stall(0, 5*time.Minute)
			m0 := c.MetadataRequests()
			done := make(chan error, 1)
			p.Produce(context.Background(), &Record{Topic: "u", Value: []byte("v")}, func(_ *Record, err error) { done <- err })
			time.Sleep(10 * time.Second)
			l0 := p.s.probe.loops.Load()
			time.Sleep(time.Minute)
			inflight = p.s.probe.loops.Load() - l0
			require.Zero(t, c.MetadataRequests()-m0, "the refresh asking for u waits in the stalled broker")
			select {
			case err := <-done:
				require.NoError(t, err, "u's record, once the stall ends")
			case <-time.After(10 * time.Minute):
				t.Fatal("u's record got no outcome")
			}
			require.Equal(t, int64(1), c.MetadataRequests()-m0, "one refresh: the one that was in flight")
		})
	})

	t.Run("backoff", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			c, n := memCluster(t, broker.Config{Topics: []broker.TopicConfig{{Name: "t", Partitions: 2}}})
			p := memProducer(t, c, n, RetryBackoff(5*time.Second), RetryBackoffMax(5*time.Second),
				DeliveryTimeout(20*time.Minute), RequestTimeout(time.Minute))
			require.NoError(t, p.ProduceSync(context.Background(), toPartition("t", 1, []byte("v"))).FirstErr())
			c.RewriteMetadata(func(resp *kmsg.MetadataResponse) {
				for i := range resp.Topics {
					for j := range resp.Topics[i].Partitions {
						if resp.Topics[i].Partitions[j].Partition == 0 {
							resp.Topics[i].Partitions[j].Leader = -1
						}
					}
				}
			})
			p.s.wantMetadata()
			time.Sleep(10 * time.Second)
			p.Produce(context.Background(), toPartition("t", 0, []byte("v")), nil)
			time.Sleep(10 * time.Second)
			l0, m0 := p.s.probe.loops.Load(), c.MetadataRequests()
			time.Sleep(time.Minute)
			backoff, refreshes = p.s.probe.loops.Load()-l0, c.MetadataRequests()-m0
			c.RewriteMetadata(nil)
		})
	})
	t.Logf("sender loop iterations in a minute: memory wait %d, refresh in flight %d, refreshes backing off %d (%d refreshes)",
		memory, inflight, backoff, refreshes)
	return memory, inflight, backoff, refreshes
}

// TestSenderSleepsWhileStuck: in each stuck state the sender wakes only
// for what is due: a few times a minute (metadata.max.age.ms, delivery
// and metadata timers), or a few times per metadata refresh while
// refreshes back off. Negative control: at commit 1a00859 (knob idleTick, a
// sender that wakes once a second whatever is due),
// TestSenderSleepsWhileStuckNegativeControl.
func TestSenderSleepsWhileStuck(t *testing.T) {
	memory, inflight, backoff, refreshes := stuckLoops(t)
	require.LessOrEqual(t, memory, int64(3), "while a Produce waits for memory held behind a blocked callback")
	require.LessOrEqual(t, inflight, int64(3), "while a metadata refresh is in flight")
	require.Positive(t, refreshes)
	require.LessOrEqual(t, backoff, 3*refreshes+3, "while metadata refreshes back off")
}
