package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/longhaul-kafka/longhaul/producer"
)

// clientKind is one column of the comparison.
type clientKind struct {
	name   string // as printed and as given to --clients
	kgo    bool
	java   bool // Kafka's ProducerPerformance in a child JVM (--target kafka*)
	window int  // topic window the broker announces (producer.state.batches.to.retain)
	cap5   bool // longhaul with MaxWindow(5): what clients without KIP-1269 do
	noCoal bool // longhaul with longhaul.coalesce.requests=0: a lingered batch goes as soon as its partition may send
	// kafka40: against an embedded broker that behaves as Kafka 4.0
	// (Produce capped at v12, a transaction's first batch accepted at any
	// sequence): the producer re-arms every partition's first-batch gate
	// at each transaction version 2 epoch bump, and no window is
	// announced (KIP-1269 answers are v14). Embedded target only.
	kafka40 bool
	// split > 1: that many longhaul producers, each with its own
	// connection, on an equal share of the partitions (lh-w50x2): what
	// several connections per broker could buy, as an upper bound.
	split int
}

// allClients are the clients of the matrix, in print order.
var allClients = []clientKind{
	{name: "lh-w5", window: 5},
	{name: "lh-w20", window: 20},
	{name: "lh-w50", window: 50},
	{name: "lh-cap5", window: 50, cap5: true},
	{name: "lh-w5-nc", window: 5, noCoal: true},
	{name: "lh-w50-nc", window: 50, noCoal: true},
	{name: "lh-w50x2", window: 50, split: 2},
	{name: "lh-w5-k40", window: 5, kafka40: true},
	{name: "kgo", window: 50, kgo: true},
	{name: "java", window: 50, java: true},
}

// kgoMaxInflight is what kgo allows per broker with idempotence: 5 produce
// requests (4 until the first response), each with at most one batch per
// partition; MaxProduceRequestsInflightPerBroker is rejected when
// idempotent, so this is its best setting.
const kgoMaxInflight = 5

// javaMaxInflight is the Java producer's max.in.flight.requests.per.connection
// limit with idempotence, the value the java client runs with.
const javaMaxInflight = 5

// perPartitionWindow is how many batches of one partition the client can
// have in flight: the announced window, or 5 for clients without KIP-1269,
// never more than the requests one connection may have in flight.
func (k clientKind) perPartitionWindow(maxInFlight int) int {
	switch {
	case k.kgo:
		return kgoMaxInflight
	case k.java:
		return javaMaxInflight
	case k.cap5:
		return min(5, maxInFlight)
	default:
		return min(k.window, maxInFlight)
	}
}

// caseState is what a client's callbacks report into; written from
// callback goroutines, read by the measuring goroutine. Acknowledged
// records are the histogram's total (acked), not a counter of their own:
// one atomic add per record instead of two on the callback path.
type caseState struct {
	failed   atomic.Int64
	stopping atomic.Bool // set when production stops: later failures are the shutdown's
	hist     histogram
	firstErr atomic.Pointer[error]
}

// acked is how many records were acknowledged so far.
func (st *caseState) acked() int64 { return total(st.hist.snapshot()) }

// fail is apart from cbTally.done because taking err's address moves it
// to the heap for the whole function: in done that would be one allocation
// per record, charged to the client under test.
func (st *caseState) fail(err error) {
	if !st.stopping.Load() {
		st.failed.Add(1)
		st.firstErr.CompareAndSwap(nil, &err)
	}
}

// clientConfig is the workload given to both clients.
type clientConfig struct {
	addr        string
	topics      []string // records go to them in turn
	recordSize  int
	batchSize   int
	linger      time.Duration
	bufferBytes int64
	maxInFlight int // longhaul max.in.flight.requests.per.connection
	// rate, if > 0, is the offered load in records/s (open loop, --rate);
	// 0 produces as fast as the client accepts.
	rate float64
	// keyed: every record gets an 8-byte key, a counter.
	keyed bool
	// ownValues: every record has its own value buffer, recycled with it,
	// and the loop writes a counter into it before each produce.
	ownValues bool
	// trace: record the pipeline (pipeTrace, kgoPipe) for --shape.
	trace bool
	// heap (--heap): recycle records through a freeList, whose spares a
	// heap reading can drop, instead of a recQueue's fixed slab.
	heap bool
	// onlyParts, if set, are the partitions of topics[0] this longhaul
	// client writes (split clients), a batch's worth of records to each
	// in turn, as the sticky partitioner would.
	onlyParts []int32
}

// valueFor returns the value the next record carries: the shared one, or,
// with ownValues, v (allocated on first use) with n in its first bytes.
func (cfg clientConfig) valueFor(v, shared []byte, n uint64) []byte {
	if !cfg.ownValues {
		return shared
	}
	// A record that carried the shared value gets its own buffer: writing
	// the counter into the shared one would leave every record one value.
	if len(v) != cfg.recordSize || len(v) > 0 && &v[0] == &shared[0] {
		v = make([]byte, cfg.recordSize)
	}
	if len(v) >= 8 {
		binary.BigEndian.PutUint64(v, n)
	}
	return v
}

// setKey writes the next counter value into key, reusing its array.
func setKey(key []byte, n uint64) []byte {
	if cap(key) < 8 {
		key = make([]byte, 8)
	}
	key = key[:8]
	binary.BigEndian.PutUint64(key, n)
	return key
}

// produceLoop is what a client runs until stop: produce records as fast as
// the client accepts them. Records are recycled (recQueue, or freeList
// with --heap) once their callback ran, so the loop itself does not
// allocate per record in steady state.
type produceLoop interface {
	run(ctx context.Context, st *caseState)
	flush(ctx context.Context)
	// dropFree empties the record free list, so a heap reading counts
	// the client, not the bench's spare records.
	dropFree()
	// shape counts what was sent so far (--shape).
	shape() reqShape
	// pipe reads the pipeline trace (--shape; zero without it) and every
	// response time recorded so far.
	pipe() (pipeSnap, []int32)
	close()
}

// reqShape counts produce requests, the batches they carried and the
// records acknowledged: how full requests and batches were.
type reqShape struct{ requests, batches, records int64 }

func (l *longhaulLoop) shape() reqShape {
	st := l.p.Stats()
	return reqShape{st.ProduceRequests, st.BatchesSent, st.RecordsSent}
}

func (l *longhaulLoop) pipe() (pipeSnap, []int32) {
	if l.trace == nil {
		return pipeSnap{}, nil
	}
	return l.trace.snapshot()
}

func (k *kgoLoop) pipe() (pipeSnap, []int32) {
	if k.trace == nil {
		return pipeSnap{}, nil
	}
	return k.trace.snapshot()
}

func (k *kgoLoop) shape() reqShape {
	return reqShape{k.hooks.requests.Load(), k.hooks.batches.Load(), k.hooks.records.Load()}
}

// kgoShapeHooks counts kgo's produce requests (OnBrokerWrite of key 0) and
// the batches written in them.
type kgoShapeHooks struct{ requests, batches, records atomic.Int64 }

func (h *kgoShapeHooks) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if key == 0 && err == nil {
		h.requests.Add(1)
	}
}

func (h *kgoShapeHooks) OnProduceBatchWritten(_ kgo.BrokerMetadata, _ string, _ int32, m kgo.ProduceBatchMetrics) {
	h.batches.Add(1)
	h.records.Add(int64(m.NumRecords))
}

// freeList recycles records from the callbacks to the produce loop, so
// the loop does not allocate per record in steady state. Callbacks put one
// record at a time under mu; the loop takes up to freeBatch at once into
// its own slice, so the two goroutines meet once per freeBatch records.
// (A channel costs a send and a receive per record, which the profile
// charges to the client under test; HISTORY.md has the measurement.)
type freeList[T any] struct {
	mu   sync.Mutex
	recs []T
	max  int
}

// freeBatch is the most records the loop takes from a freeList at once;
// it bounds the spares a heap reading (--heap) still finds in the loop.
const freeBatch = 64

func newFreeList[T any](max int) *freeList[T] {
	return &freeList[T]{recs: make([]T, 0, max), max: max}
}

// put keeps r for reuse, unless max records are already kept.
func (f *freeList[T]) put(r T) {
	f.mu.Lock()
	if len(f.recs) < f.max {
		f.recs = append(f.recs, r)
	}
	f.mu.Unlock()
}

// take appends up to freeBatch kept records to dst[:0] and returns it.
func (f *freeList[T]) take(dst []T) []T {
	f.mu.Lock()
	k := max(len(f.recs)-freeBatch, 0)
	dst = append(dst[:0], f.recs[k:]...)
	clear(f.recs[k:])
	f.recs = f.recs[:k]
	f.mu.Unlock()
	return dst
}

// drop forgets every kept record.
func (f *freeList[T]) drop() {
	f.mu.Lock()
	clear(f.recs)
	f.recs = f.recs[:0]
	f.mu.Unlock()
}

// recQueue recycles records from one slab, for the closed and open loops
// outside --heap. A slot is free again once its callback ran and the
// callbacks gave back the run of queueRun slots it is in, and the loop
// takes free slots oldest first: in about the order it handed them out
// (both clients call back in send order within a partition, and a batch's
// records are consecutive slots), so the loop and the callbacks walk the
// slab and the stamps beside it nearly in order, which the CPU's
// prefetcher follows, and the loop writes records the client's
// acknowledgement path finished with thousands of records ago, not lines
// that core may still be writing.
//
// Handing the latest record given back out first (recycling as a stack)
// saves neither client anything against this order and costs the loop
// stalls on lines another core has just written. Freeing slots a block at
// a time, only once all of a block's records are back, would make the loop
// scan for a free block whenever one record of each block is still out,
// the common case for kgo, which holds records of several partitions in
// one block longer than longhaul does. examples/bench/CPU.md has the
// measurements of both.
//
// The record's send stamp is kept in sent, an array beside the slab, and
// the callback finds a record's slot from its address, so the callback
// never reads the record: on Kafka records wait 100-200 ms in a full
// 32 MiB buffer, so reading r.Timestamp there is a cache miss per record,
// which at 100-byte records the profile charges to the client under test
// (HISTORY.md).
//
// Slots move between the two sides in runs of queueRun, under mu: a
// client's callbacks, which both clients run one at a time (longhaul's
// Producer.Produce, kgo's Client.Produce), collect their slots in a run of
// their own (cbTally) and append it to free when it is full; the loop
// takes the oldest queueRun slots of free. So one lock per run of records
// on each side, not a lock per record, and no locked instruction per
// record in the callback (an atomic store per record drains the store
// buffer after kgo's writes to the record).
type recQueue[T any] struct {
	recs []T
	sent []int64 // per slot: the send stamp (benchClock), written by the loop

	mu   sync.Mutex
	free []int32 // slots given back, a circular queue of len(recs): no slot is in it twice
	head int     // free[head] is the oldest
	n    int     // how many are queued

	spare []int32 // the loop's: taken from free, handed out from next on
	next  int
}

// queueRun is the slots the callbacks give back and the loop takes at once.
const queueRun = 64

// newRecQueue makes a slab of n records, each passed to init, all free.
func newRecQueue[T any](n int, init func(*T)) *recQueue[T] {
	n = max(n, 1)
	g := &recQueue[T]{recs: make([]T, n), sent: make([]int64, n), free: make([]int32, n), n: n, spare: make([]int32, 0, queueRun)}
	for i := range g.free {
		g.free[i] = int32(i)
		if init != nil {
			init(&g.recs[i])
		}
	}
	return g
}

// take returns a free slot and its record, the oldest given back first,
// or -1 and nil when none is free (the client holds every record of the
// slab but the runs its callbacks have not given back; the loop then
// allocates). Loop goroutine only.
func (g *recQueue[T]) take() (int, *T) {
	if g.next == len(g.spare) {
		g.mu.Lock()
		k := min(g.n, queueRun)
		end := min(g.head+k, len(g.free))
		g.spare = append(g.spare[:0], g.free[g.head:end]...)
		g.spare = append(g.spare, g.free[:k-(end-g.head)]...) // wrapped
		g.head = (g.head + k) % len(g.free)
		g.n -= k
		g.mu.Unlock()
		g.next = 0
		if k == 0 {
			return -1, nil
		}
	}
	s := g.spare[g.next]
	g.next++
	return int(s), &g.recs[s]
}

// give makes the slots of run free, after every slot given before. Callback
// side, one run at a time.
func (g *recQueue[T]) give(run []int32) {
	g.mu.Lock()
	for _, s := range run {
		g.free[(g.head+g.n)%len(g.free)] = s
		g.n++
	}
	g.mu.Unlock()
}

// stamp records that slot s's record was sent at t. The write is plain: the callback
// reads it after the client's own synchronization between Produce and
// the callback.
func (g *recQueue[T]) stamp(s int, t int64) { g.sent[s] = t }

// slot returns r's slot, or -1 when r is not from the slab (or g is nil).
func (g *recQueue[T]) slot(r *T) int {
	if g == nil {
		return -1
	}
	off := uintptr(unsafe.Pointer(r)) - uintptr(unsafe.Pointer(&g.recs[0]))
	s := off / unsafe.Sizeof(g.recs[0])
	if s >= uintptr(len(g.recs)) || off%unsafe.Sizeof(g.recs[0]) != 0 {
		return -1
	}
	return int(s)
}

// cbTally is the callback side of one client: callbacks run one at a
// time, so it counts without atomics and publishes in runs. Latencies go
// to st.hist one run of equal buckets at a time (a batch's records mostly
// share one 6 % bucket), at most tallyRun records or tallyAge of time per
// run; slots go back to the queue queueRun at a time. A run not yet
// published when the window's edge is sampled is counted in the next
// window: at most tallyRun records or one batch, against the millions
// (RTT 0) or tens of thousands (RTT 150 ms, 1 partition) a window counts.
type cbTally[T any] struct {
	st    *caseState
	queue *recQueue[T]
	bkt   int             // the pending latency run's bucket
	n     int64           // its records
	since int64           // its first record's clock reading
	run   [queueRun]int32 // slots called back and not yet given back
	nr    int             // how many of run
}

const (
	tallyRun = 256
	tallyAge = int64(time.Millisecond)
)

// done records the outcome of r, sent at r.Timestamp if not from the queue.
func (t *cbTally[T]) done(r *T, ts func(*T) time.Time, err error) {
	var sent int64
	s := t.queue.slot(r)
	if s >= 0 {
		sent = t.queue.sent[s]
		t.run[t.nr] = int32(s)
		if t.nr++; t.nr == queueRun {
			t.queue.give(t.run[:])
			t.nr = 0
		}
	} else {
		sent = nsOf(ts(r))
	}
	if err != nil {
		t.st.fail(err)
		return
	}
	now := clk.now()
	b := bucketOf(uint64(max(now-sent, 0) / 1000))
	if b != t.bkt || t.n >= tallyRun || now-t.since > tallyAge {
		t.flushHist()
		t.bkt, t.since = b, now
	}
	t.n++
}

func (t *cbTally[T]) flushHist() {
	if t.n > 0 {
		t.st.hist.counts[t.bkt].Add(t.n)
		t.n = 0
	}
}

// queueSize is the slab's records: a quarter more than the most records a
// client may hold (buffer.memory at the record size, kgo's
// MaxBufferedRecords, and 4096), as the ring had, so that the loop reuses
// records the client finished with long ago and never runs dry.
func queueSize(cfg clientConfig) int { return freeListCap(cfg) + freeListCap(cfg)/4 }

// longhaulLoop drives a longhaul producer.
type longhaulLoop struct {
	p     *producer.Producer
	trace *pipeTrace // nil without --shape
	cfg   clientConfig
	value []byte
	// queue recycles records; nil with --heap, where free does (a heap
	// reading drops its spares).
	queue *recQueue[producer.Record]
	free  *freeList[*producer.Record]
	// perBatch is how many records go to one partition before the next
	// (cfg.onlyParts).
	perBatch uint64
}

func newLonghaul(cfg clientConfig, k clientKind) (*longhaulLoop, error) {
	opts := []producer.Opt{
		producer.BootstrapServers(cfg.addr),
		producer.BatchSize(cfg.batchSize),
		producer.Linger(cfg.linger),
		producer.BufferMemory(cfg.bufferBytes),
		producer.MaxRequestSize(cfg.requestCap()),
		producer.MaxInFlightRequestsPerConnection(cfg.maxInFlight),
		producer.Property("acks", "all"),
	}
	if k.cap5 {
		opts = append(opts, producer.MaxWindow(5))
	}
	if k.noCoal {
		opts = append(opts, producer.Property("longhaul.coalesce.requests", "0"))
	}
	var trace *pipeTrace
	if cfg.trace {
		trace = newPipeTrace()
		opts = append(opts, producer.Hooks(trace))
	}
	p, err := producer.New(opts...)
	if err != nil {
		return nil, err
	}
	// Records a batch of cfg.batchSize holds: 61 bytes of RecordBatch
	// header, about 12 per record besides the value (keyless).
	perBatch := uint64(max(1, (cfg.batchSize-61)/(cfg.recordSize+12)))
	l := &longhaulLoop{p: p, trace: trace, cfg: cfg, value: make([]byte, cfg.recordSize), perBatch: perBatch}
	if cfg.heap {
		l.free = newFreeList[*producer.Record](freeListCap(cfg))
	} else {
		l.queue = newRecQueue(queueSize(cfg), func(r *producer.Record) { r.Topic, r.Value = cfg.topics[0], l.value })
	}
	return l, nil
}

// splitLoop runs several longhaul producers, each on its own share of the
// partitions, and reports them as one client.
type splitLoop struct {
	loops []*longhaulLoop
	// merged is every loop's response times in the order pipe first saw
	// them, so that it only grows, as pipeBetween expects; seen counts
	// what was taken from each loop.
	mu     sync.Mutex
	merged []int32
	seen   []int
}

// newSplitLonghaul makes k.split longhaul clients over partitions
// 0..parts-1 of cfg.topics[0], dealt out in turn, each with an equal share
// of cfg.bufferBytes.
func newSplitLonghaul(cfg clientConfig, k clientKind, parts int) (*splitLoop, error) {
	s := &splitLoop{seen: make([]int, k.split)}
	for i := range k.split {
		c := cfg
		c.bufferBytes = cfg.bufferBytes / int64(k.split)
		c.onlyParts = nil
		for p := i; p < parts; p += k.split {
			c.onlyParts = append(c.onlyParts, int32(p))
		}
		l, err := newLonghaul(c, k)
		if err != nil {
			s.close()
			return nil, err
		}
		s.loops = append(s.loops, l)
	}
	return s, nil
}

func (s *splitLoop) run(ctx context.Context, st *caseState) {
	var wg sync.WaitGroup
	for _, l := range s.loops {
		wg.Add(1)
		go func() { defer wg.Done(); l.run(ctx, st) }()
	}
	wg.Wait()
}

func (s *splitLoop) flush(ctx context.Context) {
	for _, l := range s.loops {
		l.flush(ctx)
	}
}

func (s *splitLoop) dropFree() {
	for _, l := range s.loops {
		l.dropFree()
	}
}

func (s *splitLoop) shape() reqShape {
	var sum reqShape
	for _, l := range s.loops {
		sh := l.shape()
		sum.requests += sh.requests
		sum.batches += sh.batches
		sum.records += sh.records
	}
	return sum
}

func (s *splitLoop) pipe() (pipeSnap, []int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var sum pipeSnap
	for i, l := range s.loops {
		snap, resp := l.pipe()
		if snap.at.After(sum.at) {
			sum.at = snap.at
		}
		sum.ackedBytes += snap.ackedBytes
		sum.acked += snap.acked
		sum.inFlightSecs += snap.inFlightSecs
		sum.limitSum += snap.limitSum
		s.merged = append(s.merged, resp[s.seen[i]:snap.responses]...)
		s.seen[i] = snap.responses
	}
	sum.responses = len(s.merged)
	return sum, s.merged
}

func (s *splitLoop) close() {
	for _, l := range s.loops {
		l.close()
	}
}

func freeListCap(cfg clientConfig) int {
	return int(cfg.bufferBytes/int64(cfg.recordSize)) + 4096
}

func (l *longhaulLoop) run(ctx context.Context, st *caseState) {
	queue, free := l.queue, l.free
	tally := &cbTally[producer.Record]{st: st, queue: queue}
	cb := func(r *producer.Record, err error) {
		tally.done(r, lhTimestamp, err)
		if free != nil {
			free.put(r)
		}
	}
	var spare []*producer.Record // taken from free, freeBatch at a time
	var pace *pacer
	if l.cfg.rate > 0 {
		pace = newPacer(l.cfg.rate)
	}
	own := l.cfg.ownValues
	var n uint64
	for !st.stopping.Load() { // cheaper than ctx.Err per record; runCase sets it before cancelling ctx
		var r *producer.Record
		slot := -1
		if queue != nil {
			slot, r = queue.take()
		} else {
			if len(spare) == 0 {
				spare = free.take(spare)
			}
			if n := len(spare); n > 0 {
				r, spare = spare[n-1], spare[:n-1]
			}
		}
		if r == nil {
			r = &producer.Record{Topic: l.cfg.topics[0], Value: l.value}
		}
		n++
		if len(l.cfg.topics) > 1 {
			r.Topic = l.cfg.topics[n%uint64(len(l.cfg.topics))]
		}
		if l.cfg.keyed {
			r.Key = setKey(r.Key, n)
		}
		if len(l.cfg.onlyParts) > 0 {
			r.SetPartition(l.cfg.onlyParts[(n/l.perBatch)%uint64(len(l.cfg.onlyParts))])
		}
		if own {
			r.Value = l.cfg.valueFor(r.Value, l.value, n)
		}
		// Produce resets a reused record's partition and offset itself.
		t := stamp(pace)
		if slot >= 0 {
			queue.stamp(slot, t)
		}
		r.Timestamp = timeOf(t)
		l.p.Produce(ctx, r, cb)
	}
}

func lhTimestamp(r *producer.Record) time.Time { return r.Timestamp }

func (l *longhaulLoop) flush(ctx context.Context) { _ = l.p.Flush(ctx) }
func (l *longhaulLoop) dropFree() {
	if l.free != nil {
		l.free.drop()
	}
}

func (l *longhaulLoop) close() {
	ctx, cancel := waitCtx(3 * time.Second)
	defer cancel()
	_ = l.p.Close(ctx)
}

// kgoLoop drives a franz-go client with idempotence on (its default).
type kgoLoop struct {
	cl     *kgo.Client
	cfg    clientConfig
	hooks  *kgoShapeHooks
	trace  *kgoPipe // nil without --shape
	rate   float64
	keyed  bool
	topics []string
	value  []byte
	queue  *recQueue[kgo.Record] // nil with --heap, where free recycles
	free   *freeList[*kgo.Record]
}

func newKgo(cfg clientConfig) (*kgoLoop, error) {
	hooks := new(kgoShapeHooks)
	var trace *kgoPipe
	allHooks := []kgo.Hook{hooks}
	if cfg.trace {
		trace = new(kgoPipe)
		allHooks = append(allHooks, trace)
	}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(cfg.addr),
		kgo.DefaultProduceTopic(cfg.topics[0]),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(cfg.linger),
		kgo.ProducerBatchMaxBytes(int32(cfg.batchSize)),
		// The same request cap as longhaul's max.request.size: the
		// embedded broker closes a connection on a frame over 8 MiB, and
		// kgo's default (100 MiB) let a request of 1 000 full batches
		// (16 MB) be refused and retried forever: 0 records/s.
		kgo.BrokerMaxWriteBytes(int32(cfg.requestCap())),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.MaxBufferedBytes(int(cfg.bufferBytes)),
		kgo.MaxBufferedRecords(int(cfg.bufferBytes/int64(cfg.recordSize))+1),
		// Sticky per batch, as the Java client and longhaul do for
		// records without a key.
		kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)),
		kgo.DisableClientMetrics(),
		kgo.WithHooks(allHooks...),
	)
	if err != nil {
		return nil, fmt.Errorf("kgo: %w", err)
	}
	k := &kgoLoop{cl: cl, cfg: cfg, hooks: hooks, trace: trace, rate: cfg.rate, keyed: cfg.keyed, topics: cfg.topics, value: make([]byte, cfg.recordSize)}
	if cfg.heap {
		k.free = newFreeList[*kgo.Record](freeListCap(cfg))
	} else {
		k.queue = newRecQueue[kgo.Record](queueSize(cfg), nil)
	}
	return k, nil
}

func (k *kgoLoop) run(ctx context.Context, st *caseState) {
	queue, free := k.queue, k.free
	tally := &cbTally[kgo.Record]{st: st, queue: queue}
	promise := func(r *kgo.Record, err error) {
		tally.done(r, kgoTimestamp, err)
		if free != nil {
			free.put(r)
		}
	}
	var spare []*kgo.Record // taken from free, freeBatch at a time
	var pace *pacer
	if k.rate > 0 {
		pace = newPacer(k.rate)
	}
	own := k.cfg.ownValues
	var n uint64
	for !st.stopping.Load() { // cheaper than ctx.Err per record; runCase sets it before cancelling ctx
		var r *kgo.Record
		slot := -1
		if queue != nil {
			slot, r = queue.take()
		} else {
			if len(spare) == 0 {
				spare = free.take(spare)
			}
			if n := len(spare); n > 0 {
				r, spare = spare[n-1], spare[:n-1]
			}
		}
		if r == nil {
			r = new(kgo.Record)
		}
		key, value := r.Key, k.value
		n++
		if own {
			value = k.cfg.valueFor(r.Value, k.value, n)
		}
		t := stamp(pace)
		if slot >= 0 {
			queue.stamp(slot, t)
		}
		*r = kgo.Record{Value: value, Timestamp: timeOf(t)}
		if len(k.topics) > 1 {
			r.Topic = k.topics[n%uint64(len(k.topics))]
		}
		if k.keyed {
			r.Key = setKey(key, n)
		}
		k.cl.Produce(ctx, r, promise)
	}
}

func kgoTimestamp(r *kgo.Record) time.Time { return r.Timestamp }

func (k *kgoLoop) flush(ctx context.Context) { _ = k.cl.Flush(ctx) }
func (k *kgoLoop) dropFree() {
	if k.free != nil {
		k.free.drop()
	}
}

func (k *kgoLoop) close() { k.cl.Close() }

// requestCap is both clients' largest request: the buffer (so a request
// can carry a full batch of many partitions), at most 6 MiB (the embedded
// broker refuses frames over 8 MiB), at least one batch (kgo refuses a
// write cap below its batch size).
func (cfg clientConfig) requestCap() int {
	return max(cfg.batchSize, int(min(cfg.bufferBytes, 6<<20)))
}
