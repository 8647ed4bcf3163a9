package producer

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/longhaul-kafka/longhaul/inflight"
	"github.com/longhaul-kafka/longhaul/producer/internal/judge"
	"github.com/longhaul-kafka/longhaul/protocol"
)

// sender is the one goroutine that talks to brokers. Everything in it is
// owned by that goroutine; other goroutines reach it through Producer.post.
type sender struct {
	p   *Producer
	cfg *config
	// matrix is the error matrix it applies (judge.Production; a
	// negative control's variant in tests).
	matrix *judge.Matrix
	// gid is the id of the goroutine running run, where every hook but
	// HookRecordDone runs: the calls that wait refuse it (onOwnGoroutine).
	gid atomic.Uint64

	// Producer identity; see control.go (maintainIdentity).
	pid        int64
	epoch      int16
	haveID     bool
	needBump   bool // a sequence gap or lost state: bump once all in flight drained
	needNewID  bool // the bump must ask for a new producer id
	controlOps int  // control requests (metadata, InitProducerId) running
	idBusy     bool
	idRetryAt  time.Time
	idFailures int
	lastIDErr  error
	bumps      atomic.Int64
	idPub      atomic.Int64 // producer id << 16 | epoch, for Stats; -1 before the first

	// Metadata; see control.go (maintainMetadata).
	metaWanted   atomic.Bool
	metaBusy     bool
	metaNext     time.Time
	metaRetryAt  time.Time
	metaFailures int
	control      *protocol.Conn // for metadata and InitProducerId
	bootIdx      int
	// bootOnly: control requests go to bootstrap.servers alone, until a
	// metadata answer names the brokers (rebootstrap, control.go).
	bootOnly bool
	// failingSince is when control requests started failing, zero while
	// the last one succeeded (metadata.recovery.rebootstrap.trigger.ms).
	failingSince time.Time

	nodes    map[int32]*nodeState
	byID     []*nodeState // nodes in id order (node), for loops whose order changes what is sent
	nodeList []*nodeState

	active      partSet           // partitions whose batches the sender took (takeSealed), until pruneActive finds them empty
	lingering   partSet           // partitions whose batch stayed open past its linger (lingeredKeptOpen)
	ready       partSet           // partitions to visit in the next pass (markReady)
	visit       []*partitionState // scratch: ready as taken by a pass
	backoffWait deadlineHeap      // partitions with a batch waiting for their backoff to end
	splitWait   []*partitionState // partitions whose split waits for buffer.memory (split)
	rescan      bool              // visit every active partition in the next pass
	holding     bool              // some node holds lingered batches (holdLingered)
	seenBump    bool              // needBump as of the last pass
	seenID      int64             // idPub as of the last pass
	events      []func()
	stopping    bool
	lims        []inflight.Candidate    // scratch for Reserve
	touched     []*partitionState       // scratch: partitions of the response being handled
	req         protocol.ProduceRequest // reused for every request
	srFree      []*sentRequest          // recycled sentRequests

	ctx    context.Context // cancelled by shutdown: stops dials and control requests
	cancel context.CancelFunc
	bg     sync.WaitGroup // dial and control goroutines

	stats senderStats
	reqs  atomic.Int64 // produce requests sent (Stats.ProduceRequests)
	probe *senderProbe // nil in production (config.probe)

	// txn drives transactions (txndriver.go); nil without transactional.id.
	txn      *txnDriver
	txnStats txnStats

	// sleepUntil is when the sleeping loop's timer fires, in nanoseconds
	// since base (monotonic); 0 while the loop runs, math.MaxInt64 while
	// it sleeps with no timer. Produce reads it to skip waking the loop
	// for a new batch whose linger ends after the timer (wakeForLinger).
	sleepUntil atomic.Int64
	base       time.Time

	expireAt time.Time    // earliest delivery timeout expire's last walk of the partitions found (zero: none)
	settling []*settleJob // batches of unknown fate waiting for read-back (readback.go)

	// Limit changes wait here while acc.mu is held (limitChanged).
	holdWindows bool
	heldWindows []limitChange
	// resetWhy is the cause a Limiter.Reset reports: WindowIdle but
	// around a transactional epoch bump's resets (txnDriver.identity).
	resetWhy WindowCause
}

// senderProbe counts the sender's work, for the tests that assert what a
// pass costs (counts, not timings). Only tests set one (config.probe), as
// net/http's test hooks: in production the pointer is nil and each count is
// a nil check.
type senderProbe struct {
	loops       atomic.Int64 // iterations of run's loop
	visits      atomic.Int64 // partitions sendReady visited
	looks       atomic.Int64 // partitions sendReady looked at under acc.mu
	holds       atomic.Int64 // passes in which a lingered batch was held (heldByNode)
	expireWalks atomic.Int64 // expire's walks of the partitions
}

type senderStats struct {
	recordsSent, recordsFailed, batchesSent, batchesRetried atomic.Int64
	throttles, throttledNanos                               atomic.Int64 // Stats.Throttles, Stats.ThrottledTime
	readback                                                readbackCounters
}

// nodeState is one broker as the sender sees it.
type nodeState struct {
	id           int32
	addr         string
	admission    *inflight.Node // this node in the limiter: its request slots
	conn         *protocol.Conn // nil: not connected
	draining     *protocol.Conn // being drained to renew its SASL session (checkConn)
	renewed      bool           // this pass closed the drained one: a dial now continues it (dialed); cleared per pass
	dialing      bool
	backoffUntil time.Time
	failures     int
	lastErr      error         // why the last connection failed, for timeouts
	rtMin        time.Duration // fastest response on conn (0: none yet)
	rtLast       time.Duration // the latest response's time on conn
	hold         bool          // lingered batches of partitions it leads wait (holdLingered)
	// throttledUntil: conn's broker answered with a throttle and reads
	// nothing from it until then (KIP-219): nothing is sent on it meanwhile
	// (zero: not throttled; reset with the connection).
	throttledUntil time.Time
	connected      atomic.Bool       // for Stats
	stats          nodeStats         // for Stats
	cand           []*partitionState // scratch: partitions with a batch for this node
	blocked        []*partitionState // partitions waiting for a connection or a request slot
}

// sentRequest is one ProduceRequest in flight and the batches it carries,
// aligned with ir.Tickets.
type sentRequest struct {
	node    *nodeState
	conn    *protocol.Conn
	version int16
	sentAt  time.Time
	ir      inflight.Request
	batches []*batch

	// The outcome, written by the connection's goroutine before onDone
	// posts onEvent, which reads it on the sender goroutine: res.Partitions
	// is aligned with batches.
	res protocol.ProduceResult
	err error

	// Bound once per pooled sentRequest, so a request allocates no
	// closures.
	onDone  func(error)
	onEvent func()
}

// keepRequestBatches is the most batches a pooled sentRequest keeps room
// for (see freeRequest).
const keepRequestBatches = 256

// newRequest takes a sentRequest from the free list or makes one.
func (s *sender) newRequest(n *nodeState, version int16) *sentRequest {
	var sr *sentRequest
	if k := len(s.srFree); k > 0 {
		sr = s.srFree[k-1]
		s.srFree[k-1] = nil
		s.srFree = s.srFree[:k-1]
	} else {
		sr = new(sentRequest)
		sr.onDone = func(err error) {
			sr.err = err
			s.p.post(sr.onEvent)
		}
		sr.onEvent = func() { s.handleProduce(sr) }
	}
	sr.node, sr.conn, sr.version = n, n.conn, version
	return sr
}

// freeRequest recycles sr once its outcome has been handled. Slices that
// grew past keepRequestBatches are dropped, not pooled: a request to a
// node leading thousands of partitions would leave each pooled request
// holding room for thousands of batches, memory that grows with the
// partition count and stays while the producer idles.
func (s *sender) freeRequest(sr *sentRequest) {
	clear(sr.batches)
	sr.batches = sr.batches[:0]
	if cap(sr.batches) > keepRequestBatches {
		sr.batches = nil
	}
	if cap(sr.ir.Tickets) > keepRequestBatches {
		sr.ir.Tickets = nil
	}
	if cap(sr.res.Partitions) > keepRequestBatches {
		sr.res = protocol.ProduceResult{}
	}
	sr.node, sr.conn, sr.err = nil, nil, nil
	s.srFree = append(s.srFree, sr)
}

func newSender(p *Producer) *sender {
	s := &sender{p: p, cfg: &p.cfg, active: partSet{bit: activeBit}, lingering: partSet{bit: lingeringBit}, ready: partSet{bit: readyBit}, resetWhy: WindowIdle, matrix: p.cfg.regress.judgeMatrix(), pid: -1, epoch: -1, nodes: make(map[int32]*nodeState), base: time.Now(), probe: p.cfg.probe}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.idPub.Store(-1)
	if p.cfg.transactionalID != "" {
		s.txn = newTxnDriver(s)
	}
	p.mem.paid = p.wakeSender // a split waiting for buffer.memory tries again (split)
	return s
}

// wantMetadata asks for a metadata refresh soon; safe from any goroutine.
func (s *sender) wantMetadata() {
	s.metaWanted.Store(true)
	s.p.wakeSender()
}

func (s *sender) run() {
	if !s.cfg.regress.on(hookWaitUndetected) {
		s.gid.Store(goroutineID())
	}
	defer close(s.p.senderDone)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		if s.probe != nil {
			s.probe.loops.Add(1)
		}
		// Awake: a batch opened from now on wakes the loop again, as this
		// pass may have looked at its partition before it was opened.
		s.sleepUntil.Store(0)
		s.events = s.p.takeEvents(s.events)
		for i, f := range s.events {
			f()
			s.events[i] = nil
		}
		select {
		case <-s.p.quit:
			s.shutdown()
			return
		default:
		}
		now := time.Now()
		// The loop sleeps until the earliest deadline something below
		// named (linger, backoff, delivery timeout, metadata age) or an
		// event arrives; with none due it does not wake at all.
		var next time.Time
		next = earliest(next, s.maintainIdentity(now))
		next = earliest(next, s.maintainMetadata(now))
		next = earliest(next, s.expire(now))
		next = earliest(next, s.settleDue(now))
		next = earliest(next, s.sendReady(now))
		if s.metaWanted.Load() {
			// sendReady found a partition without a usable leader. It
			// does not wake the loop (that would spin while a refresh
			// backs off); the refresh starts here or when its backoff
			// ends.
			next = earliest(next, s.maintainMetadata(now))
		}
		var tc <-chan time.Time
		if !next.IsZero() {
			d := max(next.Sub(now), time.Millisecond)
			s.sleepUntil.Store(int64(now.Sub(s.base) + d))
			timer.Reset(d)
			tc = timer.C
		} else {
			s.sleepUntil.Store(math.MaxInt64)
		}
		select {
		case <-s.p.wake:
		case <-tc:
		case <-s.p.quit:
		}
		timer.Stop()
	}
}

// earliest returns the earlier of two times; the zero time means "none".
func earliest(a, b time.Time) time.Time {
	if a.IsZero() || !b.IsZero() && b.Before(a) {
		return b
	}
	return a
}

// sendReady seals lingered batches and sends every batch the in-flight
// limiter admits. It returns when it next needs to look (linger, backoff).
//
// It visits only the partitions that may have become able to send since
// they were last visited (the ready set, markReady): those handed new
// sealed batches, those a response, a failure or a leader change touched,
// those whose backoff ended, those waiting for a node that connected or
// freed a request slot; and every active partition after a change that
// concerns all (metadata, producer id or epoch, an epoch bump starting).
func (s *sender) sendReady(now time.Time) (next time.Time) {
	p := s.p
	if s.needBump != s.seenBump || s.idPub.Load() != s.seenID {
		s.seenBump, s.seenID = s.needBump, s.idPub.Load()
		s.rescan = true
	}
	for ps := s.backoffWait.popDue(now); ps != nil; ps = s.backoffWait.popDue(now) {
		s.markReady(ps)
	}
	next = earliest(next, s.backoffWait.next())
	for i, ps := range s.splitWait {
		s.markReady(ps) // split tries again; a refusal lists it again
		s.splitWait[i] = nil
	}
	s.splitWait = s.splitWait[:0]

	s.holdLingered()
	p.acc.locked(func(v accHeld) {
		if v.closed() {
			// Close seals everything (Flush seals what it waits for
			// itself, flush.go).
			v.sealAll()
		}
		// Only the partitions something may have changed for are looked
		// at, not every partition holding data: the lingered batches
		// kept open (s.lingering), the batches whose linger ended (in the
		// order they opened) and the partitions with sealed batches. At
		// 1,000 keyed partitions a walk over all of them under acc.mu in
		// every pass kept Produce waiting for the lock.
		if s.probe != nil {
			s.probe.looks.Add(int64(s.lingering.len() + v.sealedIn()))
		}
		s.lingering.keep(func(ps *partitionState) bool {
			gen, open := v.open(ps)
			if open && ps.heldOpen(gen) && !s.ready.has(ps) && !s.rescan {
				// Held before and nothing changed for it: the batch is
				// the one held (lingerHeld names it), so it is not read
				// (a cache miss per held partition per pass).
				return true
			}
			if !open || now.Before(v.created(ps).Add(s.cfg.linger)) {
				// Sealed or withdrawn since; a new batch comes back
				// through lingerEnded.
				return false
			}
			return s.lingeredKeptOpen(v, ps, v.created(ps).Add(s.cfg.linger), now, &next)
		})
		looked := v.lingerEnded(now, &next, func(ps *partitionState, deadline time.Time) {
			if !s.lingering.has(ps) && s.lingeredKeptOpen(v, ps, deadline, now, &next) {
				s.lingering.add(ps)
			}
		})
		if s.probe != nil {
			s.probe.looks.Add(int64(looked))
		}
		v.takeAllSealed(func(ps *partitionState) { s.takeSealed(v, ps) })
	})
	if s.rescan {
		s.rescan = false
		s.pruneActive()
		for _, ps := range s.active.members() {
			s.markReady(ps)
		}
		// Every partition is looked at again: none waits for a node any
		// more (its leader may have moved off a node that is gone).
		for _, n := range s.byID {
			s.unblock(n)
		}
	}

	if !s.haveID {
		return next // the ready set waits; a producer id brings a rescan
	}
	// A connection the broker closed while idle (connections.max.idle.ms)
	// is dropped before any candidate is gathered for it: the next batch
	// dials at once rather than fail a write and back off. A connection
	// whose SASL session is due for renewal (KIP-368) is drained, then
	// replaced (checkConn, conns.go). Checked once per pass, so a node's
	// connection cannot vanish between gathering its candidates and
	// sending to it.
	for _, n := range s.byID {
		next = earliest(next, s.throttleEnds(n, now))
		next = earliest(next, s.checkConn(n, now))
		if n.conn == nil && len(n.blocked) > 0 {
			// Partitions wait for this node's connection: dial (again,
			// once its backoff ends; not while the old one drains).
			next = earliest(next, s.dial(n, now))
		}
	}
	s.visit = s.ready.take(s.visit)
	if s.probe != nil {
		s.probe.visits.Add(int64(len(s.visit)))
	}
	for i, ps := range s.visit {
		s.visit[i] = nil
		s.ready.leave(ps)
		if !s.hasSendable(ps) {
			continue
		}
		if now.Before(ps.backoffUntil) {
			next = earliest(next, ps.backoffUntil)
			s.backoffWait.wait(ps)
			continue
		}
		if s.needBump {
			s.park(ps)
		}
		if len(ps.retry) > 0 && ps.retry[0].split && len(ps.inflight) == 0 && !s.needBump && !s.split(ps) {
			s.splitWait = append(s.splitWait, ps) // before any position is reserved for it
			continue
		}
		if rearm := s.cfg.idleRearm; rearm > 0 && len(ps.inflight) == 0 && len(ps.retry) == 0 &&
			!ps.lastAck.IsZero() && now.Sub(ps.lastAck) > rearm {
			// The broker may have expired our state meanwhile (KIP-854,
			// invisible to clients): the next batch goes alone until it
			// is acknowledged. The default, minutes, is far below Kafka's
			// producer.id.expiration.ms (a day) and costs one round trip
			// per burst after a pause that long.
			s.p.limiter.Reset(ps.admission)
			ps.lastAck = time.Time{}
		}
		if ps.leader() < 0 {
			s.metaWanted.Store(true) // new metadata brings a rescan
			continue
		}
		n := s.nodes[ps.leader()]
		if n == nil || n.addr == "" {
			s.metaWanted.Store(true)
			continue
		}
		if n.conn == nil {
			next = earliest(next, s.dial(n, now))
			s.blockOn(n, ps)
			continue
		}
		if len(n.cand) == 0 {
			s.nodeList = append(s.nodeList, n)
		}
		n.cand = append(n.cand, ps)
	}
	s.visit = s.visit[:0]
	for _, n := range s.nodeList {
		s.sendToNode(n, now)
		clear(n.cand)
		n.cand = n.cand[:0]
	}
	clear(s.nodeList)
	s.nodeList = s.nodeList[:0]
	for _, n := range s.nodes {
		n.renewed = false // a later dial is a new connection
	}
	return next
}

// lingeredKeptOpen decides about ps's open batch, whose linger ended at
// deadline: seal it, or keep it open and filling. It reports whether the
// batch stays open (sendReady keeps ps in s.lingering to look again).
// Runs inside the accumulator's lock (v).
func (s *sender) lingeredKeptOpen(v accHeld, ps *partitionState, deadline, now time.Time, next *time.Time) bool {
	gen, _ := v.open(ps)
	switch {
	case ps.heldOpen(gen) && !s.ready.has(ps) && !s.rescan:
		// Found unable to send before, and nothing that could change
		// that has happened to it since.
		return true
	case s.holding && s.heldByNode(ps, deadline, now, next):
		// Its leader queues our requests: the batch keeps filling until a
		// response frees a slot, for at most the latest response's time
		// past its linger. Looked at in every pass while held (the
		// negative control parks it until the node's next response
		// instead).
		ps.lingerHeld = 0
		if s.cfg.regress.on(holdUnbounded) {
			ps.lingerHeld = gen
		}
		return true
	case s.canSendNow(ps) && s.room(ps) > len(ps.queue)+v.sealed(ps):
		// Every sealed batch goes out in this pass with room to spare:
		// the lingered tail goes with them, rather than wait for their
		// acks to wake the sender.
		v.seal(ps)
		return false
	default:
		// A lingered batch of a partition that cannot send now keeps
		// filling, as in the Java client: sealing it would queue a small
		// batch that takes a whole slot of the window. An ack marks the
		// partition ready to look again. Without a leader, only a
		// metadata answer can change that: one is asked for (the run
		// loop starts it, or waits out its backoff), since an answer
		// that came while the partition held nothing asked for none.
		ps.lingerHeld = gen
		if ps.leader() < 0 {
			s.metaWanted.Store(true)
		}
		return true
	}
}

// heldOpen reports whether ps's open batch, of generation gen
// (accHeld.open), is the one lingeredKeptOpen found unable to send
// (lingerHeld).
func (ps *partitionState) heldOpen(gen uint32) bool {
	return ps.lingerHeld != 0 && ps.lingerHeld == gen
}

// takeUnsent moves everything of ps not yet sent into the sender's
// queue, the open batch too (as it is: it is about to fail, not be sent),
// for shutdown and vanished partitions.
func (s *sender) takeUnsent(v accHeld, ps *partitionState) {
	v.closeOpen(ps)
	s.takeSealed(v, ps)
}

// takeSealed hands ps's sealed batches to the sender goroutine, which
// owns them from then on, and puts ps in the ready set.
func (s *sender) takeSealed(v accHeld, ps *partitionState) {
	if v.sealed(ps) == 0 {
		return
	}
	if len(ps.queue) == 0 && s.cfg.availTimeout > 0 {
		ps.waitSince.Store(int64(time.Since(s.base)))
	}
	n := len(ps.queue)
	ps.queue = v.takeSealed(ps, ps.queue)
	if s.txn != nil {
		s.txn.queued(ps, ps.queue[n:])
	}
	ps.queuedPub.Store(int32(len(ps.queue)))
	s.active.add(ps)
	s.markReady(ps)
}

// popQueue removes and returns the oldest batch of ps.queue. Called on the
// sender goroutine. Taking the last batch keeps the queue at the start of
// its array: slicing past it would leave no room, and the next
// takeSealed would allocate a new array for every batch of a
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

// pruneActive drops from s.active the partitions with nothing queued,
// waiting for retry or in flight; takeSealed lists them again.
func (s *sender) pruneActive() {
	s.active.keep(func(ps *partitionState) bool {
		return len(ps.queue) > 0 || len(ps.retry) > 0 || len(ps.inflight) > 0
	})
}

// markReady puts ps in the ready set: the next pass looks at it.
func (s *sender) markReady(ps *partitionState) { s.ready.add(ps) }

// blockOn parks ps until node n connects or frees a request slot
// (unblock).
func (s *sender) blockOn(n *nodeState, ps *partitionState) {
	if ps.blockedOn != n {
		ps.blockedOn = n
		n.blocked = append(n.blocked, ps)
	}
}

// unblock marks every partition waiting for n ready.
func (s *sender) unblock(n *nodeState) {
	for i, ps := range n.blocked {
		if ps.blockedOn == n {
			ps.blockedOn = nil
			s.markReady(ps)
		}
		n.blocked[i] = nil
	}
	n.blocked = n.blocked[:0]
}

// sendToNode sends as many requests to n as the limiter allows, each with
// at most one batch per partition.
func (s *sender) sendToNode(n *nodeState, now time.Time) {
	version, ok := n.conn.Version(0)
	if !ok || version < 3 {
		return // dial() rejects such brokers; the conn is being replaced
	}
	if now.Before(n.throttledUntil) {
		for _, ps := range n.cand {
			s.blockOn(n, ps) // until the throttle ends (throttleEnds)
		}
		return
	}
	for len(n.cand) > 0 {
		// Keep the request under max.request.size; the rest waits for the
		// next request.
		cands := n.cand
		size := 0
		for i, ps := range cands {
			size += s.peekSize(ps)
			if i > 0 && size > s.cfg.maxRequestSize {
				cands = cands[:i]
				break
			}
		}
		s.lims = s.lims[:0]
		for _, ps := range cands {
			s.lims = append(s.lims, inflight.Candidate{Partition: ps.admission, Pos: s.nextPos(ps)})
		}
		sr := s.newRequest(n, version)
		if !s.p.limiter.Reserve(n.admission, s.lims, &sr.ir) {
			s.freeRequest(sr)
			// At the node's request cap, or none may send: those wait
			// for a response (theirs, or any of n's: unblock).
			for _, ps := range n.cand {
				s.blockOn(n, ps)
			}
			return
		}
		j := 0
		for _, t := range sr.ir.Tickets {
			for cands[j].admission != t.Partition {
				j++
			}
			// The batch nextPos named: its position is the ticket's.
			sr.batches = append(sr.batches, s.takeBatch(cands[j]))
		}
		s.issue(sr)
		s.reqs.Add(1)
		s.cfg.hooks.requestSent(s, sr)
		// The next request: admitted partitions that still have a batch
		// and room, then those the size cut left out. One not admitted
		// waits for its own response: nothing else changes its answer.
		keep := n.cand[:0]
		j = 0
		for _, t := range sr.ir.Tickets {
			for cands[j].admission != t.Partition {
				j++
			}
			if ps := cands[j]; s.hasSendable(ps) && s.p.limiter.MayReserve(ps.admission, s.nextPos(ps)) {
				keep = append(keep, ps)
			}
		}
		keep = append(keep, n.cand[len(cands):]...)
		clear(n.cand[len(keep):])
		n.cand = keep
	}
}

// hasSendable reports whether ps has a batch to send now.
func (s *sender) hasSendable(ps *partitionState) bool {
	if s.retryIndex(ps) >= 0 {
		return true
	}
	return !s.needBump && len(ps.retry) == 0 && len(ps.queue) > 0 && s.withinWindow(ps) && (s.txn == nil || s.txn.maySend(ps))
}

// retryIndex returns the index in ps.retry of the batch to resend next, or
// -1. Normally that is the oldest. While an epoch bump waits, only batches
// whose earlier attempt may be in the log go out, oldest first, under the
// old epoch and sequence, until the broker tells their fate (acked as a
// duplicate, or refused): renumbering them first could write them twice.
// Batches certainly not in the log wait for the bump; sending one would
// only be refused for the gap left by the batch that caused the bump.
func (s *sender) retryIndex(ps *partitionState) int {
	if !s.needBump || s.cfg.regress.on(resolveOldestRetry) && ps.unresolved() {
		if len(ps.retry) > 0 {
			return 0
		}
		return -1
	}
	for i, b := range ps.retry {
		if b.maybeWritten {
			return i
		}
	}
	return -1
}

// unresolved reports whether a batch waiting for retry may be in the log.
func (ps *partitionState) unresolved() bool {
	for _, b := range ps.retry {
		if b.maybeWritten {
			return true
		}
	}
	return false
}

// park releases the window positions of ps's batches that certainly are
// not in the log and wait for the epoch bump (renumber gives them fresh
// ones). Their retry can never be a duplicate, so the window need not be
// anchored at them; if it were, the batches that may be in the log, which
// the bump waits to resolve, could be held outside the window (reset to 5
// by a leader change) until delivery.timeout.ms: a stalled bump.
func (s *sender) park(ps *partitionState) {
	if s.cfg.regress.on(resolveOldestRetry) {
		return // the old path resends them before the bump
	}
	for _, b := range ps.retry {
		if !b.maybeWritten && !b.parked {
			s.p.limiter.Abandon(ps.admission, b.ord)
			b.parked = true
		}
	}
}

// canSendNow reports whether ps could send a new batch at once: a known
// leader, nothing waiting for retry, and room in the limiter, window
// included.
func (s *sender) canSendNow(ps *partitionState) bool {
	return ps.leader() >= 0 && len(ps.retry) == 0 && !s.needBump && s.p.limiter.MayReserve(ps.admission, ps.nextOrd)
}

// room is how many more batches of ps the limiter would admit now: 1 while
// the first-batch gate is armed, else the window, less what is in flight
// (inflight.Limiter.Room; the limiter owns the count and the state).
func (s *sender) room(ps *partitionState) int {
	return s.p.limiter.Room(ps.admission)
}

// anyInflight reports whether any batch is in flight: whether any
// partition's list of batches sent (ps.inflight) is not empty.
func (s *sender) anyInflight() bool {
	for _, ps := range s.active.members() {
		if len(ps.inflight) > 0 {
			return true
		}
	}
	return false
}

// withinWindow reports whether a new batch of ps would stay within the
// broker's window counted from the oldest unacknowledged batch; the rule
// and its reasons are the limiter's (inflight.Limiter.InWindow).
func (s *sender) withinWindow(ps *partitionState) bool {
	return s.p.limiter.InWindow(ps.admission, ps.nextOrd)
}

// nextPos is the limiter position of the batch takeBatch would send next:
// a retry keeps its ord, a new batch gets nextOrd.
func (s *sender) nextPos(ps *partitionState) uint64 {
	if i := s.retryIndex(ps); i >= 0 {
		return ps.retry[i].ord
	}
	return ps.nextOrd
}

// resolving reports whether some batch must be resent under the old epoch
// before the epoch can be bumped.
func (s *sender) resolving() bool {
	for _, ps := range s.active.members() {
		if s.retryIndex(ps) >= 0 {
			return true
		}
	}
	return false
}

// peekSize estimates the bytes ps's next batch adds to a request.
func (s *sender) peekSize(ps *partitionState) int {
	if i := s.retryIndex(ps); i >= 0 {
		return len(ps.retry[i].bytes) + 64
	}
	if len(ps.queue) == 0 {
		return 0
	}
	return ps.queue[0].builder.EncodedLen() + protocol.RecordBatchOverhead + 64
}

// takeBatch moves ps's next batch in flight: a retry first, in sequence
// order, else the oldest sealed batch, which gets its sequence number now.
func (s *sender) takeBatch(ps *partitionState) *batch {
	var b *batch
	if i := s.retryIndex(ps); i >= 0 {
		b = ps.retry[i]
		ps.retry = append(ps.retry[:i], ps.retry[i+1:]...)
		ps.retried.Add(1)
		s.stats.batchesRetried.Add(1)
	} else {
		b = s.popQueue(ps)
		b.seq = ps.nextSeq
		ps.nextSeq = addSeq(ps.nextSeq, b.builder.NumRecords())
		b.ord = ps.nextOrd
		ps.nextOrd++
		b.scanFrom, b.scanGen = ps.ackedEnd, ps.topic.recreated
		ps.report = append(ps.report, b) // from its first send on (finish)
		if s.txn != nil {
			s.txn.sent(ps, b)
		}
		// The batch is built in the builder's own memory (no copy when
		// uncompressed); it stays there, unchanged, until the batch is done.
		var err error
		b.bytes, err = b.builder.BuildInPlace(protocol.BatchHeader{
			ProducerID:    s.pid,
			ProducerEpoch: s.epoch,
			BaseSequence:  b.seq,
			Transactional: s.txn != nil,
			Compression:   s.cfg.compression,
			// Uncompressed when compression does not make it smaller.
			CompressIfSmaller: true,
			CompressionLevel:  s.cfg.compressionLevel,
		})
		if err != nil {
			// Only a codec failure can get here; the records stay safe
			// and the batch is sent uncompressed.
			s.p.log.Error("compressing a batch failed; sending it uncompressed", "err", err)
			b.bytes, _ = b.builder.BuildInPlace(protocol.BatchHeader{
				ProducerID: s.pid, ProducerEpoch: s.epoch, BaseSequence: b.seq, Transactional: s.txn != nil,
			})
		}
	}
	b.attempts++
	ps.sent.Add(1)
	s.stats.batchesSent.Add(1)
	ps.inflight = append(ps.inflight, b)
	return b
}

// addSeq adds n to a sequence number; sequences wrap from 2^31-1 to 0.
func addSeq(seq int32, n int) int32 {
	return int32((int64(seq) + int64(n)) & 0x7fffffff)
}

// issue writes one ProduceRequest; its outcome comes back as an event. The
// request is reused: Conn.Produce encodes it before returning.
func (s *sender) issue(sr *sentRequest) {
	req := &s.req
	req.Reset()
	req.Acks = -1
	// A request timeout closes the connection (connFailed), so the
	// broker's own timeout gets the same budget.
	req.Timeout = s.cfg.requestTimeout
	if s.txn != nil {
		req.TransactionalID = &s.cfg.transactionalID
		req.MaxVersion = s.txn.produceVersionCap()
	}
	for _, b := range sr.batches {
		t := b.part.topic
		b.topicID = t.id // the response names this id, even if t's changes meanwhile
		req.Add(t.name, t.id, b.part.id, b.bytes)
	}
	sr.sentAt = time.Now()
	s.probeK(sr) // read-back's K for first batches: a ListOffsets ahead (readback_k.go)
	sr.conn.Produce(req, &sr.res, s.cfg.requestTimeout, sr.onDone)
	// Drop the request's references; the connection holds the batch bytes
	// until sr.onDone runs.
	req.Reset()
}

// holdLingered decides, once per pass, which nodes hold lingered batches
// back (nodeState.hold): coalescing is on, the node has at least
// longhaul.coalesce.requests requests in flight, and it queues them: its
// latest response took more than twice the fastest one on the connection.
//
// Kafka serves one request per connection at a time, in order. While a
// node queues, a lingered batch sent now would wait behind the requests
// ahead of it anyway; held until a response frees a slot, it keeps filling,
// and the request that then goes carries every held partition's batch:
// fewer, fuller batches, which is most of what a broker spends per record
// at many partitions. The response-time test keeps pipelining over a long
// link untouched: there a response takes about the round trip, not twice
// the fastest, and nothing is held.
func (s *sender) holdLingered() {
	s.holding = false
	for _, n := range s.nodes {
		n.hold = s.cfg.coalesce > 0 && n.conn != nil && n.rtLast > 2*n.rtMin &&
			s.p.limiter.NodeInFlight(n.admission) >= s.cfg.coalesce
		s.holding = s.holding || n.hold
	}
}

// heldByNode reports whether ps's lingered batch waits for its leader
// (nodeState.hold). It waits at most the node's latest response time past
// its linger deadline, and next is moved to that time: a hold is meant to
// last until one response frees a slot, and one that takes longer (a
// stalled connection, or requests that never leave the node's count) must
// not hold the batch until delivery.timeout.ms.
func (s *sender) heldByNode(ps *partitionState, deadline, now time.Time, next *time.Time) bool {
	if ps.leader() < 0 {
		return false
	}
	n := s.nodes[ps.leader()]
	if n == nil || !n.hold {
		return false
	}
	if s.cfg.regress.on(holdUnbounded) {
		s.blockOn(n, ps) // the first version: parked until n answers
		if s.probe != nil {
			s.probe.holds.Add(1)
		}
		return true
	}
	until := deadline.Add(n.rtLast)
	if !now.Before(until) {
		return false
	}
	*next = earliest(*next, until)
	if s.probe != nil {
		s.probe.holds.Add(1)
	}
	return true
}
