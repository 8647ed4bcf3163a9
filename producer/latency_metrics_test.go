package producer

import (
	"context"
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

// requestLog records what HookRequestDone and HookBatchSent report.
type requestLog struct {
	mu        sync.Mutex
	requests  []RequestInfo
	sentBytes int
	sent      int
}

// OnRequestDone keeps the produce requests (API 0): the tests here are
// about them.
func (l *requestLog) OnRequestDone(r RequestInfo) {
	if r.API != 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.requests = append(l.requests, r)
}

func (l *requestLog) OnBatchSent(b BatchInfo) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sentBytes += b.Bytes
	l.sent++
}

func (l *requestLog) snapshot() ([]RequestInfo, int, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]RequestInfo(nil), l.requests...), l.sentBytes, l.sent
}

// TestBufferedWhileBrokerHeld: while the broker holds every answer, the
// records produced are all buffered (Stats.BufferedRecords is their count,
// Stats.BufferedBytes the buffers of their batches, at least their bytes on
// the wire) and both are 0 once the callbacks ran. Every request's latency
// is at least the link's round trip, the held ones at least the hold, and
// Stats.Nodes sums the latencies the hook saw.
func TestBufferedWhileBrokerHeld(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const (
			rtt     = 40 * time.Millisecond
			hold    = 2 * time.Second
			records = 30
		)
		c, n := memCluster(t, broker.Config{RTT: rtt, Topics: []broker.TopicConfig{{Name: "t", Partitions: 3}}})
		log := &requestLog{}
		p := memProducer(t, c, n, BatchSize(1024), RequestTimeout(10*time.Second), DeliveryTimeout(time.Minute), Hooks(log))
		require.NoError(t, p.ProduceSync(context.Background(), &Record{Topic: "t", Value: []byte("warm")}).FirstErr())
		// The callback goroutine releases a batch after its callbacks
		// return, a moment after ProduceSync learns the outcome.
		synctest.Wait()
		assert.Zero(t, p.Stats().BufferedBytes)
		assert.Zero(t, p.Stats().BufferedRecords)
		_, warmBytes, warmSent := log.snapshot()

		c.Stall(0, hold)
		var wg sync.WaitGroup
		wg.Add(records)
		for i := range records {
			r := &Record{Topic: "t", Value: make([]byte, 600)}
			r.SetPartition(int32(i % 3))
			p.Produce(context.Background(), r, func(*Record, error) { wg.Done() })
		}
		time.Sleep(hold / 2)
		st := p.Stats()
		_, sentBytes, sent := log.snapshot()
		assert.Equal(t, int64(records), st.BufferedRecords, "every record is buffered while the broker holds its answer")
		// Every batch holds its buffer's capacity, whether sent (in
		// flight) or queued behind the partition's window.
		assert.Equal(t, batchBuffers(p), st.BufferedBytes, "every batch's buffer")
		assert.GreaterOrEqual(t, st.BufferedBytes, int64(records*600), "at least the values")
		assert.Positive(t, sent-warmSent)
		assert.GreaterOrEqual(t, st.BufferedBytes, int64(sentBytes-warmBytes))

		wg.Wait()
		synctest.Wait() // the callbacks have returned and their batches are released
		st = p.Stats()
		assert.Zero(t, st.BufferedRecords)
		assert.Zero(t, st.BufferedBytes)

		reqs, _, _ := log.snapshot()
		require.NotEmpty(t, reqs)
		var sum time.Duration
		held := 0
		for _, r := range reqs {
			assert.Equal(t, int32(0), r.Node)
			assert.Equal(t, int16(0), r.API)
			assert.NoError(t, r.Err)
			assert.GreaterOrEqual(t, r.Latency, rtt, "no answer comes before the round trip")
			if r.Latency >= hold/2 {
				held++
			}
			sum += r.Latency
		}
		assert.Positive(t, held, "the held requests took the hold")
		assert.Equal(t, 0, reqs[len(reqs)-1].InFlight, "the last one leaves none in flight")
		require.Len(t, st.Nodes, 1)
		assert.Equal(t, int64(len(reqs)), st.Nodes[0].Requests)
		assert.Equal(t, sum, st.Nodes[0].RequestTime)
	})
}

// TestRequestDoneReportsInFlightAndFailure: requests pipelined to one node
// report how many are still in flight after each, and a request whose
// answer never comes completes with the request timeout as its error.
func TestRequestDoneReportsInFlightAndFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, n := memCluster(t, broker.Config{RTT: 20 * time.Millisecond, Topics: []broker.TopicConfig{{Name: "t", Partitions: 4, Window: 20}}})
		log := &requestLog{}
		p := memProducer(t, c, n, Linger(0), Hooks(log))
		require.NoError(t, p.ProduceSync(context.Background(), &Record{Topic: "t", Value: []byte("warm")}).FirstErr())

		// Four partitions, one record each a millisecond apart: four
		// requests in flight at once, answered in order.
		var wg sync.WaitGroup
		for i := range 4 {
			wg.Add(1)
			r := &Record{Topic: "t", Value: []byte("v")}
			r.SetPartition(int32(i))
			p.Produce(context.Background(), r, func(*Record, error) { wg.Done() })
			time.Sleep(time.Millisecond)
		}
		wg.Wait()
		synctest.Wait()
		reqs, _, _ := log.snapshot()
		var inflight []int
		for _, r := range reqs[1:] {
			inflight = append(inflight, r.InFlight)
		}
		assert.Equal(t, []int{3, 2, 1, 0}, inflight)

		c.DropProduceResponses(0, 1)
		rec := &Record{Topic: "t", Value: []byte("lost answer")}
		rec.SetPartition(0)
		require.NoError(t, p.ProduceSync(context.Background(), rec).FirstErr(), "retried after the timeout")
		// The sender reports a request after its batches' callbacks are
		// queued: ProduceSync may return before that.
		synctest.Wait()
		reqs, _, _ = log.snapshot()
		var failed []RequestInfo
		for _, r := range reqs {
			if r.Err != nil {
				failed = append(failed, r)
			}
		}
		require.Len(t, failed, 1)
		assert.GreaterOrEqual(t, failed[0].Latency, time.Second, "it failed at request.timeout.ms")
		assert.Equal(t, int64(len(reqs)), p.Stats().Nodes[0].Requests)
	})
}

// batchBuffers sums the buffer capacities of every batch p holds, read on
// the sender goroutine (which owns the sent and queued ones) under
// acc.mu (which guards the open and sealed ones).
func batchBuffers(p *Producer) int64 {
	sum := make(chan int64)
	p.post(func() {
		p.acc.mu.Lock()
		defer p.acc.mu.Unlock()
		var n int64
		add := func(bs ...*batch) {
			for _, b := range bs {
				if b != nil && len(b.records) > 0 {
					n += int64(b.builder.Cap())
				}
			}
		}
		for _, t := range p.acc.topics {
			for _, ps := range t.ts.parts {
				add(ps.buf.open)
				add(ps.buf.sealed...)
				add(ps.queue...)
				add(ps.inflight...)
				add(ps.retry...)
			}
		}
		sum <- n
	})
	return <-sum
}

// requestKeys records every request HookRequestDone reports, and whether
// each call ran on the producer's sender goroutine.
type requestKeys struct {
	p         atomic.Pointer[Producer]
	mu        sync.Mutex
	all       []RequestInfo
	offSender int
}

func (k *requestKeys) OnRequestDone(r RequestInfo) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.all = append(k.all, r)
	if p := k.p.Load(); p == nil || p.s.gid.Load() != goroutineID() {
		k.offSender++
	}
}

// count returns how many requests of each API key were reported.
func (k *requestKeys) count() map[int16]int {
	k.mu.Lock()
	defer k.mu.Unlock()
	n := map[int16]int{}
	for _, r := range k.all {
		n[r.API]++
	}
	return n
}

// TestRequestDoneReportsEveryRequest: HookRequestDone sees every request
// the producer sends, not only produce requests, each with its API key,
// on the sender goroutine: a transactional producer with client metrics
// subscribed reports Metadata, FindCoordinator, InitProducerId,
// AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit, EndTxn,
// GetTelemetrySubscriptions and PushTelemetry besides Produce, each
// produce and metadata request once, and no ApiVersions or SASL request
// (the requests that open a connection). Each names its broker's address,
// and its id once metadata named it: the bootstrap server is node 0's
// address, unknown as node 0 until the first Metadata answer, so the
// first control requests name node -1. Transaction version 1, which sends
// AddPartitionsToTxn and AddOffsetsToTxn (version 2 adds partitions with
// Produce itself).
func TestRequestDoneReportsEveryRequest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newTxnEnv(t, 1, broker.Config{RTT: 10 * time.Millisecond})
		e.c.SetTelemetry(&broker.TelemetryConfig{Metrics: []string{"*"}, PushInterval: 10 * time.Second})
		keys := &requestKeys{}
		p := e.producer(Hooks(keys))
		keys.p.Store(p)
		ctx := context.Background()
		require.NoError(t, p.InitTransactions(ctx))
		require.NoError(t, p.BeginTransaction())
		w := produceAll(p, "out", 0, "a", "b", "c")
		g := GroupMetadata{GroupID: "eos", Generation: -1}
		require.NoError(t, p.SendOffsetsToTransaction(ctx, g, []TransactionOffset{{Topic: "in", Partition: 0, Offset: 7, LeaderEpoch: -1}}))
		require.NoError(t, p.CommitTransaction(ctx))
		require.Equal(t, []error{nil, nil, nil}, w())
		time.Sleep(25 * time.Second) // subscribed, pushed
		synctest.Wait()

		n := keys.count()
		for key, name := range map[int16]string{0: "Produce", 3: "Metadata", 10: "FindCoordinator", 22: "InitProducerId",
			24: "AddPartitionsToTxn", 25: "AddOffsetsToTxn", 26: "EndTxn", 28: "TxnOffsetCommit",
			71: "GetTelemetrySubscriptions", 72: "PushTelemetry"} {
			assert.Positive(t, n[key], "%s (%d) reported", name, key)
		}
		for _, key := range []int16{17, 18, 36} { // SaslHandshake, ApiVersions, SaslAuthenticate
			assert.Zero(t, n[key], "key %d: opens a connection", key)
		}
		assert.Equal(t, int(p.Stats().ProduceRequests), n[0], "each produce request once")
		assert.Equal(t, int(e.c.MetadataRequests()), n[3], "each metadata request once")
		keys.mu.Lock()
		assert.Zero(t, keys.offSender, "every call on the sender goroutine")
		addrs := map[string]int32{}
		for i, a := range e.c.Addrs() {
			addrs[a] = int32(i)
		}
		unknown := 0
		for _, r := range keys.all {
			id, ok := addrs[r.Addr]
			assert.True(t, ok, "API %d: address %q", r.API, r.Addr)
			if r.Node == -1 && (r.API == 3 || r.API == 10) {
				unknown++
				assert.Zero(t, r.InFlight)
			} else {
				assert.Equal(t, id, r.Node, "API %d at %s", r.API, r.Addr)
			}
			assert.NoError(t, r.Err, "API %d", r.API)
			assert.GreaterOrEqual(t, r.Latency, 10*time.Millisecond, "API %d: the round trip", r.API)
		}
		keys.mu.Unlock()
		assert.LessOrEqual(t, unknown, 2, "only before the first Metadata answer")
	})
}

// TestRequestDoneReportsReadback: read-back's own requests are reported
// too, on the sender goroutine, with the partition leader's id:
// ListOffsets (written on the produce connection ahead of the partition's
// first batch, for K, and asked on read-back's own connection for the log
// start when a Fetch is answered OFFSET_OUT_OF_RANGE, as the first one is
// here), Fetch, DescribeConfigs (the topic's cleanup.policy, read when the
// batch is not found) and Metadata (finding the leader again after a
// failed read). B's every attempt is refused unappended until
// delivery.timeout.ms, so read-back settles it not written.
func TestRequestDoneReportsReadback(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		keys := &requestKeys{}
		c, n := memCluster(t, broker.Config{RTT: 20 * time.Millisecond,
			Topics: []broker.TopicConfig{{Name: "t", Partitions: 1, Window: 20}}})
		p := memProducer(t, c, n, Linger(0), ReadBack(true), Hooks(keys))
		keys.p.Store(p) // before any request completes: the bubble's clock has not moved
		l := newLedger("a", "t")
		warmUp(t, p, l, 0)
		probes := keys.count()[2]
		assert.Equal(t, 1, probes, "ListOffsets for K, ahead of the first batch")
		var fetches atomic.Int32
		c.RewriteFetch(func(_ int32, r *kmsg.FetchResponse) {
			if fetches.Add(1) == 1 {
				r.Topics[0].Partitions[0].ErrorCode = kerr.OffsetOutOfRange.Code
				r.Topics[0].Partitions[0].RecordBatches = nil
			}
		})
		failUntilTimeout(t, c, p, l, false)
		require.ErrorIs(t, recordErr(t, l, 0, 200), ErrNotWritten)
		require.GreaterOrEqual(t, fetches.Load(), int32(2), "the read was tried again")
		synctest.Wait()

		got := keys.count()
		assert.Equal(t, int(fetches.Load()), got[1], "each Fetch once")
		assert.Equal(t, probes+1, got[2], "ListOffsets for the log start, after OFFSET_OUT_OF_RANGE")
		assert.Equal(t, 1, got[32], "DescribeConfigs, for cleanup.policy")
		assert.Equal(t, int(c.MetadataRequests()), got[3], "each Metadata request once, read-back's among them")
		keys.mu.Lock()
		defer keys.mu.Unlock()
		assert.Zero(t, keys.offSender, "every call on the sender goroutine")
		for _, r := range keys.all {
			if r.API == 1 || r.API == 2 || r.API == 32 {
				assert.Equal(t, int32(0), r.Node, "API %d: the leader", r.API)
				assert.Equal(t, c.Addrs()[0], r.Addr, "API %d", r.API)
				assert.NoError(t, r.Err, "API %d", r.API)
			}
		}
	})
}
