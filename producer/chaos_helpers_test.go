package producer

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-kafka/longhaul/internal/broker"
	"github.com/longhaul-kafka/longhaul/internal/logcheck"
	"github.com/longhaul-kafka/longhaul/internal/memnet"
	"github.com/longhaul-kafka/longhaul/internal/testkit"
	"github.com/longhaul-kafka/longhaul/protocol"
)

// Helpers for tests on virtual time (testing/synctest): the embedded broker
// on an in-memory network, producers dialing it, a ledger of every record's
// outcome, and checkOutcome, the one checker of the producer's promise.

// memCluster starts an embedded broker on its own in-memory network. Call
// it inside a synctest bubble; the cluster closes at cleanup (after the
// producers, which are registered later).
func memCluster(t testing.TB, cfg broker.Config) (*broker.Cluster, *memnet.Network) {
	t.Helper()
	n := memnet.New()
	cfg.Listen = n.Listen
	return testkit.StartCluster(t, cfg), n
}

// memProducer returns a producer dialing the in-memory network, with short
// timeouts suited to virtual time, closed at cleanup.
func memProducer(t testing.TB, c *broker.Cluster, n *memnet.Network, opts ...Opt) *Producer {
	t.Helper()
	base := []Opt{
		BootstrapServers(c.Addr()),
		Dialer(n.Dial),
		Linger(time.Millisecond),
		RetryBackoff(5 * time.Millisecond),
		RetryBackoffMax(50 * time.Millisecond),
		RequestTimeout(time.Second),
		DeliveryTimeout(6 * time.Second),
		MaxInFlightRequestsPerConnection(50),
		BatchSize(512),
	}
	base = append(base, optFunc(func(c *config) error {
		c.regress, c.probe = regressFromEnv(), new(senderProbe)
		return nil
	}))
	p, err := New(append(base, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		p.Close(ctx)
	})
	return p
}

// memoryReleased reports whether every byte of buffer.memory is free
// again (call after Close, or once every callback ran).
func memoryReleased(p *Producer) bool {
	if !p.mem.TryAcquire(p.cfg.bufferMemory) {
		return false
	}
	p.mem.Release(p.cfg.bufferMemory)
	return true
}

// recKey names one record: its producer's name, partition and sequence
// within that producer and partition (encoded in the value, see value()).
type recKey struct {
	prod string
	part int32
	seq  int
}

func (k recKey) String() string { return fmt.Sprintf("%s/%d/%d", k.prod, k.part, k.seq) }

// recResult is what the callbacks said about one record.
type recResult struct {
	calls int
	err   error
	// produced is when Produce returned: a wait for buffer.memory before
	// that is not the record's delivery time (delivery.timeout.ms counts
	// from its batch's creation).
	produced time.Time
	done     time.Time
}

// ledger produces numbered records for one producer and keeps every
// callback's outcome and the callback order per partition.
type ledger struct {
	name  string
	topic string
	mu    sync.Mutex
	res   map[recKey]*recResult
	order map[int32][]int // partition -> sequences in callback order
	next  map[int32]int
	wg    sync.WaitGroup
	// mem, if set, samples the producer's buffer.memory after each
	// Produce and in each callback (memWatch).
	mem *memWatch
	// wait, if > 0, bounds each Produce's wait for buffer.memory: a record
	// still waiting then fails with context.DeadlineExceeded (a producer
	// that never frees its memory would otherwise hang the test).
	wait time.Duration
}

func newLedger(name, topic string) *ledger {
	return &ledger{name: name, topic: topic, res: map[recKey]*recResult{}, order: map[int32][]int{}, next: map[int32]int{}}
}

// keyless, as produce's partition, sends records without a partition or
// key: the partitioner places them.
const keyless int32 = -1

// produce sends n records of size bytes to part, numbered on from the last.
//
// With part keyless the partitioner places each record, and the ledger
// numbers them in one sequence across partitions. A keyless record is filed
// under partition keyless until its callback says where it went, and then
// under that partition: each partition's keyless records form a stream of
// their own (produce order, with gaps), checked like any other. A ledger
// should send either keyless records or records to fixed partitions, not
// both, since the two would share streams.
func (l *ledger) produce(p *Producer, part int32, n, size int) {
	for range n {
		l.mu.Lock()
		seq := l.next[part]
		l.next[part]++
		k := recKey{l.name, part, seq}
		rr := &recResult{}
		l.res[k] = rr
		l.mu.Unlock()
		r := &Record{Topic: l.topic, Value: value(l.name, part, seq, size)}
		if part != keyless {
			r.SetPartition(part)
		}
		l.wg.Add(1)
		ctx, cancel := context.Background(), context.CancelFunc(func() {})
		if l.wait > 0 {
			ctx, cancel = context.WithTimeout(ctx, l.wait)
		}
		called := time.Now()
		p.Produce(ctx, r, func(r *Record, err error) {
			if l.mem != nil {
				l.mem.sample("a callback")
			}
			l.mu.Lock()
			rr.calls++
			rr.err = err
			rr.done = time.Now()
			got := part
			if part == keyless && r.Partition() >= 0 {
				got = r.Partition()
				delete(l.res, k)
				l.res[recKey{l.name, got, seq}] = rr
			}
			l.order[got] = append(l.order[got], seq)
			l.mu.Unlock()
			if rr.calls == 1 {
				l.wg.Done()
			}
		})
		cancel()
		now := time.Now()
		l.mu.Lock()
		rr.produced = now
		l.mu.Unlock()
		if l.mem != nil {
			l.mem.sample("Produce returned")
			if now.After(called) {
				l.mem.waited.Store(true) // on virtual time, only a wait for buffer.memory takes any
			}
		}
	}
}

// waitAll waits (on the bubble's clock) up to d for every callback; it
// reports whether they all ran.
func (l *ledger) waitAll(d time.Duration) bool {
	done := make(chan struct{})
	go func() { l.wg.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}

// failures lists the records that failed, with their errors.
func (l *ledger) failures() []string { return l.failuresExcept(nil) }

// failuresExcept lists the records that failed with an error other than
// those expected (nil: none), with their errors.
func (l *ledger) failuresExcept(expected func(error) bool) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for k, r := range l.res {
		if r.err != nil && (expected == nil || !expected(r.err)) {
			out = append(out, fmt.Sprintf("%v: %v", k, r.err))
		}
	}
	sort.Strings(out)
	return out
}

// logEntry is one record of ours found in a partition's log.
type logEntry struct {
	key    recKey
	offset int64
	pid    int64
}

// outcome is everything checkOutcome judges: what the callbacks said and
// what the log holds. Tests build it with collectOutcome; negative
// controls doctor it.
type outcome struct {
	results map[recKey]recResult
	order   map[string][]int     // "producer/partition" -> sequences in callback order
	logs    map[int32][]logEntry // partition -> our records in offset order
	// gone are the logs of earlier incarnations of the topic, deleted
	// since (addDeleted), oldest first.
	gone  []map[int32][]logEntry
	names map[string]bool // the ledgers' producer names
}

// addDeleted adds the logs of a deleted incarnation of the topic, as
// broker.Cluster.DeleteTopic returned them.
func (o *outcome) addDeleted(logs [][]broker.LogRecord) {
	m := map[int32][]logEntry{}
	for part, recs := range logs {
		for _, rec := range recs {
			if e, ok := ourEntry(o.names, int32(part), rec); ok {
				m[int32(part)] = append(m[int32(part)], e)
			}
		}
	}
	o.gone = append(o.gone, m)
}

// ourEntry returns rec as a logEntry if a ledger named in names wrote it
// to part, or wrote it keyless (the partitioner chose part).
func ourEntry(names map[string]bool, part int32, rec broker.LogRecord) (logEntry, bool) {
	name, vp, seq, ok := parseValue(rec.Value)
	if !ok || !names[name] || vp != part && vp != keyless {
		return logEntry{}, false
	}
	return logEntry{key: recKey{name, part, seq}, offset: rec.Offset, pid: rec.ProducerID}, true
}

// collectOutcome reads the ledgers and the broker's log of their topic.
func collectOutcome(c *broker.Cluster, topic string, partitions int32, ls ...*ledger) outcome {
	names := map[string]bool{}
	o := outcome{results: map[recKey]recResult{}, order: map[string][]int{}, logs: map[int32][]logEntry{}, names: names}
	for _, l := range ls {
		names[l.name] = true
		l.mu.Lock()
		for k, r := range l.res {
			o.results[k] = *r
		}
		for part, seqs := range l.order {
			o.order[fmt.Sprintf("%s/%d", l.name, part)] = append([]int(nil), seqs...)
		}
		l.mu.Unlock()
	}
	for part := range partitions {
		for _, rec := range c.Records(topic, part) {
			if e, ok := ourEntry(names, part, rec); ok {
				o.logs[part] = append(o.logs[part], e)
			}
		}
	}
	return o
}

// checkOutcome checks the producer's promise on one outcome and returns
// every violation (none: the promise held):
//   - every record got exactly one callback;
//   - callbacks ran in produce order within each producer's partition;
//   - the log holds each producer's partition as logcheck requires of
//     the callbacks' outcomes: every record acknowledged OK exactly once
//     (lost, dup), none twice, in produce order (reorder), and no record
//     failed without FateUnknown, or with ErrOrderLost (cause).
//
// When the topic was deleted and created again (outcome.gone), the logs
// are checked as incarnations (logcheck.Incarnations): each for dups and
// order on its own, and "in the log" means in any of them, since a record
// acked before the deletion is gone with the topic, and one written to the
// old topic without an ack may be written again to the new one.
func checkOutcome(o outcome) []string {
	type streamKey struct {
		prod string
		part int32
	}
	sent := map[streamKey][]recKey{}
	for k := range o.results {
		sk := streamKey{k.prod, k.part}
		sent[sk] = append(sent[sk], k)
	}
	incs := append(append([]map[int32][]logEntry(nil), o.gone...), o.logs)
	logs := map[streamKey][][]logcheck.Entry{}
	for i, inc := range incs {
		for part, entries := range inc {
			for _, e := range entries {
				sk := streamKey{e.key.prod, part}
				if logs[sk] == nil {
					logs[sk] = make([][]logcheck.Entry, len(incs))
				}
				logs[sk][i] = append(logs[sk][i], logcheck.Entry{Value: []byte(e.key.String()), Offset: e.offset})
			}
		}
	}
	streams := make([]streamKey, 0, len(sent)+len(logs))
	for sk := range sent {
		streams = append(streams, sk)
	}
	for sk := range logs {
		if _, ok := sent[sk]; !ok {
			streams = append(streams, sk)
		}
	}
	sort.Slice(streams, func(i, j int) bool {
		a, b := streams[i], streams[j]
		return a.prod < b.prod || a.prod == b.prod && a.part < b.part
	})
	prefix := map[logcheck.Kind]string{logcheck.Lost: "lost", logcheck.Duplicate: "dup", logcheck.Reorder: "reorder", logcheck.Written: "cause"}
	var v []string
	for _, sk := range streams {
		keys := sent[sk]
		sort.Slice(keys, func(i, j int) bool { return keys[i].seq < keys[j].seq })
		ss := make([]logcheck.Sent, len(keys))
		for i, k := range keys {
			r := o.results[k]
			ss[i] = logcheck.Sent{Value: []byte(k.String()), Outcome: logcheck.FateUnknown}
			switch {
			case r.calls != 1:
				v = append(v, fmt.Sprintf("callbacks: %v called back %d times", k, r.calls))
			case r.err == nil:
				ss[i].Outcome = logcheck.Acked
			case errors.Is(r.err, ErrOrderLost):
				ss[i].Outcome = logcheck.OrderLost
			case !IsFateUnknown(r.err):
				ss[i].Outcome = logcheck.NotWritten
			}
		}
		ls := logs[sk]
		if ls == nil {
			ls = make([][]logcheck.Entry, len(incs))
		}
		for _, x := range logcheck.Incarnations(ss, ls).Violations {
			p, ok := prefix[x.Kind]
			if !ok {
				p = x.Kind.String()
			}
			v = append(v, fmt.Sprintf("%s: partition %d: %s", p, sk.part, x.Msg))
		}
	}
	parts := make([]string, 0, len(o.order))
	for pp := range o.order {
		parts = append(parts, pp)
	}
	sort.Strings(parts)
	for _, pp := range parts {
		seqs := o.order[pp]
		for i := 1; i < len(seqs); i++ {
			if seqs[i] <= seqs[i-1] {
				v = append(v, fmt.Sprintf("callback order: %s seq %d called back after seq %d", pp, seqs[i], seqs[i-1]))
				break
			}
		}
	}
	return v
}

// firstN returns at most n elements of s, so a failure message stays short.
func firstN(s []string, n int) []string { return s[:min(n, len(s))] }

// batchBounds checks, as the broker reads them (broker.Config.OnProduce),
// the size rules of every produce request a producer sends, and keeps the
// first violations:
//   - no batch is larger than max.request.size (Produce refuses a record
//     that would make one: MaxRequestSize's doc);
//   - a batch of two or more records is at most batch.size, header
//     included (BatchSize's doc: only a record larger than that goes in a
//     batch of its own, alone), and at most max.request.size;
//   - a request carrying two or more batches holds at most
//     max.request.size bytes of batches (the request's own framing is not
//     counted, as the Java client counts it); one batch goes alone
//     whatever its size.
//
// Sizes are the RecordBatch's bytes on the wire, as the header's length
// field gives them (records uncompressed in the chaos test).
type batchBounds struct {
	batchSize, maxRequestSize int

	mu         sync.Mutex
	violations []string
	// fullest is the largest multi-record batch seen, in bytes, and
	// bound its bound (min of batch.size and max.request.size): how close
	// the batches came to the rule, so a run that never fills a batch
	// shows as such.
	fullest, bound int
	// sent is a digest of every request's batches, summed so it does not
	// depend on the order the broker's connections read them: two runs of
	// a schedule with the same digest sent the same batches.
	sent uint64
}

func newBatchBounds(batchSize, maxRequestSize int) *batchBounds {
	return &batchBounds{batchSize: batchSize, maxRequestSize: maxRequestSize, bound: min(batchSize, maxRequestSize)}
}

// request checks one produce request's batches (broker.Config.OnProduce).
func (bb *batchBounds) request(node int32, records [][]byte) {
	bb.mu.Lock()
	defer bb.mu.Unlock()
	h := fnv.New64a()
	fmt.Fprintf(h, "%d", node)
	for _, rec := range records {
		if len(rec) < protocol.RecordBatchOverhead {
			h.Write(rec)
			continue
		}
		// Not the producer id (bytes 43-50), which the broker hands out
		// to two producers in whichever order their requests come, nor
		// the CRC (17-20) that covers it.
		h.Write(rec[:17])
		h.Write(rec[21:43])
		h.Write(rec[51:])
	}
	bb.sent += h.Sum64()
	bad := func(format string, args ...any) {
		if len(bb.violations) < 5 {
			bb.violations = append(bb.violations, "batch size: "+fmt.Sprintf(format, args...))
		}
	}
	total := 0
	for i, rec := range records {
		// The RecordBatch header's length (bytes 8-11, counting from
		// byte 12) and record count (bytes 57-60); the broker checks the
		// rest (CRC, magic, counts) and answers a bad batch with an
		// error the checker sees as a failed record.
		if len(rec) < protocol.RecordBatchOverhead {
			bad("node %d: request's batch %d is %d bytes, shorter than a header", node, i, len(rec))
			continue
		}
		size := int(binary.BigEndian.Uint32(rec[8:])) + 12
		numRecords := int32(binary.BigEndian.Uint32(rec[57:]))
		if size != len(rec) {
			bad("node %d: request's batch %d is %d of the partition's %d bytes: not one batch", node, i, size, len(rec))
		}
		total += size
		switch {
		case size > bb.maxRequestSize:
			bad("node %d: a batch of %d record(s) is %d bytes, max.request.size %d", node, numRecords, size, bb.maxRequestSize)
		case numRecords > 1 && size > bb.batchSize:
			bad("node %d: a batch of %d records is %d bytes, batch.size %d", node, numRecords, size, bb.batchSize)
		}
		if numRecords > 1 {
			bb.fullest = max(bb.fullest, size)
		}
	}
	if len(records) > 1 && total > bb.maxRequestSize {
		bad("node %d: a request of %d batches carries %d bytes of them, max.request.size %d", node, len(records), total, bb.maxRequestSize)
	}
}

// result returns the violations found and the fullest multi-record batch
// as a fraction of its bound.
func (bb *batchBounds) result() (violations []string, fullness float64) {
	bb.mu.Lock()
	defer bb.mu.Unlock()
	return append([]string(nil), bb.violations...), float64(bb.fullest) / float64(bb.bound)
}

// memWatch checks, while a schedule runs, the bound buffer.memory keeps
// (memBudget): Produce takes a record's bytes only while they fit, and a
// batch buffer's growth, which cannot wait, is forced past the limit and
// paid back before Produce may take more, so the bytes a producer holds
// (memBudget.Held, acquired and forced, not yet released: exact) stay
// within buffer.memory plus one batch buffer. It samples them at every
// step of the schedule, after every Produce and in every callback
// (ledger.mem), and keeps the first sample past the bound.
type memWatch struct {
	p     *Producer
	name  string
	start time.Time // the schedule's start, for the time of a violation
	limit int64     // buffer.memory
	bound int64     // limit plus one batch buffer
	// waited: a Produce waited for buffer.memory (the limit was reached).
	waited atomic.Bool

	mu        sync.Mutex
	peak      int64
	over      bool   // a sample held more than buffer.memory: growth was forced past it
	violation string // the first sample past the bound, "" for none
}

// sample reads what the producer holds now; where says what just happened.
func (w *memWatch) sample(where string) {
	held := w.p.mem.Held()
	at := time.Since(w.start)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.peak = max(w.peak, held)
	w.over = w.over || held > w.limit
	if held > w.bound && w.violation == "" {
		w.violation = fmt.Sprintf("memory: producer %s held %d bytes at %v (%s), past buffer.memory %d plus one batch buffer (%d bytes)",
			w.name, held, at, where, w.limit, w.bound-w.limit)
	}
}

// result returns the first violation ("" for none), the most bytes held,
// and whether they went past buffer.memory.
func (w *memWatch) result() (violation string, peak int64, over bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.violation, w.peak, w.over
}
