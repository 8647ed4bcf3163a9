package producer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/longhaul-kafka/longhaul/internal/broker"
)

// purgeCalls records callbacks in the order they ran.
type purgeCalls struct {
	mu    sync.Mutex
	order []string
	errs  map[string]error
	recs  map[string]*Record
	wg    sync.WaitGroup
}

func newPurgeCalls() *purgeCalls {
	return &purgeCalls{errs: map[string]error{}, recs: map[string]*Record{}}
}

func (pc *purgeCalls) cb(name string) Callback {
	pc.wg.Add(1)
	return func(r *Record, err error) {
		defer pc.wg.Done()
		pc.mu.Lock()
		defer pc.mu.Unlock()
		if _, dup := pc.errs[name]; dup {
			panic("two callbacks for " + name)
		}
		pc.order = append(pc.order, name)
		pc.errs[name] = err
		pc.recs[name] = r
	}
}

func (pc *purgeCalls) done(name string) bool {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	_, ok := pc.errs[name]
	return ok
}

// requirePurged checks err is Purge's: a DeliveryError wrapping ErrPurged,
// not fate unknown.
func requirePurged(t *testing.T, name string, err error, partition int32) {
	t.Helper()
	require.ErrorIs(t, err, ErrPurged, name)
	var de *DeliveryError
	require.ErrorAs(t, err, &de, name)
	require.False(t, de.FateUnknown, "%s: a purged record was never sent", name)
	require.Equal(t, partition, de.Partition, name)
	require.Equal(t, int32(-1), de.BaseSequence, "%s: no sequence was given", name)
}

// stalledWithOneInFlight starts a producer with one request in flight per
// connection, delivers a first record (metadata and producer id are
// known from then on), stalls the broker for stall and sends record "A",
// which stays in flight until the stall ends. opts are added.
func stalledWithOneInFlight(t *testing.T, pc *purgeCalls, stall time.Duration, opts ...Opt) (*broker.Cluster, *Producer) {
	c, n := memCluster(t, broker.Config{Topics: []broker.TopicConfig{{Name: "t", Partitions: 1}}})
	p := memProducer(t, c, n, append([]Opt{MaxInFlightRequestsPerConnection(1), DeliveryTimeout(time.Hour), RequestTimeout(time.Minute)}, opts...)...)
	ctx := context.Background()
	p.Produce(ctx, toPartition("t", 0, []byte("warm")), pc.cb("warm"))
	pc.wg.Wait()
	require.NoError(t, pc.errs["warm"])
	c.Stall(0, stall)
	p.Produce(ctx, toPartition("t", 0, []byte("A")), pc.cb("A"))
	waitSent(t, p, 2)
	return c, p
}

// waitSent waits (on virtual time) until the producer has sent n batches.
func waitSent(t *testing.T, p *Producer, n int64) {
	t.Helper()
	for p.Stats().BatchesSent < n {
		time.Sleep(time.Millisecond)
	}
}

// TestPurgeFailsUnsentKeepsInFlight: Purge fails the records not yet sent
// with ErrPurged (a DeliveryError, not fate unknown), leaves the record in
// flight to its own outcome, keeps callback order within the partition,
// and the producer stays open: a record produced after Purge is delivered.
// Nothing purged reaches the log.
func TestPurgeFailsUnsentKeepsInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pc := newPurgeCalls()
		c, p := stalledWithOneInFlight(t, pc, 10*time.Second)
		ctx := context.Background()
		var names []string
		for i := range 10 {
			name := fmt.Sprintf("B%d", i)
			names = append(names, name)
			p.Produce(ctx, toPartition("t", 0, []byte(name)), pc.cb(name))
			if i == 4 {
				time.Sleep(10 * time.Millisecond) // past linger: the first five are sealed and queued, the rest open
			}
		}
		synctest.Wait()
		require.Equal(t, int64(2), p.Stats().BatchesSent, "nothing more was sent while A is in flight")
		require.NoError(t, p.Purge(ctx))
		pc.wg.Wait() // A too: the stall ends
		require.NoError(t, pc.errs["A"], "the record in flight keeps its outcome")
		for _, name := range names {
			requirePurged(t, name, pc.errs[name], 0)
			require.Equal(t, int64(-1), pc.recs[name].Offset, name)
		}
		require.Equal(t, append([]string{"warm", "A"}, names...), pc.order, "callbacks in produce order")
		require.Equal(t, int64(len(names)), p.Stats().RecordsFailed)

		p.Produce(ctx, toPartition("t", 0, []byte("C")), pc.cb("C"))
		pc.wg.Wait()
		require.NoError(t, pc.errs["C"], "the producer stays open")
		var log []string
		for _, r := range c.Records("t", 0) {
			log = append(log, string(r.Value))
		}
		require.Equal(t, []string{"warm", "A", "C"}, log, "nothing purged reaches the log")
	})
}

// TestPurgeReleasesBufferMemory: buffer.memory full of unsent records;
// once Purge's callbacks ran it is back to what the record in flight
// holds, and TryProduce is accepted again.
func TestPurgeReleasesBufferMemory(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pc := newPurgeCalls()
		_, p := stalledWithOneInFlight(t, pc, 10*time.Second, BufferMemory(16<<10))
		ctx := context.Background()
		inFlight := p.mem.Held()
		full := 0
		for i := 0; full == 0; i++ {
			name := fmt.Sprintf("B%d", i)
			p.TryProduce(toPartition("t", 0, value("p", 0, i, 200)), func(r *Record, err error) {
				if errors.Is(err, ErrBufferFull) {
					full = i
					return
				}
				pc.cb(name)(r, err)
			})
			synctest.Wait()
			require.Less(t, i, 1000, "buffer.memory never filled")
		}
		require.Greater(t, p.mem.Held(), inFlight)
		require.NoError(t, p.Purge(ctx))
		require.Equal(t, inFlight, p.mem.Held(), "the purged records gave back their buffer.memory when Purge returned")
		synctest.Wait()
		require.False(t, pc.done("A"), "A is still in flight")
		require.False(t, pc.done("B0"), "the purged records' callbacks wait for A's")
		var err error
		p.TryProduce(toPartition("t", 0, []byte("C")), func(_ *Record, e error) { err = e })
		synctest.Wait()
		require.False(t, pc.done("A"), "A is still in flight")
		require.NoError(t, err, "accepted while A is in flight: the purge released buffer.memory")
		require.NoError(t, p.Flush(ctx))
		require.NoError(t, pc.errs["A"])
		requirePurged(t, "B0", pc.errs["B0"], 0)
		require.Zero(t, p.mem.Held())
	})
}

// TestPurgeReleasesFlush: a Flush waiting for unsent records returns once
// Purge failed them and the record in flight is done, and a Flush after
// Purge returns.
func TestPurgeReleasesFlush(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pc := newPurgeCalls()
		_, p := stalledWithOneInFlight(t, pc, 10*time.Second)
		ctx := context.Background()
		for i := range 5 {
			p.Produce(ctx, toPartition("t", 0, []byte(fmt.Sprint("B", i))), pc.cb(fmt.Sprint("B", i)))
		}
		flushed := make(chan error, 1)
		go func() { flushed <- p.Flush(ctx) }()
		synctest.Wait()
		select {
		case <-flushed:
			t.Fatal("Flush returned while records were buffered")
		default:
		}
		require.NoError(t, p.Purge(ctx))
		require.NoError(t, <-flushed)
		require.True(t, pc.done("A"), "Flush waited for the record in flight")
		requirePurged(t, "B4", pc.errs["B4"], 0)
		require.NoError(t, p.Flush(ctx), "Flush after Purge")
	})
}

// TestPurgeFailsRecordsWaitingForMetadata: records of a topic whose
// partitions are not known yet are purged too, with partition -1.
func TestPurgeFailsRecordsWaitingForMetadata(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, n := memCluster(t, broker.Config{Topics: []broker.TopicConfig{{Name: "t", Partitions: 1}}})
		p := memProducer(t, c, n, DeliveryTimeout(time.Hour))
		pc := newPurgeCalls()
		ctx := context.Background()
		p.Produce(ctx, &Record{Topic: "missing", Value: []byte("w")}, pc.cb("w"))
		time.Sleep(time.Second) // metadata answered: the topic is unknown, the record waits
		require.False(t, pc.done("w"))
		require.NoError(t, p.Purge(ctx))
		pc.wg.Wait()
		requirePurged(t, "w", pc.errs["w"], -1)
		require.NoError(t, p.Flush(ctx))
	})
}

// TestPurgeContextEndsFirst: while the sender goroutine is held (a hook
// that blocks), Purge returns ctx's error, wrapped; the purge still
// happens once the sender gets to it.
func TestPurgeContextEndsFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, n := memCluster(t, broker.Config{Topics: []broker.TopicConfig{{Name: "t", Partitions: 1}}})
		h := &blockingSent{}
		p := memProducer(t, c, n, MaxInFlightRequestsPerConnection(1), DeliveryTimeout(time.Hour), Hooks(h))
		pc := newPurgeCalls()
		ctx := context.Background()
		p.Produce(ctx, toPartition("t", 0, []byte("warm")), pc.cb("warm"))
		pc.wg.Wait()
		gate := make(chan struct{})
		h.gate.Store(&gate)
		p.Produce(ctx, toPartition("t", 0, []byte("A")), pc.cb("A"))
		for !h.entered.Load() {
			time.Sleep(time.Millisecond)
		}
		synctest.Wait() // the sender waits in OnBatchSent
		p.Produce(ctx, toPartition("t", 0, []byte("B")), pc.cb("B"))
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		err := p.Purge(cctx)
		cancel()
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.False(t, pc.done("B"))
		close(*h.gate.Load())
		pc.wg.Wait()
		require.NoError(t, pc.errs["A"])
		requirePurged(t, "B", pc.errs["B"], 0)
	})
}

// blockingSent holds the sender goroutine in OnBatchSent while gate is set
// and open.
type blockingSent struct {
	gate    atomic.Pointer[chan struct{}]
	entered atomic.Bool
}

func (h *blockingSent) OnBatchSent(BatchInfo) {
	if g := h.gate.Load(); g != nil {
		h.entered.Store(true)
		<-*g
	}
}

// purgeHook calls Purge from a hook.
type purgeHook struct {
	p   atomic.Pointer[Producer]
	err chan error
}

func (h *purgeHook) OnBatchSent(BatchInfo) {
	if p := h.p.Load(); p != nil && h.p.CompareAndSwap(p, nil) {
		h.err <- p.Purge(context.Background())
	}
}

// TestPurgeRefusals: from a record callback or a hook Purge returns
// ErrInCallback, purging nothing; after Close ErrClosed; a nil ctx panics.
func TestPurgeRefusals(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, n := memCluster(t, broker.Config{Topics: []broker.TopicConfig{{Name: "t", Partitions: 1}}})
		h := &purgeHook{err: make(chan error, 1)}
		p := memProducer(t, c, n, Hooks(h), DeliveryTimeout(time.Hour))
		ctx := context.Background()
		fromCb := make(chan error, 1)
		p.Produce(ctx, toPartition("t", 0, []byte("a")), func(*Record, error) { fromCb <- p.Purge(ctx) })
		require.ErrorIs(t, <-fromCb, ErrInCallback)
		h.p.Store(p)
		var err error
		p.Produce(ctx, toPartition("t", 0, []byte("b")), func(_ *Record, e error) { err = e })
		require.ErrorIs(t, <-h.err, ErrInCallback)
		require.NoError(t, p.Flush(ctx))
		require.NoError(t, err, "nothing purged from the hook")
		var nilCtx context.Context
		require.PanicsWithValue(t, "producer: nil Context", func() { _ = p.Purge(nilCtx) })
		require.NoError(t, p.Close(ctx))
		require.ErrorIs(t, p.Purge(ctx), ErrClosed)
	})
}

// TestPurgeConcurrentWithProduce hammers Purge against producers on four
// partitions (run it with -race): every record gets exactly one callback,
// nil or ErrPurged; callbacks come in produce order per partition;
// acknowledged records are in the log once at their offsets, in order,
// and purged ones are not in it at all; buffer.memory is all given back.
func TestPurgeConcurrentWithProduce(t *testing.T) {
	t.Parallel()
	const parts, per = 4, 1500
	c := startCluster(t, broker.Config{Nodes: 1, Topics: []broker.TopicConfig{{Name: "t", Partitions: parts, Window: 20}}})
	p := newTestProducer(t, c, Linger(2*time.Millisecond), BatchSize(1024))
	ctx := context.Background()
	var mu sync.Mutex
	next := make([]int, parts) // next sequence each partition's callbacks must report
	acked := make([]map[int]int64, parts)
	purged := make([]map[int]bool, parts)
	for i := range parts {
		acked[i], purged[i] = map[int]int64{}, map[int]bool{}
	}
	// Metadata and the producer id first, so records are not all purged
	// while they wait for them.
	warm := p.ProduceSync(ctx, toPartition("t", 0, []byte("warm")))
	require.NoError(t, warm.FirstErr())
	var wg sync.WaitGroup
	var stop atomic.Bool
	var purges atomic.Int64
	go func() {
		for !stop.Load() {
			if err := p.Purge(ctx); err != nil {
				t.Errorf("Purge: %v", err)
				return
			}
			purges.Add(1)
			time.Sleep(time.Duration(purges.Load()%3) * time.Millisecond)
		}
	}()
	var producers sync.WaitGroup
	for part := range int32(parts) {
		producers.Add(1)
		go func() {
			defer producers.Done()
			for i := range per {
				if i%50 == 49 {
					time.Sleep(time.Millisecond) // let batches go out between purges
				}
				wg.Add(1)
				p.Produce(ctx, toPartition("t", part, value("p", part, i, 40)), func(r *Record, err error) {
					defer wg.Done()
					mu.Lock()
					defer mu.Unlock()
					if next[part] != i {
						t.Errorf("partition %d: callback of record %d, expected %d", part, i, next[part])
					}
					next[part] = i + 1
					switch {
					case err == nil:
						acked[part][i] = r.Offset
					case errors.Is(err, ErrPurged):
						purged[part][i] = true
					default:
						t.Errorf("record %d/%d: %v", part, i, err)
					}
				})
			}
		}()
	}
	producers.Wait()
	stop.Store(true)
	wg.Wait()
	require.NoError(t, p.Flush(ctx))
	require.Zero(t, p.mem.Held(), "buffer.memory all given back")
	total := 0
	for part := range int32(parts) {
		total += len(purged[part])
		var last int64 = -1
		seen := map[int]bool{}
		for _, r := range c.Records("t", part) {
			_, rp, seq, ok := parseValue(r.Value)
			if !ok && string(r.Value) == "warm" {
				continue
			}
			require.True(t, ok)
			require.Equal(t, part, rp)
			require.False(t, purged[part][seq], "purged record %d/%d is in the log", part, seq)
			require.False(t, seen[seq], "record %d/%d twice", part, seq)
			seen[seq] = true
			off, ok := acked[part][seq]
			require.True(t, ok, "record %d/%d in the log without an acknowledgement", part, seq)
			require.Equal(t, r.Offset, off)
			require.Greater(t, off, last, "in order")
			last = off
		}
		require.Len(t, seen, len(acked[part]), "every acknowledged record is in the log")
	}
	t.Logf("%d purges, %d of %d records purged", purges.Load(), total, parts*per)
	assert.Positive(t, total, "some records were purged")
	assert.Less(t, total, parts*per, "some records were delivered")
}

// rejections counts rejected attempts that will be retried.
type rejections struct{ retrying atomic.Int64 }

func (h *rejections) OnBatchRejected(_ BatchInfo, _ error, retrying bool) {
	if retrying {
		h.retrying.Add(1)
	}
}

// TestPurgeKeepsRecordsWaitingToBeResent: a batch refused with a
// retriable error waits out its backoff to be sent again; Purge leaves it
// alone (it was sent: it keeps its own outcome) and it is delivered.
func TestPurgeKeepsRecordsWaitingToBeResent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, n := memCluster(t, broker.Config{Topics: []broker.TopicConfig{{Name: "t", Partitions: 1}}})
		h := &rejections{}
		p := memProducer(t, c, n, Hooks(h), RetryBackoff(5*time.Second), RetryBackoffMax(5*time.Second), DeliveryTimeout(time.Hour))
		pc := newPurgeCalls()
		ctx := context.Background()
		p.Produce(ctx, toPartition("t", 0, []byte("warm")), pc.cb("warm"))
		pc.wg.Wait()
		c.InjectError("t", 0, kerr.NotEnoughReplicas.Code, 1)
		p.Produce(ctx, toPartition("t", 0, []byte("A")), pc.cb("A"))
		for h.retrying.Load() == 0 {
			time.Sleep(time.Millisecond)
		}
		require.NoError(t, p.Purge(ctx))
		pc.wg.Wait()
		require.NoError(t, pc.errs["A"], "a record waiting to be sent again is not purged")
		require.Equal(t, int64(1), pc.recs["A"].Offset)
	})
}
