package producer

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/longhaul-kafka/longhaul/internal/broker"
)

// startCluster starts an embedded broker for one test.
func startCluster(t testing.TB, cfg broker.Config) *broker.Cluster {
	t.Helper()
	c, err := broker.Start(cfg)
	if err != nil {
		t.Fatalf("broker.Start: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// newTestProducer returns a producer tuned for tests: short linger and
// backoff, a request timeout short enough that dropped responses are retried
// quickly, and Close at cleanup.
func newTestProducer(t testing.TB, c *broker.Cluster, opts ...Opt) *Producer {
	t.Helper()
	base := []Opt{
		BootstrapServers(c.Addr()),
		Linger(time.Millisecond),
		RetryBackoff(5 * time.Millisecond),
		RetryBackoffMax(50 * time.Millisecond),
		RequestTimeout(10 * time.Second),
		DeliveryTimeout(60 * time.Second),
	}
	p, err := New(append(base, opts...)...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		p.Close(ctx)
	})
	return p
}

// tracker produces numbered records and checks that every callback runs
// exactly once.
type tracker struct {
	t        testing.TB
	mu       sync.Mutex
	calls    map[string]int
	acked    map[string]*Record
	failed   map[string]error
	wg       sync.WaitGroup
	producer string
}

func newTracker(t testing.TB, name string) *tracker {
	return &tracker{t: t, calls: map[string]int{}, acked: map[string]*Record{}, failed: map[string]error{}, producer: name}
}

// value encodes the producer name and a per-partition sequence.
func value(name string, partition int32, seq int, size int) []byte {
	v := make([]byte, max(size, 24))
	copy(v, fmt.Sprintf("%s/%d/%d/", name, partition, seq))
	return v
}

func parseValue(v []byte) (name string, partition int32, seq int, ok bool) {
	parts := strings.SplitN(string(v), "/", 4)
	if len(parts) < 4 {
		return "", 0, 0, false
	}
	var p int
	if _, err := fmt.Sscanf(parts[1]+" "+parts[2], "%d %d", &p, &seq); err != nil {
		return "", 0, 0, false
	}
	return parts[0], int32(p), seq, true
}

// produce sends n records to topic/partition with sequence numbers from
// start, asynchronously.
func (tr *tracker) produce(p *Producer, topic string, partition int32, start, n, size int) {
	for i := start; i < start+n; i++ {
		r := &Record{Topic: topic, Value: value(tr.producer, partition, i, size)}
		r.SetPartition(partition)
		key := topic + ":" + string(r.Value[:24])
		tr.wg.Add(1)
		p.Produce(context.Background(), r, func(r *Record, err error) {
			tr.mu.Lock()
			tr.calls[key]++
			if err != nil {
				tr.failed[key] = err
			} else {
				tr.acked[key] = r
			}
			tr.mu.Unlock()
			tr.wg.Done()
		})
	}
}

func (tr *tracker) wait() {
	tr.t.Helper()
	done := make(chan struct{})
	go func() { tr.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		tr.t.Fatal("callbacks did not all run within 2 minutes")
	}
	for k, n := range tr.calls {
		if n != 1 {
			tr.t.Errorf("record %q: callback ran %d times", k, n)
		}
	}
}

// logCheck is what reading a partition back found.
type logCheck struct {
	lost, dup, reorder int
	problems           []string
}

func (lc logCheck) ok() bool { return lc.lost == 0 && lc.dup == 0 && lc.reorder == 0 }

// checkLog reads topic/partition from the broker and checks the tracker's
// acknowledged records are there exactly once, in produce order, at the
// offsets their callbacks reported; failed records must not be there twice.
func (tr *tracker) checkLog(c *broker.Cluster, topic string, partition int32) logCheck {
	var lc logCheck
	seen := map[string]int{}
	last := -1
	for _, rec := range c.Records(topic, partition) {
		name, part, seq, ok := parseValue(rec.Value)
		if !ok || name != tr.producer || part != partition {
			continue
		}
		key := topic + ":" + string(rec.Value[:24])
		seen[key]++
		if seen[key] > 1 {
			lc.dup++
			lc.problems = append(lc.problems, fmt.Sprintf("duplicate %s at offset %d", key, rec.Offset))
			continue
		}
		if seq <= last {
			lc.reorder++
			lc.problems = append(lc.problems, fmt.Sprintf("%s at offset %d after seq %d", key, rec.Offset, last))
		}
		last = seq
		if r := tr.acked[key]; r != nil && r.Offset >= 0 && r.Offset != rec.Offset {
			lc.problems = append(lc.problems, fmt.Sprintf("%s: callback said offset %d, log has %d", key, r.Offset, rec.Offset))
		}
	}
	for key, r := range tr.acked {
		if r.Partition() == partition && r.Topic == topic && seen[key] == 0 {
			lc.lost++
			lc.problems = append(lc.problems, "acknowledged but not in log: "+key)
		}
	}
	return lc
}

func (tr *tracker) requireClean(t testing.TB, c *broker.Cluster, topic string, partitions ...int32) {
	t.Helper()
	for _, part := range partitions {
		lc := tr.checkLog(c, topic, part)
		if !lc.ok() || len(lc.problems) > 0 {
			t.Errorf("%s[%d]: lost=%d dup=%d reorder=%d: %v", topic, part, lc.lost, lc.dup, lc.reorder, first(lc.problems, 5))
		}
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	for k, err := range tr.failed {
		t.Errorf("record %s failed: %v", k, err)
	}
}

func first(s []string, n int) []string { return s[:min(n, len(s))] }

// waitFor polls cond until it holds or a generous deadline passes.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// checkNoLeaks fails if goroutines started during the test are still
// running after cleanup-sensitive code, allowing a moment to wind down.
func checkNoLeaks(t testing.TB, before int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		buf := make([]byte, 1<<16)
		buf = buf[:runtime.Stack(buf, true)]
		t.Errorf("%d goroutines left (had %d):\n%s", n, before, buf)
	}
}
