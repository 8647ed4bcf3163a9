package producer

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/longhaul-kafka/longhaul/internal/broker"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestOversizedRecordFailsAlone(t *testing.T) {
	c := startCluster(t, broker.Config{Topics: []broker.TopicConfig{{Name: "t", Partitions: 1}}})
	p := newTestProducer(t, c, MaxRequestSize(10_000))
	big := &Record{Topic: "t", Value: make([]byte, 20_000)}
	err := p.ProduceSync(t.Context(), big).FirstErr()
	if !errors.Is(err, ErrRecordTooLarge) {
		t.Fatalf("oversized record: %v, want ErrRecordTooLarge", err)
	}
	small := &Record{Topic: "t", Value: []byte("fine")}
	if err := p.ProduceSync(t.Context(), small).FirstErr(); err != nil {
		t.Fatalf("producer stopped working after an oversized record: %v", err)
	}
	if small.Offset != 0 {
		t.Errorf("offset %d, want 0: the oversized record must not be in the log", small.Offset)
	}
}

func TestUnknownTopicFailsWithinDeliveryTimeout(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		c := virtualCluster(t, broker.Config{})
		p := newTestProducer(t, c, DeliveryTimeout(1500*time.Millisecond), RequestTimeout(time.Second), Linger(0))
		start := time.Now()
		err := p.ProduceSync(t.Context(), &Record{Topic: "missing", Value: []byte("x")}).FirstErr()
		if !errors.Is(err, ErrDeliveryTimeout) || !strings.Contains(err.Error(), "UNKNOWN_TOPIC_OR_PARTITION") {
			t.Fatalf("got %v, want a delivery timeout naming UNKNOWN_TOPIC_OR_PARTITION", err)
		}
		if IsFateUnknown(err) {
			t.Error("a record that never left must not be marked fate unknown")
		}
		t.Logf("failed after %v", time.Since(start).Round(time.Millisecond))
	})
}

func TestProduceAfterClose(t *testing.T) {
	c := startCluster(t, broker.Config{Topics: []broker.TopicConfig{{Name: "t", Partitions: 1}}})
	p := newTestProducer(t, c)
	if err := p.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	err := p.ProduceSync(t.Context(), &Record{Topic: "t", Value: []byte("late")}).FirstErr()
	if !errors.Is(err, ErrClosed) {
		t.Fatalf("got %v, want ErrClosed", err)
	}
	if len(c.Records("t", 0)) != 0 {
		t.Error("a record produced after Close reached the log")
	}
}

func TestInvalidRecords(t *testing.T) {
	c := startCluster(t, broker.Config{Topics: []broker.TopicConfig{{Name: "t", Partitions: 2}}})
	p := newTestProducer(t, c)
	if err := p.ProduceSync(t.Context(), &Record{Value: []byte("no topic")}).FirstErr(); !errors.Is(err, ErrInvalidRecord) {
		t.Errorf("empty topic: %v", err)
	}
	r := &Record{Topic: "t"}
	r.SetPartition(7)
	if err := p.ProduceSync(t.Context(), r).FirstErr(); !errors.Is(err, ErrInvalidRecord) {
		t.Errorf("partition 7 of 2: %v", err)
	}
	errc := make(chan error, 1)
	p.Produce(t.Context(), nil, func(_ *Record, err error) { errc <- err })
	if got := <-errc; !errors.Is(got, ErrInvalidRecord) {
		t.Errorf("nil record: %v", got)
	}
}

func TestPartitionZeroValueIsNotPartitionZero(t *testing.T) {
	c := startCluster(t, broker.Config{Topics: []broker.TopicConfig{{Name: "t", Partitions: 8}}})
	p := newTestProducer(t, c)
	seen := map[int32]bool{}
	for i := range 64 {
		r := &Record{Topic: "t", Key: []byte{byte(i)}, Value: []byte("v")}
		if err := p.ProduceSync(t.Context(), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if r.Partition() != keyPartition(r.Key, 8) {
			t.Fatalf("key %d went to %d, want murmur2's %d", i, r.Partition(), keyPartition(r.Key, 8))
		}
		seen[r.Partition()] = true
	}
	if len(seen) < 4 {
		t.Errorf("64 keys used only partitions %v: zero-value Partition was taken as a choice", seen)
	}
}

func TestCancelWhileBlockedOnBufferMemory(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		c := virtualCluster(t, broker.Config{Topics: []broker.TopicConfig{{Name: "t", Partitions: 1}}})
		c.Stall(0, 3*time.Second) // nothing drains the buffer meanwhile
		p := newTestProducer(t, c, BufferMemory(4096), MaxRequestSize(4096), BatchSize(1024))
		var wg sync.WaitGroup
		fits := 4096 / recordMemory(&Record{Topic: "t", Value: make([]byte, 500)})
		for range fits {
			wg.Add(1)
			p.TryProduce(&Record{Topic: "t", Value: make([]byte, 500)}, func(*Record, error) { wg.Done() })
		}
		full := make(chan error, 1)
		p.TryProduce(&Record{Topic: "t", Value: make([]byte, 500)}, func(_ *Record, err error) { full <- err })
		if err := <-full; !errors.Is(err, ErrBufferFull) {
			t.Fatalf("TryProduce past buffer.memory: %v, want ErrBufferFull", err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		result := make(chan error, 1)
		go p.Produce(ctx, &Record{Topic: "t", Value: make([]byte, 500)}, func(_ *Record, err error) { result <- err })
		cancel()
		err := <-result
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("blocked Produce after cancel: %v, want context.Canceled", err)
		}
		wg.Wait()
	})
}

func TestNoGoroutinesLeftAfterClose(t *testing.T) {
	c := startCluster(t, broker.Config{Nodes: 2, Topics: []broker.TopicConfig{{Name: "t", Partitions: 4}}})
	before := runtime.NumGoroutine()
	p, err := New(BootstrapServers(c.Addr()), Linger(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	tr := newTracker(t, "a")
	for part := int32(0); part < 4; part++ {
		tr.produce(p, "t", part, 0, 100, 50)
	}
	tr.wait()
	if err := p.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	checkNoLeaks(t, before)
}

func TestCloseWithUnreachableBrokersFailsPending(t *testing.T) {
	t.Parallel()
	c := startCluster(t, broker.Config{Topics: []broker.TopicConfig{{Name: "t", Partitions: 1}}})
	p := newTestProducer(t, c)
	if err := p.ProduceSync(t.Context(), &Record{Topic: "t", Value: []byte("warm")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	c.Close()
	tr := newTracker(t, "a")
	tr.produce(p, "t", 0, 0, 50, 10)
	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := p.Close(ctx)
	if err == nil {
		t.Fatal("Close with unreachable brokers and pending records returned nil")
	}
	tr.wait()
	if len(tr.failed) != 50 {
		t.Fatalf("%d of 50 pending records failed", len(tr.failed))
	}
	for _, err := range tr.failed {
		if !errors.Is(err, ErrClosed) {
			t.Fatalf("pending record failed with %v, want ErrClosed", err)
		}
	}
	t.Logf("Close returned after %v", time.Since(start).Round(time.Millisecond))
}

// TestNilContextPanics: Produce, ProduceSync and Flush panic at once on a
// nil ctx, with a message naming it, before taking any record or sealing
// any batch (the docs' promise); the producer goes on as before.
func TestNilContextPanics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, n := memCluster(t, broker.Config{Topics: []broker.TopicConfig{{Name: "t", Partitions: 1}}})
		p := memProducer(t, c, n)
		var nilCtx context.Context
		called := false
		assert.PanicsWithValue(t, "producer: nil Context", func() {
			p.Produce(nilCtx, &Record{Topic: "t", Value: []byte("a")}, func(*Record, error) { called = true })
		})
		assert.PanicsWithValue(t, "producer: nil Context", func() {
			p.Produce(nilCtx, nil, func(*Record, error) { called = true })
		}, "a nil record too: the context is checked first")
		assert.PanicsWithValue(t, "producer: nil Context", func() {
			p.ProduceSync(nilCtx, &Record{Topic: "t", Value: []byte("b")})
		})
		assert.PanicsWithValue(t, "producer: nil Context", func() { _ = p.Flush(nilCtx) })
		synctest.Wait()
		assert.False(t, called, "no record was taken")
		st := p.Stats()
		assert.Zero(t, st.RecordsSent+st.RecordsFailed+st.BatchesSent)
		require.NoError(t, p.ProduceSync(t.Context(), &Record{Topic: "t", Value: []byte("c")})[0].Err)
		require.NoError(t, p.Flush(t.Context()))
		assert.Len(t, c.Records("t", 0), 1)
	})
}
