package producer

import (
	"fmt"
	"math"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/longhaul-kafka/longhaul/inflight"
	"github.com/longhaul-kafka/longhaul/protocol"
)

// accumulator holds the records Produce accepted until the sender
// goroutine takes them: each topic's accumulator half (topicBuf) with the
// records waiting for its partitions, each partition's open and sealed
// batches (partBuf), the sets and list that tell the sender where to look,
// the Flush generations and, for a transactional producer, whether
// Produce may accept at all. One lock guards it, and only this file takes
// it, in the operations at its end: produce (once per record), flush,
// close, settle, transaction, and locked, which hands the sender's pass
// (once per pass) and the rare cuts that need every partition at once
// (metadata, expire, Purge, withdrawal, a transaction's abort, Close) an
// accHeld, whose methods are all such code does to the accumulator. What
// it needs of the rest of the producer is given to it at New. The
// Producer's own lock, which Stats and the sender's node list take, is not
// on the per-record path. Why one lock and not one per partition:
// DESIGN.md, "The accumulator's lock".
type accumulator struct {
	// Fixed at New: what the accumulator needs of the rest of the
	// producer.
	cfg        *config
	mem        *memBudget
	limiter    *inflight.Limiter // each new partition's admission
	leadersGen *atomic.Uint64    // Producer.leadersGen (stickyAmong)
	base       time.Time         // the sender's clock origin (sender.base)
	sleepUntil *atomic.Int64     // the sender's next wake-up (sender.sleepUntil), for wakeForLinger
	metaWanted *atomic.Bool      // the sender's wish for metadata (sender.metaWanted)
	wake       func()            // tells the sender to look again
	fail       func(pendingRecord, error)

	mu sync.Mutex // guards the following

	topics     map[string]*topicBuf
	pc         produceCache  // Produce's from one record to the next
	active     bufSet        // partitions holding buffered batches (pruned by expire's walks)
	opened     []openedBatch // open batches in the order they opened, for their linger (sendReady), from openedHead
	openedHead int
	sealedIn   bufSet // partitions with sealed batches for the sender (partBuf.sealed)
	closed     bool
	racks      map[int32]string // each broker's rack, from metadata (partitioner.rack.aware)

	// Flush's bookkeeping (flush.go).
	gen          uint64        // generation of records accepted now
	gens         []genCount    // outstanding records per generation, oldest first
	flushWaiters []flushWaiter // Flush calls waiting
	flushedGen   uint64        // newest generation a Flush was called for
	flushed      bool          // flushedGen is set

	// txn is the transaction as Produce sees it (transaction.go); nil
	// without transactional.id.
	txn *txnMirror
}

// topicBuf is one topic in the accumulator: where its records go. Produce
// creates it (with its topicState) the first time it names the topic, and
// it is never removed.
type topicBuf struct {
	name string      // fixed: Produce compares it for every record, without reading ts
	ts   *topicState // the topic's sender half, fixed at creation

	// acc.mu guards the following.
	bufs    []*partBuf      // each partition's accumulator half; nil until metadata names the partitions
	waiting []waitingRecord // records produced before bufs was known
	used    time.Time       // last new batch or waiting record, for metadata.max.idle.ms
	sticky  stickyPartitioner
}

// topicState is one topic as the sender goroutine keeps it: what metadata
// answers said of it, and its partitions' sender halves. The sender
// goroutine alone writes it, so it reads it without a lock; the
// accumulator reads only name (fixed) and limit (atomics).
type topicState struct {
	name  string
	buf   *topicBuf         // the topic's accumulator half, fixed at creation
	id    [16]byte          // topic ID from Metadata v10+, for Produce v13+
	parts []*partitionState // each partition's sender half, aligned with buf.bufs; nil until metadata names the partitions
	// lastErr is the last metadata error for this topic.
	lastErr error
	limit   batchLimit // its largest batch as learned from the broker (topiclimit.go)
	// recreated counts the re-creations seen (topicRecreated), so
	// read-back knows a batch's offsets may span two logs.
	recreated uint32
}

// pendingRecord is an accepted record and its callback. A batch holds one
// per record: 32 bytes, two to a cache line (at 1,000 keyed partitions
// every record lands in a batch that is not in the CPU cache).
type pendingRecord struct {
	rec  *Record
	cb   Callback
	size int    // bytes of buffer.memory held
	gen  uint64 // Flush generation (flush.go)
}

// waitingRecord is a record waiting for its topic's partitions.
type waitingRecord struct {
	pendingRecord              // size includes extra
	at            time.Time    // when Produce accepted it
	data          *copiedBytes // Produce's copy of its bytes
	// extra is buffer.memory held for the batch buffer the record may
	// need once placed (waitingExtra), beyond its own size.
	extra int
}

// waitingBuffer is the largest pooled buffer a batch opened for waiting
// records takes (newBatch), and the start of a fresh one (growFor).
const waitingBuffer = 512

// waitingExtra is what a record waiting for its topic's partitions holds
// of buffer.memory beyond its size: its share of the batch buffers it will
// be placed in. Records wait only until metadata comes, and are then
// placed all at once, under acc.mu, where no batch can wait for
// buffer.memory: a batch's growth past its records' bytes is forced then,
// once per batch, not once per Produce, and with many partitions (a batch
// each) the producer could hold several times buffer.memory. Held from
// Produce on, it makes Produce wait
// as Force does. A batch opened for waiting records takes no pooled buffer
// above waitingBuffer, and grows by doubling at most (growFor), so its
// capacity is at most max(waitingBuffer, twice its bytes): its records'
// sizes plus this extra cover it, and placing them forces nothing.
func waitingExtra(size int) int { return size + waitingBuffer }

// copiedBytes is a waiting record's key, value and headers, copied before
// Produce returns (the caller may reuse its buffers from then on).
type copiedBytes struct {
	key, value []byte
	headers    []Header
}

// copyRecordBytes copies r's key, value and header values into one
// allocation, keeping nil as nil.
func copyRecordBytes(r *Record) *copiedBytes {
	n := len(r.Key) + len(r.Value)
	for _, h := range r.Headers {
		n += len(h.Value)
	}
	buf := make([]byte, 0, n)
	take := func(b []byte) []byte {
		if b == nil {
			return nil
		}
		start := len(buf)
		buf = append(buf, b...)
		return buf[start:len(buf):len(buf)]
	}
	c := &copiedBytes{key: take(r.Key), value: take(r.Value)}
	if r.Headers != nil {
		c.headers = make([]Header, len(r.Headers))
		for i, h := range r.Headers {
			c.headers[i] = Header{Key: h.Key, Value: take(h.Value)}
		}
	}
	return c
}

// partBuf is one partition in the accumulator, as kgo's recBuf: its open
// batch and the batches sealed since the sender's last pass. Produce, Flush
// and the sender's pass meet here, so everything in it is under acc.mu;
// what only the sender goroutine touches is partitionState.
type partBuf struct {
	ps *partitionState // the partition's sender half, fixed at creation

	// acc.mu guards the following.
	open       *batch   // accepting records
	sealed     []*batch // full or lingered since the sender's last pass, oldest first
	openGen    uint32   // moves when a batch opens or is sealed: names the open batch (partitionState.lingerHeld)
	member     setBit   // the accumulator's sets listing it (bufSet's own)
	bigBatches bool     // its last sealed batch used more than keepBuffer bytes; see newBatch
}

// partitionState is one partition as the sender goroutine keeps it: its
// queue of sealed batches taken from the accumulator (takeSealed,
// once per pass), what is in flight and waiting for retry, and its place
// in the sender's sets. Only the sender goroutine writes it, so choosing
// and sending batches takes no lock; the atomics are what other
// goroutines read (the partitioner, Stats).
type partitionState struct {
	topic *topicState
	id    int32
	buf   *partBuf // the partition's accumulator half, fixed at creation

	// lingerHeld is the partBuf.openGen of the open batch the sender
	// kept open past its linger because the partition could not send (see
	// sendReady), 0 for none: a batch opened since is looked at afresh.
	lingerHeld uint32

	admission     *inflight.Partition // this partition in the limiter, which owns its leader, epoch, window, state and positions
	pendingLeader int32               // leader to switch to once in-flight batches finish
	pendingEpoch  int32
	hasPending    bool
	queue         []*batch     // sealed batches handed to the sender, not yet sent, oldest first
	member        setBit       // the sender's sets listing it (partSet's own)
	backoffAt     int          // place in sender.backoffWait + 1, 0 outside (deadlineHeap's own)
	blockedOn     *nodeState   // listed in blockedOn.blocked
	queuedPub     atomic.Int32 // len(queue), for the adaptive partitioner
	nextSeq       int32        // sequence of the next new batch
	nextOrd       uint64       // ord of the next new batch
	inflight      []*batch     // sent, sequence order
	retry         []*batch     // failed, to resend first, sequence order
	backoffUntil  time.Time
	failures      int       // consecutive failures, for backoff
	lastAck       time.Time // last acknowledgement, for the idle re-arm
	ackedUpTo     uint64    // 1 + the highest ord acknowledged, 0 before any
	doubtUpTo     uint64    // 1 + the highest ord failed as FateUnknown, 0 before any
	ackedEnd      int64     // offset after the highest acknowledged batch, 0 before any (read-back's K)
	k             partK     // read-back's K before the first acknowledgement (readback_k.go)
	report        []*batch  // sent batches not yet called back, in ord order
	gone          bool      // dropped by metadata (topology.go); goneErr says why
	goneErr       error

	// waitSince is when queue last started waiting with nothing sent: it
	// went from empty to not, or a batch left it and others stayed (ns
	// since sender.base), for partitioner.availability.timeout.ms.
	waitSince atomic.Int64

	sent, retried atomic.Int64 // batches sent and resent, for Stats
}

// leader is the partition's leader node id, -1 for none: the limiter's
// (inflight.Partition.Leader), which any goroutine may read.
func (ps *partitionState) leader() int32 {
	l, _ := ps.admission.Leader()
	return l
}

// leaderEpoch is the leader epoch the limiter was given with the leader.
func (ps *partitionState) leaderEpoch() int32 {
	_, e := ps.admission.Leader()
	return e
}

// batch is a partition's group of records sent as one RecordBatch.
type batch struct {
	part    *partitionState
	records []pendingRecord
	builder protocol.BatchBuilder
	created time.Time // first record's Produce: linger and delivery timeout
	memory  int64

	// Owned by the sender once sealed.
	bytes        []byte // built RecordBatch, nil until first sent
	seq          int32
	ord          uint64 // send order within the partition, survives renumbering
	attempts     int
	maybeWritten bool  // an attempt ended without a definite answer
	lastErr      error // why the last attempt failed, for timeouts
	split        bool  // too large for the broker: split before the next attempt
	parked       bool  // certainly not written, waiting for the epoch bump; position released
	done         bool  // outcome known; err holds it
	err          error
	topicID      [16]byte // the topic id the last attempt named (Produce v13+)
	scanFrom     int64    // part.ackedEnd at the first send: where a read-back starts
	scanGen      uint32   // part.topic.recreated at the first send
	kProbe       *kProbe  // the ListOffsets giving K before any acknowledgement (readback_k.go)
}

// trimBuffer drops b's buffer if it is above keepBuffer bytes and less
// than half used (see recycle).
func (b *batch) trimBuffer() {
	if c := b.builder.Cap(); c > keepBuffer && 2*(c-b.builder.Free()) < c {
		b.builder = protocol.BatchBuilder{}
	}
}

// keepBuffer is the largest batch buffer recycle keeps whatever its use.
const keepBuffer = 4096

// Pooled batches by buffer size: buffers up to keepBuffer bytes, and
// larger ones. A buffer's capacity counts against buffer.memory from the
// batch's first record, so a partition writing small batches must not
// take a recycled batch.size buffer (with many keyed partitions, a
// batch.size buffer per partition is most of the heap), while one filling
// large batches reuses
// large buffers rather than grow a new one each time.
var (
	smallBatches = sync.Pool{New: func() any { return new(batch) }}
	bigBatches   sync.Pool
)

// newBatch takes a batch from the pool for ps: a large buffer only if ps's
// last batch needed one, else a small one (or none; growFor sizes it). A
// pooled buffer above most, the largest a batch of ps grows to (growFor's
// limit), is dropped: another producer in the process, with a larger
// batch.size, pooled it, and its capacity would count against
// buffer.memory though no batch here can fill it (a producer of 512-byte
// batches that took 4 KiB buffers filled buffer.memory with records of a
// thirtieth of it).
func newBatch(pb *partBuf, now time.Time, most int) *batch {
	var b *batch
	if pb.bigBatches {
		b, _ = bigBatches.Get().(*batch)
	}
	if b == nil {
		b = smallBatches.Get().(*batch)
	}
	b.part = pb.ps
	b.created = now
	if b.builder.Cap() > most {
		b.builder = protocol.BatchBuilder{}
	}
	b.builder.Reset()
	return b
}

// growFor makes room in b for a record of size encoded bytes. The buffer
// grows on demand, doubling, never past limit (one batch's most): a batch
// of one small record holds a small buffer, not batch.size (with many
// keyed partitions, a batch.size buffer each is most of the heap), and one
// that fills up copies its bytes about once.
func growFor(b *batch, size, limit int) {
	free := b.builder.Free()
	if free >= size {
		return
	}
	used := b.builder.Cap() - free
	if b.builder.Cap() == 0 {
		used = protocol.RecordBatchOverhead
	}
	b.builder.GrowCap(max(used+size, min(max(2*b.builder.Cap(), 512), limit)))
}

// recycle returns b to the pool once no request can reference its bytes.
// A buffer above keepBuffer bytes and less than half used is dropped
// rather than pooled: the next batch would hold (and count against
// buffer.memory) room it may never use; growFor sizes a fresh one to its
// records. Small buffers are kept, so tiny batches (many keyed partitions)
// do not allocate one each.
func (b *batch) recycle() {
	b.trimBuffer()
	clear(b.records)
	b.records = b.records[:0]
	b.bytes = nil // builder memory, reused by the builder itself
	b.part = nil
	b.memory = 0
	b.attempts = 0
	b.maybeWritten = false
	b.lastErr = nil
	b.split = false
	b.parked = false
	b.done = false
	b.err = nil
	if b.builder.Cap() > keepBuffer {
		bigBatches.Put(b)
	} else {
		smallBatches.Put(b)
	}
}

// recordMemory is what one record holds of buffer.memory: its encoded size
// with the largest deltas, so a batch never needs more than it reserved.
func recordMemory(r *Record) int {
	return protocol.RecordSize(1<<40, 1<<30, r.Key, r.Value, r.Headers)
}

// produceCache is what Produce keeps from one record to the next. Guarded
// by acc.mu.
type produceCache struct {
	// topic is the last record's topic. Most producers write one topic or
	// a few, and the map lookup hashed the name for every record; a
	// topicBuf is never removed from accumulator.topics, so it stays valid.
	topic *topicBuf
	// clockBase is the time.Now reading that record timestamps are taken
	// from (see now).
	clockBase time.Time
	// ahead is where the next record goes if it lands in the same batch
	// (the spare capacity after the record just placed, its size long),
	// for Produce to prefetch once it released the lock.
	ahead []byte
}

// clockRebase is how long now goes on from one time.Now reading.
const clockRebase = 100 * time.Millisecond

// now is the time for a record's zero Timestamp: the last time.Now
// reading (clockBase) plus the monotonic time since. time.Now reads the
// wall clock and the monotonic clock; this reads the monotonic one only,
// which is cheaper, for every record that leaves its timestamp zero. The
// two differ only by wall-clock adjustments made
// since clockBase was read, and clockBase is read again when a batch
// opens (place) and at least every clockRebase: NTP's slew (at most
// 500 ppm) moves the wall clock by 50 us in that time, below the
// millisecond Kafka's CreateTime keeps, and a step is caught at the next
// reading.
func (c *produceCache) now() time.Time {
	if !c.clockBase.IsZero() {
		if d := time.Since(c.clockBase); d >= 0 && d < clockRebase {
			return c.clockBase.Add(d)
		}
	}
	c.clockBase = time.Now()
	return c.clockBase
}

func (a *accumulator) topic(name string) *topicBuf {
	if t := a.pc.topic; t != nil && t.name == name {
		return t
	}
	t := a.topics[name]
	if t == nil {
		t = &topicBuf{name: name, sticky: stickyPartitioner{current: -1, rand: a.cfg.rand.part}}
		t.ts = &topicState{name: name, buf: t}
		a.topics[name] = t
	}
	a.pc.topic = t
	return t
}

// append places an accepted record in its partition's open batch, or
// parks it until the topic's partitions are known. Called with acc.mu held.
func (a *accumulator) append(r *Record, cb Callback, size int) error {
	if r.Timestamp.IsZero() {
		r.Timestamp = a.pc.now()
	}
	t := a.topic(r.Topic)
	if t.bufs == nil {
		if len(t.waiting) == 0 {
			a.wantMetadata()
		}
		now := time.Now()
		t.used = now
		extra := 0
		if !a.cfg.regress.on(waitingNoExtra) {
			extra = waitingExtra(size)
			a.mem.Force(int64(extra)) // past the limit if need be: Produce then waits for releases
		}
		t.waiting = append(t.waiting, waitingRecord{pendingRecord: pendingRecord{rec: r, cb: cb, size: size + extra, gen: a.accept()},
			at: now, data: copyRecordBytes(r), extra: extra})
		return nil
	}
	pr := pendingRecord{rec: r, cb: cb, size: size, gen: a.gen}
	if err := a.place(t, pr, nil, 0, time.Time{}); err != nil {
		return err
	}
	a.accept()
	return nil
}

func (a *accumulator) place(t *topicBuf, pr pendingRecord, d *copiedBytes, extra int, now time.Time) error {
	n := int32(len(t.bufs))
	r := pr.rec
	var idx int32
	sticky := false
	switch {
	case r.fixedPartition:
		if r.partition < 0 || r.partition >= n {
			return fmt.Errorf("%w: topic %s has partitions 0..%d, asked for %d", ErrInvalidRecord, t.name, n-1, r.partition)
		}
		idx = r.partition
	case a.cfg.partitioner != nil: // one nil check on the default path
		var err error
		if idx, sticky, err = placeWith(a.cfg.partitioner, t, r, n, a.stickyAmong(t)); err != nil {
			return err
		}
	case r.Key != nil && !a.cfg.ignoreKeys:
		idx = keyPartition(r.Key, n)
	default:
		idx, sticky = a.stickyPick(t, n), true
	}
	target := a.batchTarget(t)
	body := min(target, a.cfg.maxRequestSize) - protocol.RecordBatchOverhead // maxBatchBody, for t
	pb := t.bufs[idx]
	b := pb.open
	hadOpen := b != nil
	for {
		if b != nil && b.builder.NumRecords() > 0 && b.builder.EncodedLen()+pr.size > body {
			b.builder.Sum() // its last record was appended just now, if it is sticky: the bytes are in cache
			a.seal(pb)
			b = nil
		}
		// The record would open a batch on a sticky partition
		// batch.size bytes went to (its batch just filled, or the last
		// was sealed by linger or Flush): move before placing, so the
		// record opens the next partition's batch instead of a
		// one-record batch left to linger here. The knobs bring back
		// placing it first, for each of the two cases. The partition
		// moved to may hold an open batch (keyed or fixed records): go
		// round once more for the fit check. A move resets due, so
		// there is no third round.
		if b != nil || !sticky || !t.sticky.due(a.cfg.batchSize) ||
			hadOpen && a.cfg.regress.on(stickyLeftover) || !hadOpen && a.cfg.regress.on(stickyStartAlone) {
			break
		}
		a.stickyMove(t, n)
		idx = a.stickyPick(t, n)
		pb = t.bufs[idx]
		b, hadOpen = pb.open, pb.open != nil
	}
	r.partition, r.hasPartition = idx, true
	started := b == nil
	if started {
		if now.IsZero() {
			now = time.Now() // once per batch, not per record
			a.pc.clockBase = now
		}
		t.used = now
		most := a.batchBufferMost()
		if d != nil && !a.cfg.regress.on(waitingNoExtra) {
			most = min(most, waitingBuffer) // what waitingExtra covers
		}
		b = newBatch(pb, now, most)
		pb.open = b
		if !a.cfg.regress.on(keepHeldMark) {
			pb.openGen++ // a new batch: its linger is looked at afresh (partitionState.lingerHeld)
		}
		a.active.add(pb)
		a.opened = append(a.opened, openedBatch{pb: pb, created: now})
		a.wakeForLinger(now)
	}
	growFor(b, pr.size, protocol.RecordBatchOverhead+body)
	if d != nil {
		b.builder.Append(r.Timestamp.UnixMilli(), d.key, d.value, d.headers)
	} else {
		// Append copies the bytes into the batch before Produce returns.
		b.builder.Append(r.Timestamp.UnixMilli(), r.Key, r.Value, r.Headers)
	}
	b.records = append(b.records, pr)
	b.memory += int64(pr.size + extra) // sealing settles it to the buffer's capacity
	a.growMemory(b)
	full := protocol.RecordBatchOverhead+b.builder.EncodedLen() >= target
	if full {
		b.builder.Sum()
		a.seal(pb)
	} else if d == nil { // Produce's own record (produce clears ahead)
		a.pc.ahead = b.builder.Spare(pr.size)
	}
	// A boundary: the batch filled (Java: its last batch full). A record
	// that did not fit a full batch, or would start a batch, on a
	// partition batch.size bytes went to moved the partition above
	// already; one that starts a batch and only then makes batch.size
	// fills that batch before the move, so it is not left alone.
	boundary := full || started && (a.cfg.regress.on(stickyLeftover) || a.cfg.regress.on(stickyStartAlone) && !hadOpen)
	if sticky && t.sticky.placed(pr.size, a.cfg.batchSize, boundary) {
		a.stickyMove(t, n)
	}
	return nil
}

// wantMetadata asks the sender for a metadata request.
func (a *accumulator) wantMetadata() {
	a.metaWanted.Store(true)
	a.wake()
}

// wakeForLinger wakes the sender for a batch opened at now, whose linger
// deadline is new to it, unless the sender sleeps until that deadline or
// earlier anyway: it then finds the batch when it wakes. At 1,000 keyed
// partitions a batch opens every few records, and waking the sender for
// each cost Produce a channel operation, often a thread wake-up, and a
// sender pass over every partition under acc.mu. Called with acc.mu held.
func (a *accumulator) wakeForLinger(now time.Time) {
	if at := a.sleepUntil.Load(); at != 0 && at <= int64(now.Add(a.cfg.linger).Sub(a.base)) {
		return
	}
	a.wake()
}

// queuedFunc is the adaptive partitioner's view of t's queues, nil when
// partitioner.adaptive.partitioning.enable is off. With
// partitioner.availability.timeout.ms, a partition whose queue has waited
// longer than that with nothing sent counts as more queued than any other
// (unavailable), so it is chosen only when every partition looked at is.
func (a *accumulator) queuedFunc(t *topicBuf) func(int32) int {
	if !a.cfg.adaptive {
		return nil
	}
	if a.cfg.availTimeout > 0 {
		now := int64(time.Since(a.base))
		return func(i int32) int {
			pb := t.bufs[i]
			q := pb.queued()
			if q > 0 && pb.ps.unavailable(now, a.cfg.availTimeout) {
				q += unavailableQueued
			}
			return q
		}
	}
	return func(i int32) int { return t.bufs[i].queued() }
}

// unavailableQueued is what an unavailable partition adds to its queue
// length for the adaptive partitioner: more than any queue can hold, and
// small enough that the sum does not wrap where int is 32 bits (a wrapped
// sum is negative, and the partitioner would prefer the partition it
// should avoid).
const unavailableQueued = 1 << 30

// unavailable reports whether ps's sent queue has waited longer than
// timeout with no batch sent, at now (ns since sender.base): its leader
// cannot take produce requests (no connection, its requests unanswered, a
// full window), as the Java client's partitioner.availability.timeout.ms
// judges a broker. Called with acc.mu held.
func (ps *partitionState) unavailable(now int64, timeout time.Duration) bool {
	since := ps.waitSince.Load()
	return ps.queuedPub.Load() > 0 && now-since > int64(timeout)
}

// batchBufferMost is the largest buffer a batch grows to (growFor's limit
// for a batch of 2+ records): newBatch drops a pooled one above it.
func (a *accumulator) batchBufferMost() int {
	if a.cfg.regress.on(pooledOversize) {
		return math.MaxInt
	}
	return protocol.RecordBatchOverhead + a.maxBatchBody()
}

// maxBatchBody is the most record bytes a batch of two or more records may
// carry: batch.size less the RecordBatch header, or max.request.size's less
// if smaller. A batch's first record always fits (a larger one is a batch
// of its own; Produce refuses one past max.request.size). Negative for a
// batch.size below the header: every record is a batch of its own.
func (a *accumulator) maxBatchBody() int {
	return min(a.cfg.batchSize, a.cfg.maxRequestSize) - protocol.RecordBatchOverhead
}

// seal closes pb's open batch for new records and queues it.
func (a *accumulator) seal(pb *partBuf) {
	b := pb.open
	if b == nil {
		return
	}
	pb.open = nil
	pb.openGen++
	pb.bigBatches = b.builder.Cap()-b.builder.Free() > keepBuffer
	a.settleMemory(b)
	pb.sealed = append(pb.sealed, b)
	a.sealedIn.add(pb)
	a.wake()
}

// openedBatch is an entry of accumulator.opened: pb opened a batch at
// created. The entry is stale once pb.open is another batch or none.
type openedBatch struct {
	pb      *partBuf
	created time.Time
}

// queued is how many sealed batches of the partition wait to be sent:
// those sealed since the sender's last pass and those it holds. Called
// with acc.mu held.
func (pb *partBuf) queued() int {
	return len(pb.sealed) + int(pb.ps.queuedPub.Load())
}

// closeOpen queues pb's open batch as it is, not sealed (no settling, no
// checksum): it is about to fail, not be sent. Called with acc.mu held.
func (pb *partBuf) closeOpen() {
	if pb.open != nil {
		pb.sealed = append(pb.sealed, pb.open)
		pb.open = nil
	}
}

// takeSealed appends pb's sealed batches to q, oldest first, and forgets
// them: from then on they are the sender's. Called with acc.mu held.
func (pb *partBuf) takeSealed(q []*batch) []*batch {
	q = append(q, pb.sealed...)
	clear(pb.sealed)
	pb.sealed = pb.sealed[:0]
	return q
}

// addPartitions takes t's new partitions (their accumulator halves, in
// order after the ones it has) and places the records that were waiting
// for them.
func (a *accumulator) addPartitions(t *topicBuf, added []*partitionState, now time.Time) {
	for _, ps := range added {
		t.bufs = append(t.bufs, ps.buf)
	}
	waiting := t.waiting
	t.waiting = nil
	var flushNow []*partBuf // hold records a Flush waits for
	for _, w := range waiting {
		pr := w.pendingRecord
		pr.size -= w.extra // the batch holds the extra (place), the record its size
		if err := a.place(t, pr, w.data, w.extra, now); err != nil {
			a.failRecord(w.pendingRecord, err)
			continue
		}
		if a.flushed && pr.gen <= a.flushedGen {
			flushNow = append(flushNow, t.bufs[pr.rec.partition])
		}
	}
	for _, pb := range flushNow {
		a.seal(pb) // a no-op once sealed
	}
}

// failWaiting fails every record waiting for t's partitions with
// ErrTopicMetadata and cause (a metadata error that retrying cannot fix).
func (a *accumulator) failWaiting(t *topicBuf, cause error) {
	for _, pr := range t.waiting {
		a.failRecord(pr.pendingRecord, &DeliveryError{Topic: t.name, Partition: -1, BaseSequence: -1,
			Err: fmt.Errorf("%w: %w", ErrTopicMetadata, cause)})
	}
	clear(t.waiting)
	t.waiting = t.waiting[:0]
}

// failRecord fails an accepted record that is in no batch.
func (a *accumulator) failRecord(pr pendingRecord, err error) {
	a.fail(pr, err)
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// The operations below are the accumulator's whole interface to the rest
// of the producer. Each takes mu itself; the sender's pass and the cuts
// across every partition (metadata, expire, Purge, withdrawal, a
// transaction's drop, Close) run inside locked and see the accumulator as
// an accHeld. The accumulator's other methods (here, in flush.go and the
// sticky partitioner's in partitioner.go) are called with mu held, by
// these.

// produce accepts r (its buffer.memory, size, already held) into its
// partition's open batch, or among its topic's waiting records. It fails
// with ErrClosed once Close began, with the transaction's refusal
// (txnMirror.refused), or with place's error; ahead is where the next
// record of the batch goes, for Produce to prefetch once mu is released.
func (a *accumulator) produce(r *Record, cb Callback, size int) (ahead []byte, err error) {
	a.mu.Lock()
	switch {
	case a.closed:
		err = ErrClosed
	case a.txn != nil:
		err = a.txn.refused()
	}
	if err == nil {
		err = a.append(r, cb, size)
		ahead = a.pc.ahead
		a.pc.ahead = nil
	}
	a.mu.Unlock()
	return ahead, err
}

// flush starts a Flush (startFlush) and returns what it waits on.
func (a *accumulator) flush() <-chan struct{} {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.startFlush()
}

// close stops accepting records and starts Close's Flush. first is false
// (and done nil) if an earlier call closed it.
func (a *accumulator) close() (done <-chan struct{}, first bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return nil, false
	}
	a.closed = true
	return a.startFlush(), true
}

// isClosed reports whether Close began.
func (a *accumulator) isClosed() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.closed
}

// settle counts the records of gens as called back (done), in one
// acquisition for a pass of the callback goroutine.
func (a *accumulator) settle(gens []genCount) {
	a.mu.Lock()
	for _, g := range gens {
		a.done(g.gen, g.n)
	}
	a.mu.Unlock()
}

// transaction runs f on the transaction as Produce sees it, under mu, so
// that a transactional call's check and its transition happen at one
// moment for Produce; if f reports flush, a Flush starts at that moment
// too (a commit waits for the records produced before it) and its
// channel is returned. Only for a transactional producer.
func (a *accumulator) transaction(f func(m *txnMirror) (flush bool)) (flushed <-chan struct{}) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if f(a.txn) {
		return a.startFlush()
	}
	return nil
}

// transactional reports whether the producer has a transactional.id (txn
// is set at New, never changed).
func (a *accumulator) transactional() bool { return a.txn != nil }

// locked runs f with mu held, handing it the accumulator as an accHeld.
func (a *accumulator) locked(f func(v accHeld)) {
	a.mu.Lock()
	defer a.mu.Unlock()
	f(accHeld{a})
}

// accHeld is the accumulator with mu held, inside locked: the sender's
// pass (one acquisition for every partition listed) and the cuts that
// need every partition and the waiting records at one moment. Its methods
// are all such code reads or changes of the accumulator.
type accHeld struct{ a *accumulator }

// closed reports whether Close began.
func (v accHeld) closed() bool { return v.a.closed }

// sealAll seals every open batch (Close: nothing lingers any more).
func (v accHeld) sealAll() {
	for _, pb := range v.a.active.members() {
		v.a.seal(pb)
	}
}

// topics calls f for every topic Produce named.
func (v accHeld) topics(f func(t *topicState)) {
	for _, t := range v.a.topics {
		f(t.ts)
	}
}

// topic is the topic named name, nil if Produce never named it.
func (v accHeld) topic(name string) *topicState {
	if t := v.a.topics[name]; t != nil {
		return t.ts
	}
	return nil
}

// partition is the sender half of partition i of the topic named name,
// nil if no metadata named it.
func (v accHeld) partition(name string, i int32) *partitionState {
	if t := v.a.topics[name]; t != nil && i >= 0 && int(i) < len(t.bufs) {
		return t.bufs[i].ps
	}
	return nil
}

// partitions calls f for every partition metadata named, topic by topic
// (in no set order).
func (v accHeld) partitions(f func(ps *partitionState)) {
	for _, t := range v.a.topics {
		for _, pb := range t.bufs {
			f(pb.ps)
		}
	}
}

// used is when t last opened a batch or took a waiting record.
func (v accHeld) used(t *topicState) time.Time { return t.buf.used }

// waiting reports how many records wait for t's partitions, and when the
// oldest was accepted.
func (v accHeld) waiting(t *topicState) (n int, oldest time.Time) {
	if w := t.buf.waiting; len(w) > 0 {
		return len(w), w[0].at
	}
	return 0, time.Time{}
}

// dropWaiting fails each record waiting for t's partitions for which fail
// returns an error, with that error, and keeps the others in order. fail
// may change the record's size (what its callback gives back).
func (v accHeld) dropWaiting(ts *topicState, fail func(w *waitingRecord) error) {
	t := ts.buf
	keep := t.waiting[:0]
	for _, w := range t.waiting {
		if err := fail(&w); err != nil {
			v.a.failRecord(w.pendingRecord, err)
			continue
		}
		keep = append(keep, w)
	}
	clear(t.waiting[len(keep):])
	t.waiting = keep
}

// failWaiting fails every record waiting for t's partitions (failWaiting).
func (v accHeld) failWaiting(t *topicState, cause error) { v.a.failWaiting(t.buf, cause) }

// failRecord fails an accepted record that is in no batch.
func (v accHeld) failRecord(pr pendingRecord, err error) { v.a.failRecord(pr, err) }

// setRacks takes each broker's rack from a metadata answer.
func (v accHeld) setRacks(res *protocol.MetadataResult) { v.a.setRacks(res) }

// noteLeaders keeps t's leaders from a metadata answer for the sticky
// partitioner.
func (v accHeld) noteLeaders(t *topicState, parts []protocol.PartitionMetadata, brokers map[int32]string) {
	v.a.noteLeaders(t.buf, parts, brokers)
}

// addPartitions takes t's new partitions, in order after the ones it
// has, and places the records that waited for them (addPartitions).
func (v accHeld) addPartitions(t *topicState, added []*partitionState, now time.Time) {
	v.a.addPartitions(t.buf, added, now)
}

// truncate drops t's partitions from count on (the topic was re-created
// with fewer); their contents were taken (takeUnsent) already.
func (v accHeld) truncate(t *topicState, count int32) {
	b := t.buf
	clear(b.bufs[count:])
	b.bufs = b.bufs[:count]
}

// holds reports whether ps has an open batch or queued batches (sealed
// here or in the sender's queue).
func (v accHeld) holds(ps *partitionState) bool {
	return ps.buf.open != nil || ps.buf.queued() > 0
}

// queued is queued's count of ps's sealed batches, here and the sender's.
func (v accHeld) queued(ps *partitionState) int { return ps.buf.queued() }

// sealed is how many batches of ps were sealed since the sender's last
// take.
func (v accHeld) sealed(ps *partitionState) int { return len(ps.buf.sealed) }

// open reports whether ps has an open batch, and its generation
// (partBuf.openGen, which names it), without reading the batch (a cache
// miss per partition when thousands linger).
func (v accHeld) open(ps *partitionState) (gen uint32, ok bool) {
	return ps.buf.openGen, ps.buf.open != nil
}

// created is when ps's open batch was created; ps must have one (open).
func (v accHeld) created(ps *partitionState) time.Time { return ps.buf.open.created }

// seal seals ps's open batch, if any.
func (v accHeld) seal(ps *partitionState) { v.a.seal(ps.buf) }

// takeSealed appends ps's sealed batches to q, oldest first: from then on
// they are the sender's.
func (v accHeld) takeSealed(ps *partitionState, q []*batch) []*batch { return ps.buf.takeSealed(q) }

// closeOpen queues ps's open batch as it is, not sealed: it is about to
// fail, not be sent.
func (v accHeld) closeOpen(ps *partitionState) { ps.buf.closeOpen() }

// withdrawOpen calls withdraw on ps's open batch, if any; if it reports
// the batch empty, the batch is recycled and ps has none.
func (v accHeld) withdrawOpen(ps *partitionState, withdraw func(b *batch) (empty bool)) {
	if pb := ps.buf; pb.open != nil && withdraw(pb.open) {
		pb.open.recycle()
		pb.open = nil
	}
}

// lingerEnded calls f for each partition whose open batch's linger ended
// by now, in the order the batches opened, skipping entries stale since
// (the batch sealed or withdrawn); next gets the first deadline still
// ahead. The entries looked at are dropped: a batch still open after f is
// the caller's to look at again. It returns how many entries it looked
// at.
func (v accHeld) lingerEnded(now time.Time, next *time.Time, f func(ps *partitionState, deadline time.Time)) (looked int) {
	a := v.a
	k := a.openedHead
	for ; k < len(a.opened); k++ {
		looked++
		e := a.opened[k]
		if e.pb.open == nil || !e.pb.open.created.Equal(e.created) {
			continue // sealed or withdrawn
		}
		deadline := e.created.Add(a.cfg.linger)
		if now.Before(deadline) {
			*next = earliest(*next, deadline)
			break // later entries opened later
		}
		f(e.pb.ps, deadline)
	}
	a.dropOpened(k)
	return looked
}

// sealedIn is how many partitions hold batches sealed since the last
// takeAllSealed.
func (v accHeld) sealedIn() int { return v.a.sealedIn.len() }

// takeAllSealed calls take for every partition holding sealed batches,
// and forgets the list.
func (v accHeld) takeAllSealed(take func(ps *partitionState)) {
	v.a.sealedIn.drain(func(pb *partBuf) { take(pb.ps) })
}

// anyActive reports whether some partition holds an open or sealed batch
// (as listed: expire's walk prunes the list).
func (v accHeld) anyActive() bool { return v.a.active.len() > 0 }

// eachActive calls f for every partition listed as holding an open or
// sealed batch; a partition f reports as holding none any more leaves the
// list (an open batch lists it again).
func (v accHeld) eachActive(f func(ps *partitionState) (holds bool)) {
	v.a.active.keep(func(pb *partBuf) bool { return f(pb.ps) })
}

// forgetActive empties the list of partitions holding batches (Close,
// once it failed them all).
func (v accHeld) forgetActive() { v.a.active.keep(func(*partBuf) bool { return false }) }

// outstanding is how many accepted records are not yet called back.
func (v accHeld) outstanding() int64 {
	var n int64
	for _, g := range v.a.gens {
		n += g.n
	}
	return n
}

// dropOpened drops the entries of opened before index k, which a pass
// looked at. The rest move to the front only once they are at most half
// the slice, so a pass does not copy the batches still lingering
// (thousands at 10,000 keyed partitions).
func (a *accumulator) dropOpened(k int) {
	clear(a.opened[a.openedHead:k])
	a.openedHead = k
	if 2*k >= len(a.opened) {
		n := copy(a.opened, a.opened[k:])
		clear(a.opened[n:])
		a.opened, a.openedHead = a.opened[:n], 0
	}
}
