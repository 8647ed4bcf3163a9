package producer

// Tests for doc-comment promises of session 4 (and the Stats fields) that
// no other test checked: longhaul.coalesce.requests (default, range, the
// "twice the fastest" test, "this many"), the fields of Stats and
// PartitionStats, the sticky rule for Flush seals, per topic and through
// StickyPartition, and buffer.memory released per completion of a pass of
// callbacks.

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/longhaul-kafka/longhaul/internal/broker"
)

// TestCoalesceRequestsPropertyDefaultAndRange: the documented default of
// longhaul.coalesce.requests is 5 and is what a producer gets; 0 (never)
// and large values are accepted; negative and non-integer values are a
// ConfigError naming the property.
func TestCoalesceRequestsPropertyDefaultAndRange(t *testing.T) {
	const name = "longhaul.coalesce.requests"
	def, ok := PropertyDefault(name)
	require.True(t, ok)
	require.Equal(t, "5", def)
	require.Equal(t, 5, defaultConfig().coalesce)
	require.NotEmpty(t, PropertyDoc(name))
	for _, v := range []string{"0", "1", "2147483647"} {
		c := defaultConfig()
		require.NoError(t, Property(name, v).apply(&c), v)
		want, _ := strconv.Atoi(v)
		require.Equal(t, want, c.coalesce)
	}
	for _, v := range []string{"-1", "many", "2147483648"} {
		_, err := NewFromProperties(map[string]string{"bootstrap.servers": "127.0.0.1:1", name: v})
		var ce *ConfigError
		require.ErrorAs(t, err, &ce, v)
		require.Equal(t, name, ce.Property)
		require.ErrorIs(t, err, ErrInvalidConfig)
	}
}

// holdsAfterSlowdown warms a producer up on 50 partitions over a 10 ms
// round trip (so the connection's fastest answer is 10 ms), then makes the
// broker answer in slow and produces one record to every partition each
// 2 ms for a second. It returns the lingered batches held meanwhile and
// the most requests seen in flight to the node from 200 ms on.
func holdsAfterSlowdown(t *testing.T, slow time.Duration, coalesce int) (holds int64, maxInFlight int) {
	const parts = 50
	synctest.Test(t, func(t *testing.T) {
		c, p := warmOnPartitions(t, parts, coalesce)
		c.SetRTT(0, slow)
		h0 := p.s.holds.Load()
		done := make(chan struct{})
		go func() {
			defer close(done)
			for end := time.Now().Add(time.Second); time.Now().Before(end); time.Sleep(2 * time.Millisecond) {
				for part := range int32(parts) {
					r := &Record{Topic: "t", Value: []byte("thirty bytes of value, roughly")}
					r.SetPartition(part)
					p.Produce(context.Background(), r, nil)
				}
			}
		}()
		// Sampled once the first slow responses are in: until then the
		// node does not look slow, and requests sent at the fast pace
		// are still in flight.
		time.Sleep(200 * time.Millisecond)
		for end := time.Now().Add(800 * time.Millisecond); time.Now().Before(end); time.Sleep(time.Millisecond) {
			maxInFlight = max(maxInFlight, p.Stats().Nodes[0].RequestsInFlight)
		}
		<-done
		holds = p.s.holds.Load() - h0
		require.NoError(t, p.Flush(context.Background()))
	})
	t.Logf("responses in %v, coalesce %d: %d holds, at most %d requests in flight", slow, coalesce, holds, maxInFlight)
	return holds, maxInFlight
}

// TestCoalesceHoldsOnlyPastTwiceTheFastest: a node queues when its latest
// response took more than twice the fastest answer on the connection.
// Responses at 1.5 times the fastest hold nothing, though more than
// longhaul.coalesce.requests (2 here) requests are in flight (the control
// that only the response time stopped the hold); at 2.5 times they are
// held, and at most that many requests are in flight: the limit is the
// property's value, not a fixed 5.
func TestCoalesceHoldsOnlyPastTwiceTheFastest(t *testing.T) {
	holds, inFlight := holdsAfterSlowdown(t, 15*time.Millisecond, 2)
	require.Zero(t, holds, "1.5 times the fastest response")
	require.Greater(t, inFlight, 2, "requests in flight without holding")

	holds, inFlight = holdsAfterSlowdown(t, 25*time.Millisecond, 2)
	require.Positive(t, holds, "2.5 times the fastest response")
	require.LessOrEqual(t, inFlight, 2, "requests in flight while holding, with longhaul.coalesce.requests=2")
}

// TestStatsFieldsMeanWhatTheySay checks the documented meaning of the
// fields of Stats, PartitionStats and NodeStats, and of InFlightLimit,
// against what the producer did: two topics over two nodes, a first batch
// in flight (gated), a batch retried after NOT_ENOUGH_REPLICAS, a record
// failed by the broker after it was accepted, one rejected before (not
// counted), and a partition whose leader metadata does not name.
func TestStatsFieldsMeanWhatTheySay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, n := memCluster(t, broker.Config{Nodes: 2, RTT: 10 * time.Millisecond, Topics: []broker.TopicConfig{
			{Name: "b", Partitions: 3, Window: 10}, {Name: "a", Partitions: 2, Window: 12},
		}})
		c.RewriteMetadata(func(m *kmsg.MetadataResponse) {
			for i := range m.Topics {
				if m.Topics[i].Topic != nil && *m.Topics[i].Topic == "b" {
					for j := range m.Topics[i].Partitions {
						if m.Topics[i].Partitions[j].Partition == 2 {
							m.Topics[i].Partitions[j].Leader = -1
						}
					}
				}
			}
		})
		p := memProducer(t, c, n)
		st := p.Stats()
		require.Equal(t, int64(-1), st.ProducerID, "before InitProducerId answered")
		require.Empty(t, st.Partitions)

		send := func(topic string, part int32) *Record { return toPartition(topic, part, []byte("v")) }
		// A first batch to b/1 (led by node 1): in flight and gated
		// until its answer 10 ms later.
		firstErr := make(chan error, 1)
		p.Produce(context.Background(), send("b", 1), func(_ *Record, err error) { firstErr <- err })
		var inFlight PartitionStats
		for range 100 {
			time.Sleep(time.Millisecond)
			for _, ps := range p.Stats().Partitions {
				if ps.Topic == "b" && ps.Partition == 1 && ps.InFlight > 0 {
					inFlight = ps
				}
			}
			if inFlight.InFlight > 0 {
				break
			}
		}
		require.Equal(t, 1, inFlight.InFlight, "batches in flight now")
		require.True(t, inFlight.Gated, "a first batch: at most one in flight until one is acked")
		require.Equal(t, 5, inFlight.Limit, "5 until learned from a ProduceResponse")
		nodes := p.Stats().Nodes
		require.Len(t, nodes, 2)
		require.Equal(t, 1, nodes[1].RequestsInFlight)
		require.Zero(t, nodes[0].RequestsInFlight)
		require.NoError(t, <-firstErr)

		c.InjectError("a", 0, kerr.NotEnoughReplicas.Code, 1)
		require.NoError(t, p.ProduceSync(context.Background(), send("a", 0)).FirstErr(), "retried")
		c.InjectError("a", 1, kerr.InvalidRecord.Code, 1)
		require.Error(t, p.ProduceSync(context.Background(), send("a", 1)).FirstErr(), "failed by the broker")
		require.ErrorIs(t, p.ProduceSync(context.Background(), &Record{Value: []byte("no topic")}).FirstErr(), ErrInvalidRecord)

		st = p.Stats()
		require.GreaterOrEqual(t, st.ProducerID, int64(0))
		require.Equal(t, int64(2), st.RecordsSent, "records acknowledged: b/1 and a/0")
		require.Equal(t, int64(1), st.RecordsFailed, "the record the broker failed, not the one rejected before")
		require.Equal(t, int64(4), st.BatchesSent, "b/1, a/0 twice, a/1")
		require.Equal(t, int64(1), st.BatchesRetried)

		type key struct {
			topic string
			part  int32
		}
		var order []key
		got := map[key]PartitionStats{}
		for _, ps := range st.Partitions {
			order = append(order, key{ps.Topic, ps.Partition})
			got[key{ps.Topic, ps.Partition}] = ps
		}
		require.Equal(t, []key{{"a", 0}, {"a", 1}, {"b", 0}, {"b", 1}, {"b", 2}}, order, "sorted by topic, then partition")
		for k, ps := range got {
			assert.Zero(t, ps.InFlight, "%v", k)
			acked := k == key{"a", 0} || k == key{"b", 1}
			assert.Equal(t, !acked, ps.Gated, "%v: gated until a batch is acked", k)
			if k.part < 2 || k.topic == "a" {
				assert.Equal(t, k.part%2, ps.Leader, "%v: partition p led by node p%%2", k)
			}
		}
		assert.Equal(t, int32(-1), got[key{"b", 2}].Leader, "leader unknown")
		assert.Equal(t, 12, got[key{"a", 0}].Limit, "the broker's window, once learned")
		assert.Equal(t, 10, got[key{"b", 1}].Limit)
		assert.Equal(t, 5, got[key{"b", 0}].Limit, "never produced to: 5")
		assert.Equal(t, int64(2), got[key{"a", 0}].BatchesSent, "retries included")
		assert.Equal(t, int64(1), got[key{"a", 0}].BatchesRetried)
		assert.Equal(t, int64(1), got[key{"a", 1}].BatchesSent)
		assert.Zero(t, got[key{"a", 1}].BatchesRetried)
		assert.Zero(t, got[key{"b", 0}].BatchesSent)

		require.Len(t, st.Nodes, 2)
		for i, nd := range st.Nodes {
			assert.Equal(t, int32(i), nd.ID, "sorted by id")
			assert.True(t, nd.Connected)
			assert.Zero(t, nd.RequestsInFlight)
		}
		assert.Equal(t, 12, p.InFlightLimit("a", 0))
		assert.Equal(t, 5, p.InFlightLimit("b", 0), "not learned")
		assert.Equal(t, 5, p.InFlightLimit("a", 7), "a partition it does not know")
		assert.Equal(t, 5, p.InFlightLimit("nope", 0), "a topic it does not know")
	})
}

// stickyRuns produces 40 keyless records of 200 bytes one at a time, with
// batch.size 1024, each made to leave its batch by flush (after each
// Produce) and returns the partition of each, topic by topic, alternating
// between topics.
func stickyRuns(t *testing.T, topics []string, flush func(*Producer, *Record), opts ...Opt) map[string][]int32 {
	parts := map[string][]int32{}
	synctest.Test(t, func(t *testing.T) {
		var tcs []broker.TopicConfig
		for _, name := range topics {
			tcs = append(tcs, broker.TopicConfig{Name: name, Partitions: 6, Window: 10})
		}
		c, n := memCluster(t, broker.Config{Topics: tcs})
		p := memProducer(t, c, n, append([]Opt{BatchSize(1024)}, opts...)...)
		for i := range 40 * len(topics) {
			topic := topics[i%len(topics)]
			r := &Record{Topic: topic, Value: make([]byte, 200)}
			flush(p, r)
			parts[topic] = append(parts[topic], r.Partition())
		}
	})
	return parts
}

// produceOneSync produces a record and waits for it: its batch is sealed by
// linger.
func produceOneSync(t *testing.T) func(*Producer, *Record) {
	return func(p *Producer, r *Record) {
		require.NoError(t, p.ProduceSync(context.Background(), r).FirstErr())
	}
}

// runsOf counts the runs of equal partitions in parts.
func runsOf(parts []int32) int {
	runs := 1
	for i := 1; i < len(parts); i++ {
		if parts[i] != parts[i-1] {
			runs++
		}
	}
	return runs
}

// TestStickyPartitionIgnoresFlushSeals: a batch sealed by Flush does not
// move the sticky partition (partitioner.go: "A batch sealed by linger or
// Flush does not move it"): records flushed one by one with a linger of a
// minute stay until batch.size bytes have gone to their partition, as
// with linger seals (TestStickyPartitionIgnoresLingerSeals): 40 records
// of about 210 bytes with batch.size 1024 make 6 to 9 runs, not 40.
func TestStickyPartitionIgnoresFlushSeals(t *testing.T) {
	parts := stickyRuns(t, []string{"t"}, func(p *Producer, r *Record) {
		var done atomic.Bool
		p.Produce(context.Background(), r, func(_ *Record, err error) { assert.NoError(t, err); done.Store(true) })
		require.NoError(t, p.Flush(context.Background()))
		require.True(t, done.Load())
	}, Linger(time.Minute), DeliveryTimeout(2*time.Minute))["t"]
	require.GreaterOrEqual(t, runsOf(parts), 6, "moves on after batch.size bytes: %v", parts)
	require.LessOrEqual(t, runsOf(parts), 9, "a Flush seal moved the partition: %v", parts)
}

// TestStickyPartitionPerTopic: records without a key stick to one
// partition per topic: two topics produced to alternately each keep their
// own sticky partition and move after batch.size bytes went to it there
// (6 to 9 runs of 40 records each), not after the bytes of both topics.
func TestStickyPartitionPerTopic(t *testing.T) {
	for topic, parts := range stickyRuns(t, []string{"x", "y"}, produceOneSync(t)) {
		require.Len(t, parts, 40)
		require.GreaterOrEqual(t, runsOf(parts), 6, "%s: %v", topic, parts)
		require.LessOrEqual(t, runsOf(parts), 9, "%s: %v", topic, parts)
	}
}

// TestStickyPartitionThroughPartitioner: a Partitioner returning
// StickyPartition gets the partition records without a key share, which
// moves after batch.size bytes went to it, not at every linger seal: the
// same 6 to 9 runs as the built-in rule.
func TestStickyPartitionThroughPartitioner(t *testing.T) {
	calls := 0
	pt := PartitionerFunc(func(*Record, int32) (int32, error) { calls++; return StickyPartition, nil })
	parts := stickyRuns(t, []string{"t"}, produceOneSync(t), RecordPartitioner(pt))["t"]
	require.Equal(t, 40, calls, "the partitioner was asked for every record")
	require.GreaterOrEqual(t, runsOf(parts), 6, "%v", parts)
	require.LessOrEqual(t, runsOf(parts), 9, "%v", parts)
}

// TestMemoryReleasedPerCompletion: buffer.memory is released after each
// completion's callbacks, not at the end of the callback goroutine's pass
// (callbacks.go): a callback may block in Produce waiting for bytes an
// earlier completion of the same pass held. Two batches acked while a slow
// callback holds the callback goroutine come back in one pass; the second
// one's callback produces a record that fits only once the first one's
// memory is back, and it gets it at once rather than when its context
// ends.
func TestMemoryReleasedPerCompletion(t *testing.T) {
	require.NoError(t, memoryPerCompletion(t, false), "the record produced from the callback")
}

// Negative control: with buffer.memory released at the end of the pass
// (regress.releasePerPass) the record produced from the second callback
// waits for bytes only the end of its own pass frees, until its context
// ends.
func TestMemoryReleasedPerCompletionNegativeControl(t *testing.T) {
	err := memoryPerCompletion(t, true)
	require.ErrorIs(t, err, context.DeadlineExceeded, "the record produced from the callback waited for the end of the pass")
}

// memoryPerCompletion builds the state TestMemoryReleasedPerCompletion
// describes and returns the outcome of the record produced from the second
// callback of the pass.
//
// The sizes are measured, not assumed: a batch holds its buffer's capacity
// of buffer.memory (memory.go), and a batch of one small record may get a
// recycled buffer of up to 4 KiB from an earlier batch of this process
// (accumulator.go, keepBuffer). The old version of this test assumed the
// slow callback's batch of 10 bytes held about that much, with a budget
// that left no room for the test's own records otherwise: when it got a
// recycled 4 KiB buffer (about one run in ten with -count), the test's
// second 4,000-byte Produce waited for memory held by completions queued
// behind the slow callback the test itself had yet to release, a deadlock
// synctest could not report because the producer always has a timer armed
// (metadata.max.age.ms): virtual time ran on, five minutes per sender
// pass, until the real test timeout.
func memoryPerCompletion(t *testing.T, perPass bool) error {
	var outcome error
	synctest.Test(t, func(t *testing.T) {
		c, n := memCluster(t, broker.Config{RTT: 10 * time.Millisecond, Topics: []broker.TopicConfig{{Name: "t", Partitions: 3, Window: 10}}})
		const budget = 16384
		p := memProducer(t, c, n, BufferMemory(budget), MaxRequestSize(budget), BatchSize(budget),
			optFunc(func(c *config) error { c.regress.releasePerPass = perPass; return nil }))
		rec := func(part int32, size int) *Record { return toPartition("t", part, make([]byte, size)) }
		require.NoError(t, p.ProduceSync(context.Background(), rec(2, 10)).FirstErr(), "metadata and producer id")
		// produce places r, which must fit now: nothing releases memory
		// before the slow callback returns, so a Produce that waited
		// here would wait for ever.
		produce := func(r *Record, cb Callback) {
			require.LessOrEqual(t, int64(recordMemory(r)), budget-p.mem.Held(), "the test's own record fits")
			p.Produce(context.Background(), r, cb)
		}

		// A slow callback holds the callback goroutine.
		release, entered := make(chan struct{}), make(chan struct{})
		produce(rec(2, 10), func(*Record, error) { close(entered); <-release })
		<-entered
		slow := p.mem.Held() // the slow callback's batch, all that is held now

		// A failed check below must not leave the callback goroutine
		// stuck for Close at cleanup.
		var once sync.Once
		unblock := func() { once.Do(func() { close(release) }) }
		defer unblock()

		var calls atomic.Int32
		var third *Record // set before the callbacks run
		produced := make(chan error, 1)
		cb := func(_ *Record, err error) {
			assert.NoError(t, err)
			if calls.Add(1) < 2 {
				return
			}
			// The second completion of the pass: the first one's
			// memory is free, this one's is not.
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			p.Produce(ctx, third, func(_ *Record, err error) { produced <- err })
		}
		produce(rec(0, 4000), cb)
		produce(rec(1, 4000), cb)
		time.Sleep(time.Second) // both acked and queued behind the slow callback
		require.Zero(t, calls.Load())
		p.cbs.mu.Lock()
		queued := append([]completion(nil), p.cbs.q...)
		p.cbs.mu.Unlock()
		require.Len(t, queued, 2, "both completions wait for the slow callback: the next pass takes them together")
		first, second := queued[0].memory, queued[1].memory
		require.Equal(t, slow+first+second, p.mem.Held(), "held: the slow batch and the two queued")

		// The third record fits with only the second batch held, not
		// with both (even once the slow callback's bytes are back).
		v := int(budget - second - first/2)
		for third = rec(2, v); int64(recordMemory(third)) > budget-second-first/2; third = rec(2, v) {
			v--
		}
		need := int64(recordMemory(third))
		t.Logf("buffer.memory held: slow callback's batch %d, queued %d and %d; third record %d of %d", slow, first, second, need, budget)
		require.Greater(t, need, budget-first-second, "does not fit while both are held")
		require.LessOrEqual(t, need, budget-second, "fits once the first is released")
		unblock()
		select {
		case outcome = <-produced:
		case <-time.After(time.Minute):
			t.Fatal("the record produced from the callback got no outcome")
		}
		require.Equal(t, int32(2), calls.Load())
	})
	return outcome
}

// slowAfterConnect makes a node answer in slow from the moment a produce
// connection to it is ready: its ApiVersions handshake was answered at the
// cluster's round trip, every later request at slow.
type slowAfterConnect struct {
	c    *broker.Cluster
	slow time.Duration
}

func (h slowAfterConnect) OnBrokerConnect(node int32, _ string, err error) {
	if err == nil {
		h.c.SetRTT(node, h.slow)
	}
}

// TestCoalesceNeverHoldsFullBatchesOrFlush: while a node queues (answers in
// ten times its handshake) and has longhaul.coalesce.requests (1) request
// in flight, a lingered batch is held (the control: no request goes past
// its linger), but a full batch goes at once, and so does Flush, which
// takes the held batch with it (DESIGN.md: "Full batches, retries and
// Flush are never held").
func TestCoalesceNeverHoldsFullBatchesOrFlush(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, n := memCluster(t, broker.Config{RTT: 10 * time.Millisecond, Topics: []broker.TopicConfig{{Name: "t", Partitions: 5, Window: 50}}})
		p := memProducer(t, c, n, Linger(5*time.Millisecond), BatchSize(512),
			MaxInFlightRequestsPerConnection(64), RequestTimeout(30*time.Second), DeliveryTimeout(time.Minute),
			Property("longhaul.coalesce.requests", "1"), Hooks(slowAfterConnect{c, 100 * time.Millisecond}))
		rec := func(part int32, size int) *Record { return toPartition("t", part, make([]byte, size)) }
		// A first response, 100 ms against a 10 ms handshake: the node
		// queues from now on.
		require.NoError(t, p.ProduceSync(context.Background(), rec(0, 10)).FirstErr())
		p.Produce(context.Background(), rec(1, 10), nil)
		time.Sleep(10 * time.Millisecond)
		reqs := p.Stats().ProduceRequests
		require.Equal(t, 1, p.Stats().Nodes[0].RequestsInFlight, "one request in flight: holding from now on")

		p.Produce(context.Background(), rec(2, 10), nil)
		time.Sleep(20 * time.Millisecond)
		require.Equal(t, reqs, p.Stats().ProduceRequests, "control: the lingered batch is held")
		require.Positive(t, p.s.holds.Load())

		p.Produce(context.Background(), rec(3, 600), nil) // past batch.size: full at once
		time.Sleep(time.Millisecond)
		require.Equal(t, reqs+1, p.Stats().ProduceRequests, "a full batch is not held")

		flushed := make(chan error, 1)
		go func() { flushed <- p.Flush(context.Background()) }()
		time.Sleep(time.Millisecond)
		require.Equal(t, reqs+2, p.Stats().ProduceRequests, "Flush is not held, and takes the held batch")
		require.NoError(t, <-flushed)
	})
}

// TestStickyBurstsStayWhole: a record that would start a batch on a sticky
// partition batch.size bytes already went to moves the partition first, so
// it is not left alone in a batch on the old one (placed's doc). Bursts of
// three keyless 200-byte records, each burst's batch sealed by linger, with
// batch.size 1024: every burst lands on one partition, and the partition
// still moves. The negative control (stickyStartAlone) places the record
// and moves after it, and bursts split: the first record on the previous
// partition, alone in its batch.
func TestStickyBurstsStayWhole(t *testing.T) {
	for _, alone := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			c, n := memCluster(t, broker.Config{Topics: []broker.TopicConfig{{Name: "t", Partitions: 6, Window: 10}}})
			p := memProducer(t, c, n, BatchSize(1024), Linger(5*time.Millisecond),
				optFunc(func(c *config) error { c.regress.stickyStartAlone = alone; return nil }))
			require.NoError(t, p.ProduceSync(context.Background(), &Record{Topic: "t", Key: []byte("k"), Value: []byte("metadata")}).FirstErr())
			var bursts [][]int32
			for range 8 {
				var parts []int32
				for range 3 {
					r := &Record{Topic: "t", Value: make([]byte, 200)}
					p.Produce(context.Background(), r, func(_ *Record, err error) { assert.NoError(t, err) })
					parts = append(parts, r.Partition())
				}
				bursts = append(bursts, parts)
				time.Sleep(50 * time.Millisecond) // past linger: the batch is sealed and sent
			}
			require.NoError(t, p.Flush(context.Background()))
			split, moves := 0, 0
			for i, b := range bursts {
				require.Equal(t, b[1], b[2], "bursts %v", bursts)
				if b[0] != b[1] {
					split++
					require.Positive(t, i)
					require.Equal(t, bursts[i-1][2], b[0], "the lone record stays on the previous partition: %v", bursts)
				}
				if i > 0 && b[2] != bursts[i-1][2] {
					moves++
				}
			}
			require.Positive(t, moves, "the sticky partition moves: %v", bursts)
			if alone {
				require.Positive(t, split, "negative control: a burst's first record left alone: %v", bursts)
			} else {
				require.Zero(t, split, "no burst split: %v", bursts)
			}
		})
	}
}

// TestFlushReleasedAtEndOfCallbackPass: Flush waiters are released at the
// end of the callback goroutine's pass, after every callback of it ran
// (doneTally): with the record Flush waits for (a) and a record produced
// after the Flush (b) called back in one pass, Flush does not return while
// b's callback runs, though a's has run, and returns once it ends.
func TestFlushReleasedAtEndOfCallbackPass(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, n := memCluster(t, broker.Config{RTT: 10 * time.Millisecond, Topics: []broker.TopicConfig{{Name: "t", Partitions: 3, Window: 10}}})
		p := memProducer(t, c, n)
		rec := func(part int32) *Record { return toPartition("t", part, []byte("v")) }
		require.NoError(t, p.ProduceSync(context.Background(), rec(2)).FirstErr(), "metadata and producer id")

		// A slow callback holds the callback goroutine while a and b
		// are acknowledged, so they come back in one pass.
		releaseSlow, entered := make(chan struct{}), make(chan struct{})
		p.Produce(context.Background(), rec(2), func(*Record, error) { close(entered); <-releaseSlow })
		<-entered
		var aDone atomic.Bool
		p.Produce(context.Background(), rec(0), func(_ *Record, err error) { assert.NoError(t, err); aDone.Store(true) })
		flushed := make(chan error, 1)
		go func() { flushed <- p.Flush(context.Background()) }()
		synctest.Wait() // Flush has begun: b is not among its records
		releaseB, inB := make(chan struct{}), make(chan struct{})
		p.Produce(context.Background(), rec(1), func(_ *Record, err error) { assert.NoError(t, err); close(inB); <-releaseB })
		time.Sleep(time.Second) // a and b acknowledged, queued behind the slow callback
		close(releaseSlow)
		<-inB
		require.True(t, aDone.Load(), "a was called back before b, in the same pass")
		time.Sleep(time.Second)
		select {
		case err := <-flushed:
			t.Fatalf("Flush returned (%v) while a callback of the pass was running", err)
		default:
		}
		close(releaseB)
		require.NoError(t, <-flushed)
	})
}

// TestCoalesceHoldEndsAfterLatestResponseTime: a held batch waits at most
// the node's latest response time (100 ms) past its linger (5 ms), even
// when no response frees a slot: with the one request in flight never
// answered (its response dropped), the lingered batch is still held 100 ms
// after it was produced and sent by 110 ms (longhaul.coalesce.requests'
// doc: "for at most that response's time").
func TestCoalesceHoldEndsAfterLatestResponseTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, n := memCluster(t, broker.Config{RTT: 10 * time.Millisecond, Topics: []broker.TopicConfig{{Name: "t", Partitions: 3, Window: 50}}})
		p := memProducer(t, c, n, Linger(5*time.Millisecond), BatchSize(16384),
			MaxInFlightRequestsPerConnection(64), RequestTimeout(30*time.Second), DeliveryTimeout(time.Minute),
			Property("longhaul.coalesce.requests", "1"), Hooks(slowAfterConnect{c, 100 * time.Millisecond}))
		rec := func(part int32) *Record { return toPartition("t", part, []byte("v")) }
		require.NoError(t, p.ProduceSync(context.Background(), rec(0)).FirstErr(), "a 100 ms response")
		c.DropProduceResponses(0, 1)
		p.Produce(context.Background(), rec(1), func(_ *Record, err error) { assert.NoError(t, err) })
		time.Sleep(10 * time.Millisecond)
		require.Equal(t, 1, p.Stats().Nodes[0].RequestsInFlight, "a request that will not be answered")
		reqs := p.Stats().ProduceRequests
		p.Produce(context.Background(), rec(2), func(_ *Record, err error) { assert.NoError(t, err) })
		time.Sleep(100 * time.Millisecond)
		require.Equal(t, reqs, p.Stats().ProduceRequests, "held at 100 ms")
		time.Sleep(10 * time.Millisecond)
		require.Equal(t, reqs+1, p.Stats().ProduceRequests, "sent by linger + the latest response time")
		require.NoError(t, p.Flush(context.Background()))
	})
}

// TestProduceRequestsPerBatches: BatchesSent per ProduceRequests is how
// many partitions' batches a request carried on average: records for
// three partitions of one node flushed together go in one request of
// three batches; then one partition alone takes a request of one.
func TestProduceRequestsPerBatches(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, n := memCluster(t, broker.Config{RTT: 10 * time.Millisecond, Topics: []broker.TopicConfig{{Name: "t", Partitions: 3}}})
		p := memProducer(t, c, n, Linger(time.Minute), DeliveryTimeout(2*time.Minute))
		require.NoError(t, p.ProduceSync(context.Background(), &Record{Topic: "t", Key: []byte("k"), Value: []byte("metadata")}).FirstErr())
		st := p.Stats()
		r0, b0 := st.ProduceRequests, st.BatchesSent
		for part := range int32(3) {
			r := &Record{Topic: "t", Value: []byte("v")}
			r.SetPartition(part)
			p.Produce(context.Background(), r, func(_ *Record, err error) { assert.NoError(t, err) })
		}
		require.NoError(t, p.Flush(context.Background()))
		st = p.Stats()
		require.Equal(t, int64(1), st.ProduceRequests-r0)
		require.Equal(t, int64(3), st.BatchesSent-b0, "three partitions' batches in one request")
		r := &Record{Topic: "t", Value: []byte("v")}
		r.SetPartition(1)
		require.NoError(t, p.ProduceSync(context.Background(), r).FirstErr())
		st = p.Stats()
		require.Equal(t, int64(2), st.ProduceRequests-r0)
		require.Equal(t, int64(4), st.BatchesSent-b0)
	})
}
