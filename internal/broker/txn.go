package broker

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"time"
	"unicode/utf16"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/longhaul-kafka/longhaul/protocol"
)

// The transaction coordinator, modelled on Kafka's TransactionCoordinator
// and TransactionStateManager: a transactional id maps to a producer id and
// epoch and to the state of its current transaction. The coordinator
// answers EndTxn once the transaction is prepared and writes the markers
// afterwards (after the marker delay, or once held markers are released),
// so a client meeting a transaction still in PREPARE_COMMIT or
// PREPARE_ABORT gets CONCURRENT_TRANSACTIONS, as from Kafka.

// txnState is the state of a transactional id's current transaction.
type txnState uint8

const (
	txnEmpty          txnState = iota // no transaction since the last InitProducerId
	txnOngoing                        // partitions or offsets added
	txnPrepareCommit                  // EndTxn(commit) answered, markers pending
	txnPrepareAbort                   // EndTxn(abort), a fence or a timeout; markers pending
	txnCompleteCommit                 // markers written
	txnCompleteAbort                  // markers written
)

var txnStateNames = [...]string{"Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort"}

func (s txnState) String() string {
	if int(s) < len(txnStateNames) {
		return txnStateNames[s]
	}
	return fmt.Sprintf("txnState(%d)", s)
}

// txnTransitions lists, for each state, the states it may move to (Kafka's
// TransactionState.validPreviousStates, read the other way).
var txnTransitions = [...][]txnState{
	txnEmpty:          {txnEmpty, txnOngoing, txnPrepareAbort},
	txnOngoing:        {txnOngoing, txnPrepareCommit, txnPrepareAbort},
	txnPrepareCommit:  {txnCompleteCommit},
	txnPrepareAbort:   {txnCompleteAbort},
	txnCompleteCommit: {txnEmpty, txnOngoing, txnPrepareAbort},
	txnCompleteAbort:  {txnEmpty, txnOngoing, txnPrepareAbort},
}

// preparing reports a transaction whose markers are pending.
func (s txnState) preparing() bool { return s == txnPrepareCommit || s == txnPrepareAbort }

// txnMeta is one transactional id's coordinator state. c.mu guards it.
type txnMeta struct {
	id      string
	pid     int64
	epoch   int16
	prevPID int64 // the producer id before an exhausted epoch moved to a new one, -1
	// lastEpoch is the epoch before the last bump, -1 for none: it
	// answers a retried InitProducerId bump. Kafka keeps it in memory
	// only, so a coordinator loading the id forgets it (loadTxnPartition).
	lastEpoch int16
	// forgotten is the last epoch a load forgot, -1 for none, until the
	// next bump: a retry with it is counted when fenced
	// ([TxnStats].LoadFencedRetries).
	forgotten int16
	timeout   time.Duration
	state     txnState
	parts     []*partition
	groups    []string
	started   time.Time
	// seq numbers the transactions of the id, so a timer set for one
	// transaction ignores the next.
	seq uint64
	// timedOut is set when the coordinator aborted the last transaction
	// because it outlived its timeout.
	timedOut bool
	// markerEpoch is the epoch the pending or last markers carry.
	markerEpoch int16
	// timeoutTimer aborts the ongoing transaction once its timeout
	// passed; stopped when the transaction ends first.
	timeoutTimer *time.Timer
	// unmarked are the partitions of a prepared transaction whose
	// markers are still to be written.
	unmarked []*partition
}

// to moves m to state s, panicking on a transition the table does not
// allow: that is a coordinator bug, not a client error.
func (m *txnMeta) to(s txnState) {
	for _, ok := range txnTransitions[m.state] {
		if ok == s {
			m.state = s
			return
		}
	}
	panic(fmt.Sprintf("broker: transactional id %q: transition %v -> %v not allowed", m.id, m.state, s))
}

func (m *txnMeta) hasPartition(p *partition) bool {
	for _, q := range m.parts {
		if q == p {
			return true
		}
	}
	return false
}

func (m *txnMeta) hasGroup(g string) bool {
	for _, q := range m.groups {
		if q == g {
			return true
		}
	}
	return false
}

// partTxn is a partition's transaction bookkeeping: the first offset of
// each producer's open transaction (for the last stable offset), the
// aborted-transaction index and the offsets of control batches. c.mu
// guards it.
type partTxn struct {
	open    map[int64]openTxn // by producer id
	aborted []abortedTxn
	control map[int64]bool // offsets holding a transaction marker
}

// openTxn is a producer's open transaction on a partition.
type openTxn struct {
	first int64 // offset of its first batch
	epoch int16 // the epoch of its batches
}

// abortedTxn is one entry of a partition's aborted-transaction index.
type abortedTxn struct {
	pid         int64
	first, last int64 // first data offset, the ABORT marker's offset
}

// txnOf returns p's transaction bookkeeping, creating it. c.mu is held.
func (c *Cluster) txnOf(p *partition) *partTxn {
	pt := c.ptxn[p]
	if pt == nil {
		pt = &partTxn{open: make(map[int64]openTxn), control: make(map[int64]bool)}
		c.ptxn[p] = pt
	}
	return pt
}

// lso is p's last stable offset: the first offset of its earliest open
// transaction, or the high watermark. c.mu is held.
func (c *Cluster) lso(p *partition) int64 {
	lso := p.next
	if pt := c.ptxn[p]; pt != nil {
		for _, o := range pt.open {
			lso = min(lso, o.first)
		}
	}
	return lso
}

// Constants of the coordinator.
const (
	// coordPartitions is transaction.state.log.num.partitions and
	// offsets.topic.num.partitions (Kafka's default, 50).
	coordPartitions = 50
	// maxTxnTimeout is transaction.max.timeout.ms (15 minutes).
	maxTxnTimeout = 15 * time.Minute
	// DefaultMarkerDelay is how long the coordinator takes, by default,
	// to write a transaction's markers after answering EndTxn
	// ([Cluster.SetMarkerDelay]).
	DefaultMarkerDelay = 5 * time.Millisecond
)

// Coordinator key types of FindCoordinator.
const (
	coordGroup int8 = 0
	coordTxn   int8 = 1
)

// javaHash is Java's String.hashCode, over UTF-16 code units.
func javaHash(s string) int32 {
	var h int32
	for _, u := range utf16.Encode([]rune(s)) {
		h = 31*h + int32(u)
	}
	return h
}

// coordPartition is the __transaction_state (or __consumer_offsets)
// partition of a key: Utils.abs(hashCode) % 50, abs mapping MinInt32 to 0.
func coordPartition(key string) int {
	h := javaHash(key)
	if h == math.MinInt32 {
		h = 0
	} else if h < 0 {
		h = -h
	}
	return int(h) % coordPartitions
}

// coordinator returns the node coordinating key of keyType. c.mu is held.
func (c *Cluster) coordinator(keyType int8, key string) int32 {
	i := coordPartition(key)
	if keyType == coordGroup {
		return c.coordLeaders[0][i]
	}
	return c.coordLeaders[1][i]
}

// coordFault is an armed coordinator error ([Cluster.InjectCoordinatorError]).
type coordFault struct {
	key  int16 // API key, -1 any coordinator request
	code int16
	n    int
}

// takeCoordFault returns the code of the first armed fault for API key,
// using it up, or 0. c.mu is held.
func (c *Cluster) takeCoordFault(key int16) int16 {
	for i := range c.coordFaults {
		f := &c.coordFaults[i]
		if f.key == key || f.key == -1 {
			code := f.code
			if f.n--; f.n <= 0 {
				c.coordFaults = append(c.coordFaults[:i], c.coordFaults[i+1:]...)
			}
			return code
		}
	}
	return 0
}

// coordCheck returns the error a coordinator request of API key for
// (keyType, key) gets at node n before its own checks: an injected fault,
// NOT_COORDINATOR at the wrong node, or TRANSACTIONAL_ID_AUTHORIZATION_FAILED
// for a denied transactional id. c.mu is held.
func (c *Cluster) coordCheck(n *node, apiKey int16, keyType int8, key string) int16 {
	if keyType == coordTxn && c.deniedTxnIDs[key] {
		return kerr.TransactionalIDAuthorizationFailed.Code
	}
	if code := c.takeCoordFault(apiKey); code != 0 {
		return code
	}
	if c.coordinator(keyType, key) != n.id {
		return kerr.NotCoordinator.Code
	}
	return 0
}

// countConcurrent counts a CONCURRENT_TRANSACTIONS answer. c.mu is held.
func (c *Cluster) countConcurrent(code int16) int16 {
	if code == kerr.ConcurrentTransactions.Code {
		c.txnStats.ConcurrentTransactions++
	}
	return code
}

// bumpEpoch moves m to its next epoch, or to a new producer id at epoch 0
// when the epoch is exhausted; the epoch before is kept as the last one
// (a retry with it is answered the new pair). c.mu is held.
func (c *Cluster) bumpEpoch(m *txnMeta) {
	m.lastEpoch, m.forgotten = m.epoch, -1
	if m.epoch >= math.MaxInt16-1 {
		m.prevPID = m.pid
		m.pid = c.newProducerID()
		m.epoch = 0
		return
	}
	m.epoch++
}

// beginTxn moves m to Ongoing as a new transaction starts (a first
// partition or group added) and arms its timeout. c.mu is held.
func (c *Cluster) beginTxn(m *txnMeta, now time.Time) {
	if m.state == txnOngoing {
		return
	}
	m.to(txnOngoing)
	m.parts, m.groups = m.parts[:0], m.groups[:0]
	m.timedOut = false
	m.started = now
	m.seq++
	seq := m.seq
	m.timeoutTimer = c.after(m.timeout, func() {
		if m.seq == seq && m.state == txnOngoing {
			c.txnStats.TimedOut++
			m.timedOut = true
			c.fence(m)
		}
	})
}

// fence aborts m's ongoing transaction under a bumped epoch, so the
// producer holding the old epoch is fenced: what Kafka does for an
// InitProducerId meeting an ongoing transaction and for a transaction that
// timed out. Under transaction version 0/1 Kafka forgets the epoch before
// the fence (lastProducerEpoch is set to none), so a retry of an
// InitProducerId with that epoch is fenced. c.mu is held.
func (c *Cluster) fence(m *txnMeta) {
	c.bumpEpoch(m)
	if c.txnVersion < 2 {
		m.lastEpoch = -1
	}
	c.prepareEnd(m, false, m.epoch)
}

// prepareEnd moves m's ongoing (or, under transaction version 2, empty)
// transaction to PREPARE_COMMIT or PREPARE_ABORT and schedules its
// markers at markerEpoch. c.mu is held.
func (c *Cluster) prepareEnd(m *txnMeta, commit bool, markerEpoch int16) {
	if commit {
		m.to(txnPrepareCommit)
	} else {
		m.to(txnPrepareAbort)
	}
	m.seq++
	m.markerEpoch = markerEpoch
	c.stopTimer(m.timeoutTimer)
	m.timeoutTimer = nil
	if len(m.parts) == 0 && len(m.groups) == 0 {
		c.completeTxn(m) // nothing to mark
		return
	}
	m.unmarked = append(m.unmarked[:0], m.parts...)
	c.scheduleMarkers(m, c.markerDelay)
}

// scheduleMarkers writes m's pending markers once d passed (or, while
// markers are held, once they are released), unless the transaction
// ended otherwise first. c.mu is held.
func (c *Cluster) scheduleMarkers(m *txnMeta, d time.Duration) {
	seq := m.seq
	write := func() {
		if m.seq == seq && m.state.preparing() {
			c.writeMarkers(m)
		}
	}
	if c.markersHeld {
		c.heldMarkers = append(c.heldMarkers, write)
		return
	}
	c.after(d, write)
}

// writeMarkers writes m's markers on the partitions of its transaction
// not marked yet, settles its offsets and completes it. A marker lost
// ([Cluster.LoseMarkers]) is written again later, and a coordinator
// failing over between markers ([Cluster.FailOverBetweenMarkers]) has the
// new coordinator write them all again; meanwhile the transaction stays
// prepared. c.mu is held.
func (c *Cluster) writeMarkers(m *txnMeta) {
	commit := m.state == txnPrepareCommit
	now := time.Now()
	stopAt := -1 // a failover after this many markers
	if c.txnFaults.failovers > 0 && len(m.unmarked)+len(m.groups) >= 2 {
		stopAt = max(1, len(m.unmarked)/2)
	}
	var left []*partition
	written := 0
	for _, p := range m.unmarked {
		if stopAt >= 0 && written >= stopAt {
			left = append(left, p)
			continue
		}
		if p.t == nil || c.topics[p.t.name] != p.t {
			continue // the topic was deleted meanwhile
		}
		if c.txnFaults.lostMarkers > 0 {
			c.txnFaults.lostMarkers--
			c.txnStats.LostMarkers++
			left = append(left, p)
			continue
		}
		c.appendMarker(p, m.pid, m.markerEpoch, commit, now)
		c.txnStats.Markers++
		written++
	}
	if stopAt >= 0 && written > 0 {
		c.failOverCoordinator(m)
		return
	}
	if len(left) > 0 {
		m.unmarked = left
		c.scheduleMarkers(m, markerRetryBackoff)
		return
	}
	m.unmarked = m.unmarked[:0]
	for _, g := range m.groups {
		c.settleOffsets(g, m.pid, commit)
	}
	c.completeTxn(m)
}

// completeTxn moves a prepared transaction to its COMPLETE state. c.mu is
// held.
func (c *Cluster) completeTxn(m *txnMeta) {
	m.parts, m.groups = m.parts[:0], m.groups[:0]
	if m.state == txnPrepareCommit {
		m.to(txnCompleteCommit)
		c.txnStats.Committed++
	} else {
		m.to(txnCompleteAbort)
		c.txnStats.Aborted++
	}
	c.signalData() // the LSO moved
}

// appendMarker writes a COMMIT or ABORT control batch of pid on p, closes
// the producer's open transaction there and, for an abort, indexes it.
// A marker of a newer epoch resets the producer's retained batches, as a
// batch of that epoch would. c.mu is held.
func (c *Cluster) appendMarker(p *partition, pid int64, epoch int16, commit bool, now time.Time) {
	raw := controlBatch(pid, epoch, commit, c.coordEpoch, now)
	info, err := protocol.ParseBatchHeader(raw)
	if err != nil {
		panic(fmt.Sprintf("broker: marker batch does not parse: %v", err))
	}
	base := p.next
	protocol.SetBaseOffset(raw, base)
	setLeaderEpoch(raw, p.epoch)
	p.batches = append(p.batches, storedBatch{base: base, last: base, maxTS: info.MaxTimestamp, raw: raw})
	p.next = base + 1
	pt := c.txnOf(p)
	pt.control[base] = true
	if o, ok := pt.open[pid]; ok {
		delete(pt.open, pid)
		if !commit {
			pt.aborted = append(pt.aborted, abortedTxn{pid: pid, first: o.first, last: base})
		}
	}
	if s := p.pids[pid]; s == nil {
		p.pids[pid] = &producerState{epoch: epoch, lastWrite: now}
	} else if epoch > s.epoch {
		s.epoch = epoch
		s.batches = s.batches[:0]
		s.lastWrite = now
	}
	c.signalData()
}

var crc32c = crc32.MakeTable(crc32.Castagnoli)

// controlBatch builds a transaction marker: a control batch of one record
// whose key is version 0 and type (0 ABORT, 1 COMMIT) and whose value is
// version 0 and the coordinator epoch (Kafka's EndTransactionMarker).
func controlBatch(pid int64, epoch int16, commit bool, coordEpoch int32, now time.Time) []byte {
	key := []byte{0, 0, 0, 0}
	if commit {
		key[3] = 1
	}
	val := binary.BigEndian.AppendUint32([]byte{0, 0}, uint32(coordEpoch))
	var bb protocol.BatchBuilder
	bb.Append(now.UnixMilli(), key, val, nil)
	raw, err := bb.Build(nil, protocol.BatchHeader{ProducerID: pid, ProducerEpoch: epoch, BaseSequence: -1, Transactional: true})
	if err != nil {
		panic(fmt.Sprintf("broker: marker batch: %v", err))
	}
	// Set the control bit (0x20) of the attributes (bytes 21-22) and
	// sum again: the CRC (bytes 17-20) covers the attributes onward.
	raw[22] |= 0x20
	binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], crc32c))
	return raw
}

// after runs fn with c.mu held once d passed, unless the cluster closed
// (or stopTimer stopped it) first, and returns its timer (nil after
// Close). c.mu is held.
func (c *Cluster) after(d time.Duration, fn func()) *time.Timer {
	if c.closed {
		return nil
	}
	c.wg.Add(1)
	var tm *time.Timer
	tm = time.AfterFunc(d, func() {
		defer c.wg.Done()
		c.mu.Lock()
		defer c.mu.Unlock()
		delete(c.timers, tm)
		if !c.closed {
			fn()
		}
	})
	c.timers[tm] = struct{}{}
	return tm
}

// stopTimer stops a timer of after that has not fired; nil is ignored.
// c.mu is held.
func (c *Cluster) stopTimer(tm *time.Timer) {
	if _, ok := c.timers[tm]; ok && tm.Stop() {
		delete(c.timers, tm)
		c.wg.Done()
	}
}

// stopTimers stops every pending timer of after. c.mu is held.
func (c *Cluster) stopTimers() {
	for tm := range c.timers {
		if tm.Stop() {
			c.wg.Done()
		}
		delete(c.timers, tm)
	}
}

// txnProduce checks a batch against the transaction rules before the
// dedup check: a transactional batch must belong to its producer's ongoing
// transaction (added by AddPartitionsToTxn, or under transaction version
// 2 by this Produce v12+), and an idempotent batch of a producer with an
// open transaction on the partition is INVALID_TXN_STATE. It returns 0 to
// go on, or the code and message to answer; lenient says the batch is a
// transaction's first on the partition at a sequence other than 0, taken
// only because the broker is lenient (counted if appended). c.mu is held.
func (c *Cluster) txnProduce(r *request, p *partition, info protocol.BatchInfo, now time.Time) (code int16, msg string, lenient bool) {
	o, open := c.ptxn[p].openFor(info.ProducerID)
	if !info.Transactional() {
		if info.ProducerID >= 0 && open {
			return kerr.InvalidTxnState.Code, "the producer has an open transaction on this partition", false
		}
		return 0, "", false
	}
	if info.ProducerID < 0 {
		return kerr.InvalidRecord.Code, "transactional batch without a producer id", false
	}
	if open && o.epoch == info.ProducerEpoch {
		return 0, "", false // verified by its first batch; sequences are the producer state's
	}
	req := r.kreq.(*kmsg.ProduceRequest)
	if req.TransactionID == nil || c.deniedTxnIDs[*req.TransactionID] {
		return kerr.TransactionalIDAuthorizationFailed.Code, "", false
	}
	m := c.txns[*req.TransactionID]
	switch {
	case m == nil || m.pid != info.ProducerID:
		return kerr.InvalidProducerIDMapping.Code, "", false
	case info.ProducerEpoch != m.epoch:
		return kerr.InvalidProducerEpoch.Code, "", false
	}
	tv2 := req.Version >= 12 // as on Kafka 4.4, the request version decides, not the feature
	if !tv2 {
		// Verification (KIP-890 part 1): the partition must have been
		// added to the ongoing transaction.
		switch {
		case m.state.preparing():
			if req.Version >= 12 {
				return c.countConcurrent(kerr.ConcurrentTransactions.Code), "", false
			}
			return kerr.NotEnoughReplicas.Code, "transaction being completed", false
		case m.state != txnOngoing || !m.hasPartition(p):
			if req.Version >= 11 {
				return kerr.TransactionAbortable.Code, "partition not added to the transaction", false
			}
			return kerr.InvalidTxnState.Code, "partition not added to the transaction", false
		}
		return 0, "", false
	}
	if m.state.preparing() {
		return c.countConcurrent(kerr.ConcurrentTransactions.Code), "", false
	}
	// A transaction's first batch on a partition where the producer
	// retains no batch of this epoch must start at sequence 0 (Kafka
	// 4.1+); a Kafka 4.0 broker accepts any.
	s := p.pids[info.ProducerID]
	fresh := s == nil || s.epoch != info.ProducerEpoch || len(s.batches) == 0
	if fresh && info.BaseSequence != 0 {
		if !c.lenientTxnStart {
			return kerr.OutOfOrderSequenceNumber.Code, "a transaction's first batch must have sequence 0", false
		}
		lenient = true
	}
	c.beginTxn(m, now)
	if !m.hasPartition(p) {
		m.parts = append(m.parts, p)
	}
	return 0, "", lenient
}

// txnProduceWait is how long a transactional produce meeting a
// transaction being completed waits for its markers
// (add.partitions.to.txn.retry.backoff.max.ms).
const txnProduceWait = 100 * time.Millisecond

// txnCompleting reports whether req is transactional and its
// transactional id's transaction is being completed: its first batches
// would be answered CONCURRENT_TRANSACTIONS. c.mu is held.
func (c *Cluster) txnCompleting(req *kmsg.ProduceRequest) bool {
	if req.TransactionID == nil {
		return false
	}
	m := c.txns[*req.TransactionID]
	return m != nil && m.state.preparing()
}

// openFor returns pid's open transaction on the partition. A nil pt has
// none.
func (pt *partTxn) openFor(pid int64) (openTxn, bool) {
	if pt == nil {
		return openTxn{}, false
	}
	o, ok := pt.open[pid]
	return o, ok
}

// txnAppended notes an appended transactional batch: the first one of a
// transaction opens it on the partition. c.mu is held.
func (c *Cluster) txnAppended(p *partition, info protocol.BatchInfo, base int64) {
	if !info.Transactional() {
		return
	}
	pt := c.txnOf(p)
	if _, ok := pt.open[info.ProducerID]; !ok {
		pt.open[info.ProducerID] = openTxn{first: base, epoch: info.ProducerEpoch}
	}
}
