package producer

import (
	"bytes"
	"context"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/longhaul-kafka/longhaul/internal/broker"
	"github.com/longhaul-kafka/longhaul/internal/logcheck"
	"github.com/longhaul-kafka/longhaul/internal/memnet"
	"github.com/longhaul-kafka/longhaul/internal/testkit"
)

// startCluster starts an embedded broker for one test.
var startCluster = testkit.StartCluster

// memNets maps each cluster virtualCluster started to its in-memory
// network, so that newTestProducer dials it there.
var memNets sync.Map // *broker.Cluster -> *memnet.Network

// virtualCluster starts an embedded broker on an in-memory network for a
// test that runs in a synctest bubble: newTestProducer dials it there, so
// the test's timeouts, backoffs and link delays run on virtual time.
func virtualCluster(t testing.TB, cfg broker.Config) *broker.Cluster {
	t.Helper()
	c, n := memCluster(t, cfg)
	memNets.Store(c, n)
	t.Cleanup(func() { memNets.Delete(c) })
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
		optFunc(func(c *config) error { c.probe = new(senderProbe); return nil }),
	}
	if n, ok := memNets.Load(c); ok {
		base = append(base, Dialer(n.(*memnet.Network).Dial))
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
	produced map[string]bool // every key passed to Produce
}

func newTracker(t testing.TB, name string) *tracker {
	return &tracker{t: t, calls: map[string]int{}, acked: map[string]*Record{}, failed: map[string]error{}, producer: name, produced: map[string]bool{}}
}

// value encodes the producer name and a per-partition sequence
// (testkit.Value with id "name/partition"), at least 24 bytes: the
// tracker keys records by their first 24.
func value(name string, partition int32, seq int, size int) []byte {
	return testkit.Value(name+"/"+strconv.Itoa(int(partition)), uint64(seq), max(size, 24))
}

// toPartition returns a record of value for topic's partition part.
func toPartition(topic string, part int32, value []byte) *Record {
	r := &Record{Topic: topic, Value: value}
	r.SetPartition(part)
	return r
}

// parseValue is value's inverse.
func parseValue(v []byte) (name string, partition int32, seq int, ok bool) {
	id, s, _, ok := testkit.ParseValue(v)
	i := bytes.LastIndexByte(id, '/')
	if !ok || i < 1 {
		return "", 0, 0, false
	}
	p, err := strconv.ParseInt(string(id[i+1:]), 10, 32)
	if err != nil {
		return "", 0, 0, false
	}
	return string(id[:i]), int32(p), int(s), true
}

// produce sends n records to topic/partition with sequence numbers from
// start, asynchronously.
func (tr *tracker) produce(p *Producer, topic string, partition int32, start, n, size int) {
	for i := start; i < start+n; i++ {
		r := &Record{Topic: topic, Value: value(tr.producer, partition, i, size)}
		r.SetPartition(partition)
		key := topic + ":" + string(r.Value[:24])
		tr.mu.Lock()
		tr.produced[key] = true
		tr.mu.Unlock()
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

// checkLog reads topic/partition from the broker and checks, by
// logcheck's rules, that the tracker's acknowledged records are there
// exactly once, in produce order, at the offsets their callbacks reported;
// failed records (and any still without a callback) may be there once.
func (tr *tracker) checkLog(c *broker.Cluster, topic string, partition int32) logCheck {
	tr.mu.Lock()
	type numbered struct {
		key string
		seq int
	}
	var ours []numbered
	for key := range tr.produced {
		v := []byte(strings.TrimPrefix(key, topic+":"))
		if name, part, seq, ok := parseValue(v); ok && len(v) < len(key) && name == tr.producer && part == partition {
			ours = append(ours, numbered{key, seq})
		}
	}
	sort.Slice(ours, func(i, j int) bool { return ours[i].seq < ours[j].seq })
	sent := make([]logcheck.Sent, len(ours))
	for i, n := range ours {
		sent[i] = logcheck.Sent{Value: []byte(n.key), Outcome: logcheck.FateUnknown}
		if r := tr.acked[n.key]; r != nil {
			sent[i].Outcome = logcheck.Acked
			sent[i].Offset, sent[i].HasOffset = r.Offset, r.Offset >= 0
		}
	}
	tr.mu.Unlock()
	var log []logcheck.Entry
	for _, rec := range c.Records(topic, partition) {
		name, part, _, ok := parseValue(rec.Value)
		if !ok || name != tr.producer || part != partition {
			continue
		}
		log = append(log, logcheck.Entry{Value: []byte(topic + ":" + string(rec.Value[:24])), Offset: rec.Offset})
	}
	r := logcheck.Stream(sent, log)
	return logCheck{lost: r.Count(logcheck.Lost), dup: r.Count(logcheck.Duplicate), reorder: r.Count(logcheck.Reorder), problems: r.Messages()}
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
var checkNoLeaks = testkit.CheckNoLeaks
