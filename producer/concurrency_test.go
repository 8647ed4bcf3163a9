package producer

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-kafka/longhaul/internal/broker"
	"github.com/longhaul-kafka/longhaul/internal/testkit"
)

// Produce, Flush and Close from many goroutines at once, under -race.

// outcomes counts callbacks per record value.
type outcomes struct {
	mu    sync.Mutex
	calls map[string]int
	errs  map[string]error
	acked map[string]*Record
	wg    sync.WaitGroup
}

func newOutcomes() *outcomes {
	return &outcomes{calls: map[string]int{}, errs: map[string]error{}, acked: map[string]*Record{}}
}

func (o *outcomes) cb(key string) Callback {
	o.wg.Add(1)
	return func(r *Record, err error) {
		o.mu.Lock()
		o.calls[key]++
		if err != nil {
			o.errs[key] = err
		} else {
			o.acked[key] = r
		}
		first := o.calls[key] == 1
		o.mu.Unlock()
		if first {
			o.wg.Done()
		}
	}
}

// waitAll waits for one callback per record, failing the test after a
// generous deadline instead of hanging.
func (o *outcomes) waitAll(t *testing.T) {
	t.Helper()
	done := make(chan struct{})
	go func() { o.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		t.Fatal("callbacks missing after 2 minutes")
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	for k, n := range o.calls {
		if n != 1 {
			t.Errorf("record %s: callback ran %d times", k, n)
		}
	}
}

// checkAgainstLog checks acked records are in the log once at their offset,
// and failed records are not in the log unless their fate is unknown.
func (o *outcomes) checkAgainstLog(t *testing.T, c *broker.Cluster, topic string, partitions int32) {
	t.Helper()
	o.mu.Lock()
	defer o.mu.Unlock()
	seen := map[string]int{}
	for part := range partitions {
		for _, lr := range c.Records(topic, part) {
			k := string(lr.Value)
			seen[k]++
			if seen[k] == 2 {
				t.Errorf("%s in the log twice", k)
			}
			if r := o.acked[k]; r != nil && (r.Partition() != part || r.Offset != lr.Offset) {
				t.Errorf("%s: callback said %d@%d, log has %d@%d", k, r.Partition(), r.Offset, part, lr.Offset)
			}
			if err := o.errs[k]; err != nil && !IsFateUnknown(err) {
				t.Errorf("%s failed without FateUnknown (%v) but is in the log", k, err)
			}
		}
	}
	for k := range o.acked {
		if seen[k] == 0 {
			t.Errorf("%s acknowledged but not in the log", k)
		}
	}
}

func TestConcurrentProduceFlushClose(t *testing.T) {
	before := runtime.NumGoroutine()
	c := startCluster(t, broker.Config{Nodes: 2, RTT: 5 * time.Millisecond,
		Topics: []broker.TopicConfig{{Name: "t", Partitions: 4, Window: 20}}})
	p, err := New(BootstrapServers(c.Addr()), Linger(time.Millisecond), BatchSize(1024),
		MaxInFlightRequestsPerConnection(20), BufferMemory(64<<10), MaxRequestSize(64<<10))
	if err != nil {
		t.Fatal(err)
	}
	o := newOutcomes()
	const producers, perProducer = 16, 400
	var wg sync.WaitGroup
	var closed atomic.Bool
	var afterClose atomic.Int64 // records produced after a Close returned
	// The closers start once a record is acknowledged, so Close always
	// races records in flight: a fixed sleep let a starved process close
	// before any Produce had run, and every record failed with ErrClosed.
	firstAck := make(chan struct{})
	var firstAckOnce sync.Once
	for g := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perProducer {
				k := fmt.Sprintf("g%02d-%04d", g, i)
				r := &Record{Topic: "t", Key: []byte(k[:3]), Value: []byte(k)}
				wasClosed := closed.Load()
				cb := o.cb(k)
				p.Produce(context.Background(), r, func(r *Record, err error) {
					if err == nil {
						firstAckOnce.Do(func() { close(firstAck) })
					}
					cb(r, err)
				})
				if wasClosed {
					afterClose.Add(1)
				}
				if i%50 == 0 {
					runtime.Gosched()
				}
			}
		}()
	}
	// Flush waits only for records produced before it, so it returns under
	// the producers' steady load (and at once after Close).
	flushErrs := make(chan error, 4*20)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				flushErrs <- p.Flush(ctx)
				cancel()
			}
		}()
	}
	// Three closers race each other and the producers, once records flow.
	var closers sync.WaitGroup
	closeErrs := make([]error, 3)
	for i := range 3 {
		closers.Add(1)
		go func() {
			defer closers.Done()
			select {
			case <-firstAck:
			case <-time.After(30 * time.Second): // fails below: nothing acknowledged
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			closeErrs[i] = p.Close(ctx)
			closed.Store(true)
		}()
	}
	closers.Wait()
	wg.Wait()
	close(flushErrs)
	for err := range flushErrs {
		require.NoError(t, err, "Flush under load")
	}
	o.waitAll(t)
	for i, err := range closeErrs {
		if err != nil {
			t.Errorf("Close %d: %v (30 s is ample to flush)", i, err)
		}
	}
	if len(o.calls) != producers*perProducer {
		t.Errorf("%d records called back, want %d", len(o.calls), producers*perProducer)
	}
	nAcked, nClosed := 0, 0
	for k, err := range o.errs {
		if !errors.Is(err, ErrClosed) {
			t.Errorf("%s: %v, want ErrClosed or success", k, err)
		}
		nClosed++
	}
	nAcked = len(o.acked)
	if nAcked == 0 {
		t.Error("nothing acknowledged in 30 s: the race never had records in flight")
	}
	t.Logf("acked %d, failed with ErrClosed %d, produced after a Close returned %d", nAcked, nClosed, afterClose.Load())
	o.checkAgainstLog(t, c, "t", 4)
	c.Close()
	checkNoLeaks(t, before)
}

// TestCloseWithEveryBrokerUnreachable: records are buffered, every broker
// becomes unreachable (closed, or stalled so that even dialing times out),
// and Close with a short context returns an error, having failed every
// pending record with ErrClosed.
func TestCloseWithEveryBrokerUnreachable(t *testing.T) {
	for _, how := range []string{"closed", "stalled"} {
		t.Run(how, func(t *testing.T) {
			before := runtime.NumGoroutine()
			c := testkit.StartCluster(t, broker.Config{Nodes: 2, Topics: []broker.TopicConfig{{Name: "t", Partitions: 2, Window: 20}}})
			p, err := New(BootstrapServers(c.Addrs()...), Linger(time.Millisecond), RequestTimeout(300*time.Millisecond),
				RetryBackoff(10*time.Millisecond), RetryBackoffMax(50*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			// Learn the metadata and connect first.
			if err := p.ProduceSync(context.Background(), &Record{Topic: "t", Value: []byte("warm")}).FirstErr(); err != nil {
				t.Fatal(err)
			}
			switch how {
			case "closed":
				c.Close()
			case "stalled":
				c.Stall(0, time.Hour)
				c.Stall(1, time.Hour)
				c.DropConnections(0) // so new requests must dial, and dials stall
				c.DropConnections(1)
			}
			o := newOutcomes()
			for i := range 500 {
				k := fmt.Sprintf("r%04d", i)
				p.Produce(context.Background(), &Record{Topic: "t", Key: []byte(k), Value: []byte(k)}, o.cb(k))
			}
			ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
			defer cancel()
			closeDone := make(chan error, 1)
			go func() { closeDone <- p.Close(ctx) }()
			select {
			case err = <-closeDone:
			case <-time.After(time.Minute):
				t.Fatal("Close did not return a minute after its 500 ms context expired")
			}
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("Close = %v, want an error wrapping context.DeadlineExceeded", err)
			}
			// Every callback ran before Close returned.
			o.mu.Lock()
			n := len(o.calls)
			o.mu.Unlock()
			if n != 500 {
				t.Errorf("%d of 500 callbacks ran before Close returned", n)
			}
			o.waitAll(t)
			for k, err := range o.errs {
				if !errors.Is(err, ErrClosed) {
					t.Errorf("%s: %v, want ErrClosed", k, err)
				}
			}
			if len(o.acked) > 0 && how == "closed" {
				t.Errorf("%d records acknowledged by a closed cluster", len(o.acked))
			}
			if how == "stalled" {
				c.Close() // ends the stall; connections go
			}
			checkNoLeaks(t, before)
		})
	}
}
