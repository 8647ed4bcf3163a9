package producer

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-kafka/longhaul/internal/broker"
)

// TestBufferMemoryHeldUntilCallbacksRan: records acknowledged by the broker
// keep their buffer.memory until their callbacks have run, so a slow
// callback makes Produce block instead of letting memory grow past
// buffer.memory (issue 20, item 5).
func TestBufferMemoryHeldUntilCallbacksRan(t *testing.T) {
	c := startCluster(t, broker.Config{Topics: []broker.TopicConfig{{Name: "t", Partitions: 1}}})
	const budget = 64 << 10
	p := newTestProducer(t, c, BufferMemory(budget), MaxRequestSize(32<<10), BatchSize(4096))
	// The topic known first: records waiting for metadata hold more
	// (waitingExtra), and 40 would not fit.
	require.NoError(t, p.ProduceSync(context.Background(), &Record{Topic: "t", Value: []byte("warm")}).FirstErr())
	release := make(chan struct{})
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	t.Cleanup(unblock) // runs before the producer's Close, even on failure
	first := true
	var errMu sync.Mutex
	var errs []error // a refusal (ErrBufferFull) would leave the broker short of n
	cb := func(_ *Record, err error) {
		if err != nil {
			errMu.Lock()
			errs = append(errs, err)
			errMu.Unlock()
		}
		if first {
			first = false
			<-release // a slow callback holds up the ones behind it
		}
	}
	const n = 40
	for i := range n {
		p.TryProduce(&Record{Topic: "t", Value: make([]byte, 1000), Key: []byte{byte(i)}}, cb)
	}
	waitFor(t, "the broker to hold every record", func() bool {
		errMu.Lock()
		defer errMu.Unlock()
		require.Empty(t, errs, "40 records of 1 KB in 4 KiB batches (about 42 KiB) fit buffer.memory; held %d", p.mem.Held())
		return len(c.Records("t", 0)) == 1+n
	})
	require.False(t, p.mem.TryAcquire(budget), "acked records waiting for their callbacks must still hold buffer.memory")
	unblock()
	require.NoError(t, p.Flush(context.Background()))
	require.True(t, p.mem.TryAcquire(budget), "after the callbacks ran, all of buffer.memory is free")
	p.mem.Release(budget)
}

// TestTooLargeBatchIsSplit: a batch the broker refuses as MESSAGE_TOO_LARGE
// is split into halves with the same sequence range until each fits; no
// record fails, no epoch bump, and the log is exactly once in order.
func TestTooLargeBatchIsSplit(t *testing.T) {
	c := startCluster(t, broker.Config{RTT: 5 * time.Millisecond,
		Topics: []broker.TopicConfig{{Name: "t", Partitions: 1, Window: 20}}})
	p := newTestProducer(t, c, BatchSize(16<<10), Linger(20*time.Millisecond), MaxInFlightRequestsPerConnection(20))
	tr := newTracker(t, "a")
	tr.produce(p, "t", 0, 0, 200, 100)
	tr.wait()
	// The next two batches are refused whole; their halves go through.
	c.InjectError("t", 0, 10 /* MESSAGE_TOO_LARGE */, 2)
	tr.produce(p, "t", 0, 200, 400, 100)
	tr.wait()
	tr.requireClean(t, c, "t", 0)
	require.Empty(t, tr.failed)
	require.Zero(t, p.s.bumps.Load(), "a split keeps the sequence range: no bump")
}
