package producer

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/longhaul-kafka/longhaul/internal/broker"
)

// senderTurns waits until the sender goroutine has run its loop n full
// times after this call (each turn runs events, then seals and sends).
func senderTurns(p *Producer, n int) {
	for range n {
		ran := make(chan struct{})
		p.post(func() { close(ran) })
		<-ran
	}
}

// TestFlushUnderSteadyLoad: while other goroutines produce without pause,
// Flush returns nil, and by then every record produced before the call
// has been called back.
func TestFlushUnderSteadyLoad(t *testing.T) {
	t.Parallel()
	c := startCluster(t, broker.Config{Nodes: 1, Topics: []broker.TopicConfig{{Name: "t", Partitions: 4, Window: 20}}})
	p := newTestProducer(t, c, Linger(5*time.Millisecond))
	stop := make(chan struct{})
	var load sync.WaitGroup
	var loadCalls atomic.Int64
	for g := range 4 {
		load.Add(1)
		go func() {
			defer load.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				p.Produce(context.Background(), &Record{Topic: "t", Value: fmt.Appendf(nil, "load-%d-%d", g, i)},
					func(*Record, error) { loadCalls.Add(1) })
			}
		}()
	}
	defer func() { close(stop); load.Wait() }()
	waitFor(t, "load records called back", func() bool { return loadCalls.Load() > 100 })

	for round := range 3 {
		var mine atomic.Int64
		for i := range 100 {
			p.Produce(context.Background(), &Record{Topic: "t", Value: fmt.Appendf(nil, "mine-%d-%d", round, i)},
				func(_ *Record, err error) {
					assert.NoError(t, err)
					mine.Add(1)
				})
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		err := p.Flush(ctx)
		cancel()
		require.NoError(t, err, "round %d: Flush must return under steady load", round)
		assert.Equal(t, int64(100), mine.Load(), "round %d: records produced before Flush called back when it returns", round)
	}
}

// TestFlushKeepsLingerForLaterRecords: a record produced while a Flush
// waits is not sent at once: it lingers in its open batch, as without
// Flush. The Flush is kept waiting by a callback that blocks.
func TestFlushKeepsLingerForLaterRecords(t *testing.T) {
	c := startCluster(t, broker.Config{Nodes: 1, Topics: []broker.TopicConfig{{Name: "t", Partitions: 1}}})
	p := newTestProducer(t, c, Linger(time.Hour), DeliveryTimeout(2*time.Hour))
	release := make(chan struct{})
	entered := make(chan struct{})
	first := &Record{Topic: "t", Value: []byte("first")}
	first.SetPartition(0)
	p.Produce(context.Background(), first, func(_ *Record, err error) {
		assert.NoError(t, err)
		close(entered)
		<-release
	})
	flushed := make(chan error, 1)
	go func() { flushed <- p.Flush(context.Background()) }()
	<-entered // first was sent at once despite linger.ms=1h: Flush sealed it

	later := &Record{Topic: "t", Value: []byte("later")}
	later.SetPartition(0)
	laterDone := make(chan error, 1)
	p.Produce(context.Background(), later, func(_ *Record, err error) { laterDone <- err })
	senderTurns(p, 3)
	p.acc.mu.Lock()
	pb := p.acc.topics["t"].bufs[0]
	lingering := pb.open != nil && len(pb.open.records) == 1 && pb.open.records[0].rec == later
	p.acc.mu.Unlock()
	assert.True(t, lingering, "a record produced after Flush was called must linger in its open batch")

	close(release)
	require.NoError(t, <-flushed)
	select {
	case err := <-laterDone:
		t.Fatalf("the later record was called back (%v) although it should still linger", err)
	default:
	}
	require.NoError(t, p.Flush(context.Background()))
	require.NoError(t, <-laterDone)
}

// TestFlushWaitsForWaitingRecords: records that wait for their topic's
// partitions when Flush is called are sent without waiting for linger.ms
// once the partitions are known, and Flush returns after their callbacks.
func TestFlushWaitsForWaitingRecords(t *testing.T) {
	c := startCluster(t, broker.Config{Nodes: 1, Topics: []broker.TopicConfig{{Name: "t", Partitions: 1}}})
	p := newTestProducer(t, c, Linger(time.Hour), DeliveryTimeout(2*time.Hour))
	var done atomic.Int64
	for range 5 {
		p.Produce(context.Background(), &Record{Topic: "t", Value: []byte("v")}, func(_ *Record, err error) {
			assert.NoError(t, err)
			done.Add(1)
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, p.Flush(ctx))
	assert.Equal(t, int64(5), done.Load())
	assert.Len(t, c.Records("t", 0), 5)
}

// TestFlushCancelStopsTheWaitOnly: Flush returns ctx's error when ctx ends
// first, and the records it waited for are still delivered.
func TestFlushCancelStopsTheWaitOnly(t *testing.T) {
	t.Parallel()
	c := startCluster(t, broker.Config{Nodes: 1, Topics: []broker.TopicConfig{{Name: "t", Partitions: 1}}})
	p := newTestProducer(t, c)
	require.NoError(t, produceOne(t, p, &Record{Topic: "t", Value: []byte("warm")}))
	c.Stall(0, 300*time.Millisecond)
	got := make(chan error, 1)
	p.Produce(context.Background(), &Record{Topic: "t", Value: []byte("v")}, func(_ *Record, err error) { got <- err })
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := p.Flush(ctx)
	require.ErrorIs(t, err, context.Canceled)
	require.NoError(t, <-got)
	assert.Len(t, c.Records("t", 0), 2)
}

// TestWaitingCallsFromACallback: Flush, ProduceSync and Close called from a
// record callback return ErrInCallback instead of deadlocking, and the
// producer keeps working (Close still closes it afterwards).
func TestWaitingCallsFromACallback(t *testing.T) {
	c := startCluster(t, broker.Config{Nodes: 1, Topics: []broker.TopicConfig{{Name: "t", Partitions: 1}}})
	p := newTestProducer(t, c)
	type calls struct{ flush, sync, close error }
	got := make(chan calls, 1)
	p.Produce(context.Background(), &Record{Topic: "t", Value: []byte("v")}, func(*Record, error) {
		var cs calls
		cs.flush = p.Flush(context.Background())
		cs.sync = p.ProduceSync(context.Background(), &Record{Topic: "t", Value: []byte("inner")}).FirstErr()
		cs.close = p.Close(context.Background())
		got <- cs
	})
	var cs calls
	select {
	case cs = <-got:
	case <-time.After(time.Minute):
		t.Fatal("a callback calling Flush, ProduceSync or Close deadlocked")
	}
	assert.ErrorIs(t, cs.flush, ErrInCallback)
	assert.ErrorIs(t, cs.sync, ErrInCallback)
	assert.ErrorIs(t, cs.close, ErrInCallback)
	require.NoError(t, produceOne(t, p, &Record{Topic: "t", Value: []byte("after")}), "Close from the callback did not close")
	// From any other goroutine the same calls work while callbacks run.
	require.NoError(t, p.Flush(context.Background()))
	require.NoError(t, p.Close(context.Background()))
	assert.Len(t, c.Records("t", 0), 2, "the ProduceSync refused in the callback sent nothing")
}

// TestCloseTwice: a second Close while the first waits returns ctx's error
// when its ctx ends first, and nil once the first has returned; a Close
// after that returns nil at once. Records produced after Close fail with
// ErrClosed.
func TestCloseTwice(t *testing.T) {
	c := startCluster(t, broker.Config{Nodes: 1, Topics: []broker.TopicConfig{{Name: "t", Partitions: 1}}})
	p := newTestProducer(t, c)
	release := make(chan struct{})
	entered := make(chan struct{})
	p.Produce(context.Background(), &Record{Topic: "t", Value: []byte("v")}, func(*Record, error) {
		close(entered)
		<-release
	})
	firstDone := make(chan error, 1)
	go func() { firstDone <- p.Close(context.Background()) }()
	<-entered
	waitFor(t, "the first Close to start", func() bool { return p.closing.Load() })

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	second := make(chan error, 1)
	go func() { second <- p.Close(ctx) }()
	select {
	case err := <-second:
		assert.ErrorIs(t, err, context.DeadlineExceeded)
	case <-time.After(time.Minute):
		t.Fatal("a second Close ignored its context while the first waited")
	}
	cancel()

	third := make(chan error, 1)
	go func() { third <- p.Close(context.Background()) }()
	close(release)
	require.NoError(t, <-firstDone)
	require.NoError(t, <-third)
	require.NoError(t, p.Close(context.Background()))
	assert.ErrorIs(t, produceOne(t, p, &Record{Topic: "t", Value: []byte("late")}), ErrClosed)
}
