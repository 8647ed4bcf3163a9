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
// goroutine takes them: each topic's partitions and the records waiting
// for them, each partition's open and sealed batches, the lists that tell
// the sender where to look, the Flush generations and, for a
// transactional producer, whether Produce may accept at all. One lock
// guards it, taken once per record by Produce, once per pass by the
// sender, and by the rare paths that need every partition at once
// (metadata, Flush, Purge, withdrawal, a transaction's abort, Close):
// the Producer's own lock, which Stats and the sender's node list take, is
// not on the per-record path. Why one lock and not one per partition:
// DESIGN.md, "The accumulator's lock".
type accumulator struct {
	mu sync.Mutex // guards the following

	topics     map[string]*topicState
	pc         produceCache  // Produce's from one record to the next
	active     []*partBuf    // partitions holding buffered batches (pruned by expire's walks)
	opened     []openedBatch // open batches in the order they opened, for their linger (sendReady), from openedHead
	openedHead int
	sealedIn   []*partBuf // partitions with sealed batches for the sender (partBuf.sealed)
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

// topicState is what the producer knows of one topic. Fields are guarded by
// acc.mu unless marked.
type topicState struct {
	name    string
	id      [16]byte          // topic ID from Metadata v10+, for Produce v13+
	parts   []*partitionState // the sender's half of each partition; nil until metadata names the partitions
	bufs    []*partBuf        // the accumulator's half, aligned with parts
	waiting []waitingRecord   // records produced before parts was known
	lastErr error             // last metadata error for this topic
	used    time.Time         // last new batch or waiting record, for metadata.max.idle.ms
	sticky  stickyPartitioner
	limit   batchLimit // its largest batch as learned from the broker (topiclimit.go)
	// recreated counts the re-creations seen (topicRecreatedLocked), so
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
	inActive   bool     // listed in accumulator.active
	inSealedIn bool     // listed in accumulator.sealedIn
	bigBatches bool     // its last sealed batch used more than keepBuffer bytes; see newBatch
}

// partitionState is one partition as the sender goroutine keeps it: its
// queue of sealed batches taken from the accumulator (takeSealedLocked,
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
	// topicState is never removed from Producer.topics, so it stays valid.
	topic *topicState
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
// opens (placeLocked) and at least every clockRebase: NTP's slew (at most
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

func (p *Producer) topicLocked(name string) *topicState {
	if t := p.acc.pc.topic; t != nil && t.name == name {
		return t
	}
	t := p.acc.topics[name]
	if t == nil {
		t = &topicState{name: name, sticky: stickyPartitioner{current: -1, rand: p.cfg.rand.part}}
		p.acc.topics[name] = t
	}
	p.acc.pc.topic = t
	return t
}

// appendLocked places an accepted record in its partition's open batch, or
// parks it until the topic's partitions are known. Called with acc.mu held.
func (p *Producer) appendLocked(r *Record, cb Callback, size int) error {
	if r.Timestamp.IsZero() {
		r.Timestamp = p.acc.pc.now()
	}
	t := p.topicLocked(r.Topic)
	if t.parts == nil {
		if len(t.waiting) == 0 {
			p.s.wantMetadata()
		}
		now := time.Now()
		t.used = now
		extra := 0
		if !p.cfg.regress.on(waitingNoExtra) {
			extra = waitingExtra(size)
			p.mem.Force(int64(extra)) // past the limit if need be: Produce then waits for releases
		}
		t.waiting = append(t.waiting, waitingRecord{pendingRecord: pendingRecord{rec: r, cb: cb, size: size + extra, gen: p.acceptLocked()},
			at: now, data: copyRecordBytes(r), extra: extra})
		return nil
	}
	pr := pendingRecord{rec: r, cb: cb, size: size, gen: p.acc.gen}
	if err := p.placeLocked(t, pr, nil, 0, time.Time{}); err != nil {
		return err
	}
	p.acceptLocked()
	return nil
}

func (p *Producer) placeLocked(t *topicState, pr pendingRecord, d *copiedBytes, extra int, now time.Time) error {
	n := int32(len(t.parts))
	r := pr.rec
	var idx int32
	sticky := false
	switch {
	case r.fixedPartition:
		if r.partition < 0 || r.partition >= n {
			return fmt.Errorf("%w: topic %s has partitions 0..%d, asked for %d", ErrInvalidRecord, t.name, n-1, r.partition)
		}
		idx = r.partition
	case p.cfg.partitioner != nil: // one nil check on the default path
		var err error
		if idx, sticky, err = placeWith(p.cfg.partitioner, t, r, n, p.stickyAmong(t)); err != nil {
			return err
		}
	case r.Key != nil && !p.cfg.ignoreKeys:
		idx = keyPartition(r.Key, n)
	default:
		idx, sticky = p.stickyPick(t, n), true
	}
	target := p.batchTarget(t)
	body := min(target, p.cfg.maxRequestSize) - protocol.RecordBatchOverhead // maxBatchBody, for t
	pb := t.bufs[idx]
	b := pb.open
	hadOpen := b != nil
	for {
		if b != nil && b.builder.NumRecords() > 0 && b.builder.EncodedLen()+pr.size > body {
			b.builder.Sum() // its last record was appended just now, if it is sticky: the bytes are in cache
			p.sealLocked(pb)
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
		if b != nil || !sticky || !t.sticky.due(p.cfg.batchSize) ||
			hadOpen && p.cfg.regress.on(stickyLeftover) || !hadOpen && p.cfg.regress.on(stickyStartAlone) {
			break
		}
		p.stickyMove(t, n)
		idx = p.stickyPick(t, n)
		pb = t.bufs[idx]
		b, hadOpen = pb.open, pb.open != nil
	}
	r.partition, r.hasPartition = idx, true
	started := b == nil
	if started {
		if now.IsZero() {
			now = time.Now() // once per batch, not per record
			p.acc.pc.clockBase = now
		}
		t.used = now
		most := p.batchBufferMost()
		if d != nil && !p.cfg.regress.on(waitingNoExtra) {
			most = min(most, waitingBuffer) // what waitingExtra covers
		}
		b = newBatch(pb, now, most)
		pb.open = b
		if !p.cfg.regress.on(keepHeldMark) {
			pb.openGen++ // a new batch: its linger is looked at afresh (partitionState.lingerHeld)
		}
		if !pb.inActive {
			pb.inActive = true
			p.acc.active = append(p.acc.active, pb)
		}
		p.acc.opened = append(p.acc.opened, openedBatch{pb: pb, created: now})
		p.wakeForLinger(now)
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
	p.growMemory(b)
	full := protocol.RecordBatchOverhead+b.builder.EncodedLen() >= target
	if full {
		b.builder.Sum()
		p.sealLocked(pb)
	} else if d == nil { // Produce's own record (produce clears ahead)
		p.acc.pc.ahead = b.builder.Spare(pr.size)
	}
	// A boundary: the batch filled (Java: its last batch full). A record
	// that did not fit a full batch, or would start a batch, on a
	// partition batch.size bytes went to moved the partition above
	// already; one that starts a batch and only then makes batch.size
	// fills that batch before the move, so it is not left alone.
	boundary := full || started && (p.cfg.regress.on(stickyLeftover) || p.cfg.regress.on(stickyStartAlone) && !hadOpen)
	if sticky && t.sticky.placed(pr.size, p.cfg.batchSize, boundary) {
		p.stickyMove(t, n)
	}
	return nil
}

// wakeForLinger wakes the sender for a batch opened at now, whose linger
// deadline is new to it, unless the sender sleeps until that deadline or
// earlier anyway: it then finds the batch when it wakes. At 1,000 keyed
// partitions a batch opens every few records, and waking the sender for
// each cost Produce a channel operation, often a thread wake-up, and a
// sender pass over every partition under acc.mu. Called with acc.mu held.
func (p *Producer) wakeForLinger(now time.Time) {
	s := p.s
	if at := s.sleepUntil.Load(); at != 0 && at <= int64(now.Add(p.cfg.linger).Sub(s.base)) {
		return
	}
	p.wakeSender()
}

// queuedFunc is the adaptive partitioner's view of t's queues, nil when
// partitioner.adaptive.partitioning.enable is off. With
// partitioner.availability.timeout.ms, a partition whose queue has waited
// longer than that with nothing sent counts as more queued than any other
// (unavailable), so it is chosen only when every partition looked at is.
func (p *Producer) queuedFunc(t *topicState) func(int32) int {
	if !p.cfg.adaptive {
		return nil
	}
	if p.cfg.availTimeout > 0 {
		now := int64(time.Since(p.s.base))
		return func(i int32) int {
			pb := t.bufs[i]
			q := pb.queued()
			if q > 0 && pb.ps.unavailable(now, p.cfg.availTimeout) {
				q += unavailableQueued
			}
			return q
		}
	}
	return func(i int32) int { return t.bufs[i].queued() }
}

// unavailableQueued is what an unavailable partition adds to its queue
// length for the adaptive partitioner: more than any queue can hold.
const unavailableQueued = math.MaxInt32

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
func (p *Producer) batchBufferMost() int {
	if p.cfg.regress.on(pooledOversize) {
		return math.MaxInt
	}
	return protocol.RecordBatchOverhead + p.maxBatchBody()
}

// maxBatchBody is the most record bytes a batch of two or more records may
// carry: batch.size less the RecordBatch header, or max.request.size's less
// if smaller. A batch's first record always fits (a larger one is a batch
// of its own; Produce refuses one past max.request.size). Negative for a
// batch.size below the header: every record is a batch of its own.
func (p *Producer) maxBatchBody() int {
	return min(p.cfg.batchSize, p.cfg.maxRequestSize) - protocol.RecordBatchOverhead
}

// sealLocked closes pb's open batch for new records and queues it.
func (p *Producer) sealLocked(pb *partBuf) {
	b := pb.open
	if b == nil {
		return
	}
	pb.open = nil
	pb.openGen++
	pb.bigBatches = b.builder.Cap()-b.builder.Free() > keepBuffer
	p.settleMemory(b)
	pb.sealed = append(pb.sealed, b)
	if !pb.inSealedIn {
		pb.inSealedIn = true
		p.acc.sealedIn = append(p.acc.sealedIn, pb)
	}
	p.wakeSender()
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

// takeUnsentLocked moves everything of ps not yet sent into the sender's
// queue, the open batch too (as it is: it is about to fail, not be sent),
// for shutdown and vanished partitions. Called with acc.mu held.
func (s *sender) takeUnsentLocked(ps *partitionState) {
	ps.buf.closeOpen()
	s.takeSealedLocked(ps)
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

// takeSealedLocked hands ps's sealed batches to the sender goroutine, which
// owns them from then on, and puts ps in the ready set. Called on the sender goroutine with acc.mu held.
func (s *sender) takeSealedLocked(ps *partitionState) {
	pb := ps.buf
	if len(pb.sealed) == 0 {
		return
	}
	if s.txn != nil {
		s.txn.queued(ps, pb.sealed)
	}
	if len(ps.queue) == 0 && s.cfg.availTimeout > 0 {
		ps.waitSince.Store(int64(time.Since(s.base)))
	}
	ps.queue = pb.takeSealed(ps.queue)
	ps.queuedPub.Store(int32(len(ps.queue)))
	s.active.add(ps)
	s.markReady(ps)
}

// popQueue removes and returns the oldest batch of ps.queue. Called on the
// sender goroutine. Taking the last batch keeps the queue at the start of
// its array: slicing past it would leave no room, and the next
// takeSealedLocked would allocate a new array for every batch of a
// partition that sends one at a time (most of the allocations with many
// partitions).
func (s *sender) popQueue(ps *partitionState) *batch {
	b := ps.queue[0]
	ps.queue[0] = nil
	if len(ps.queue) == 1 {
		ps.queue = ps.queue[:0]
	} else {
		ps.queue = ps.queue[1:]
		if s.cfg.availTimeout > 0 {
			ps.waitSince.Store(int64(time.Since(s.base))) // sent one: the rest wait from now
		}
	}
	ps.queuedPub.Store(int32(len(ps.queue)))
	return b
}

// setPartitionsLocked installs a topic's partition list from metadata and
// places the records that were waiting for it.
func (p *Producer) setPartitionsLocked(t *topicState, count int32, now time.Time) {
	for i := int32(len(t.parts)); i < count; i++ {
		ps := &partitionState{topic: t, id: i, admission: p.limiter.Partition(t.name, i)}
		ps.buf = &partBuf{ps: ps}
		t.parts = append(t.parts, ps)
		t.bufs = append(t.bufs, ps.buf)
	}
	waiting := t.waiting
	t.waiting = nil
	var flushNow []*partBuf // hold records a Flush waits for
	for _, w := range waiting {
		pr := w.pendingRecord
		pr.size -= w.extra // the batch holds the extra (placeLocked), the record its size
		if err := p.placeLocked(t, pr, w.data, w.extra, now); err != nil {
			p.failRecordLocked(w.pendingRecord, err)
			continue
		}
		if p.acc.flushed && pr.gen <= p.acc.flushedGen {
			flushNow = append(flushNow, t.bufs[pr.rec.partition])
		}
	}
	for _, pb := range flushNow {
		p.sealLocked(pb) // a no-op once sealed
	}
}

// failWaitingLocked fails every record waiting for t's partitions with
// ErrTopicMetadata and cause (a metadata error that retrying cannot fix).
func (p *Producer) failWaitingLocked(t *topicState, cause error) {
	for _, pr := range t.waiting {
		p.failRecordLocked(pr.pendingRecord, &DeliveryError{Topic: t.name, Partition: -1, BaseSequence: -1,
			Err: fmt.Errorf("%w: %w", ErrTopicMetadata, cause)})
	}
	clear(t.waiting)
	t.waiting = t.waiting[:0]
}

// failRecordLocked fails an accepted record that is in no batch.
func (p *Producer) failRecordLocked(pr pendingRecord, err error) {
	p.s.stats.recordsFailed.Add(1) // Stats.RecordsFailed counts every accepted record that failed
	p.cbs.pushCounted(completion{rec: pr.rec, cb: pr.cb, err: err, gen: pr.gen, memory: int64(pr.size)}, p)
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
