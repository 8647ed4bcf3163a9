package producer

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/longhaul-kafka/longhaul/producer/internal/judge"
	"github.com/longhaul-kafka/longhaul/protocol"
)

// runControl runs op (a Metadata or InitProducerId exchange) on the control
// connection in the background, dialing one first if needed, and runs the
// continuation op returns on the sender goroutine. A connection-level error
// drops the control connection so the next op dials another broker.
func (s *sender) runControl(op func(ctx context.Context, c *protocol.Conn) (then func(), err error), failed func(error)) {
	now := time.Now()
	s.controlRenewal(now)
	if s.cfg.rebootstrap && !s.bootOnly && !s.failingSince.IsZero() && now.Sub(s.failingSince) >= s.cfg.rebootstrapAfter {
		s.rebootstrap("control requests failed for metadata.recovery.rebootstrap.trigger.ms")
	}
	c := s.control
	addrs := s.controlAddrs()
	cfg := s.dialConfig()
	s.controlOps++
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		var err error
		if c == nil {
			c, err = dialFirst(s.ctx, addrs, cfg, s.cfg.requestTimeout)
		}
		ctx, cancel := context.WithTimeout(s.ctx, s.cfg.requestTimeout)
		defer cancel()
		var then func()
		if err == nil {
			then, err = op(ctx, c)
		}
		s.p.post(func() {
			s.controlOps--
			if err != nil {
				if s.failingSince.IsZero() {
					s.failingSince = time.Now()
				}
				if c != nil {
					c.Close()
				}
				if s.control == c {
					s.control = nil
				}
				if !s.stopping {
					failed(err)
				}
				return
			}
			s.failingSince = time.Time{}
			if s.stopping {
				c.Close()
				return
			}
			if s.control != c {
				if s.control != nil {
					c.Close() // two ops dialed at once; keep one
				} else {
					s.control = c
				}
			}
			then()
		})
	}()
}

// controlAddrs lists brokers to try for control requests: known brokers
// first (bootstrap names may be load balancers), then bootstrap.servers,
// each address once, rotated so failures spread over them. Once: dialFirst
// shares its budget out per entry, and bootstrap.servers usually names the
// known brokers again, so a repeat would halve every address's share (a
// slow broker behind dead addresses, say after nodes moved, could then
// never finish its handshake).
func (s *sender) controlAddrs() []string {
	var addrs []string
	seen := make(map[string]bool, len(s.byID)+len(s.cfg.bootstrap))
	add := func(a string) {
		if a != "" && (!seen[a] || s.cfg.regress.on(controlAddrsRepeat)) {
			seen[a] = true
			addrs = append(addrs, a)
		}
	}
	for _, n := range s.byID {
		if s.bootOnly {
			break // rebootstrapping: the known brokers are not asked
		}
		add(n.addr)
	}
	for _, a := range s.cfg.bootstrap {
		add(a)
	}
	s.bootIdx++
	k := s.bootIdx % len(addrs)
	return append(addrs[k:], addrs[:k]...)
}

// rebootstrap sends control requests to bootstrap.servers alone, each
// name resolved again at its dial, until a metadata answer names the
// brokers (KIP-899, metadata.recovery.strategy=rebootstrap): the cluster
// may have moved to addresses the known brokers no longer lead to, or a
// broker said the producer's view is stale (REBOOTSTRAP_REQUIRED,
// KIP-1102). Nothing else is reset: the producer id, epoch and sequences
// belong to the cluster's partitions, not to a connection, so batches in
// flight are retried with their sequences and deduplicated as after any
// lost connection; data connections follow the addresses the next answer
// gives (applyMetadata), each a new connection to the limiter.
func (s *sender) rebootstrap(reason string) {
	s.bootOnly = true
	if s.control != nil {
		s.control.Close()
		s.control = nil
	}
	s.p.log.Warn("rebootstrapping: asking bootstrap.servers alone for metadata", "reason", reason, "bootstrap.servers", s.cfg.bootstrap)
}

// dialFirst returns a connection to the first of addrs that answers. The
// budget is shared out: each address gets budget/len(addrs) of its own, so
// one that accepts connections and never answers cannot use up the time
// of the addresses after it.
func dialFirst(ctx context.Context, addrs []string, cfg protocol.DialConfig, budget time.Duration) (*protocol.Conn, error) {
	var errs []error
	share := budget / time.Duration(max(len(addrs), 1))
	for _, a := range addrs {
		actx, cancel := context.WithTimeout(ctx, share)
		c, err := protocol.Dial(actx, a, cfg)
		cancel()
		if err == nil {
			return c, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, fmt.Errorf("%w: %w", errNoBrokers, errors.Join(errs...))
}

// maintainMetadata starts a metadata refresh when one is wanted or due.
func (s *sender) maintainMetadata(now time.Time) time.Time {
	if s.metaBusy {
		return time.Time{}
	}
	if !s.metaWanted.Load() && now.Before(s.metaNext) {
		return s.metaNext
	}
	if now.Before(s.metaRetryAt) {
		return s.metaRetryAt
	}
	var topics []string
	s.p.acc.locked(func(v accHeld) {
		v.topics(func(t *topicState) {
			if s.topicNeeded(v, t, now) {
				topics = append(topics, t.name)
			}
		})
	})
	if topics == nil {
		topics = []string{}
	}
	if len(topics) == 0 && s.haveID {
		s.metaWanted.Store(false)
		s.metaNext = now.Add(s.cfg.metadataMaxAge)
		return s.metaNext
	}
	asked := s.metaWanted.Swap(false)
	s.metaBusy = true
	s.runControl(func(ctx context.Context, c *protocol.Conn) (func(), error) {
		ask := protocol.Metadata
		if s.cfg.autoCreateTopics {
			ask = protocol.MetadataAutoCreate // as the Java producer does
		}
		res, err := ask(ctx, c, topics)
		if err != nil {
			return nil, err
		}
		return func() { s.applyMetadata(res, asked) }, nil
	}, s.metadataFailed)
	return time.Time{}
}

func (s *sender) metadataFailed(err error) {
	s.metaBusy = false
	s.metaFailures++
	s.metaRetryAt = time.Now().Add(s.backoff(s.metaFailures))
	s.metaWanted.Store(true)
	s.p.log.Warn("metadata request failed", "err", err)
	s.p.acc.locked(func(v accHeld) {
		v.topics(func(t *topicState) {
			if t.parts == nil {
				t.lastErr = err
			}
		})
	})
}

// applyMetadata takes in brokers, topic ids, partition counts and leaders,
// judging each topic and partition entry's error code (topicVerdict,
// partitionUsable). asked says whether the request was wanted (a record
// waiting, a leader lost) rather than the periodic refresh: an answer to
// such a request that changes nothing backs off like a failure, as the
// Java client's does, so a producer whose wish no answer grants (a
// leader at an address no broker gives) does not ask again at once, for
// ever.
func (s *sender) applyMetadata(res *protocol.MetadataResult, asked bool) {
	if res.ErrorCode != 0 {
		if res.ErrorCode == kerr.RebootstrapRequired.Code && s.cfg.rebootstrap && !s.bootOnly {
			s.metaBusy = false
			s.rebootstrap("a broker answered metadata with REBOOTSTRAP_REQUIRED")
			s.metaWanted.Store(true) // at once: the bootstrap servers are asked next
			return
		}
		// Nothing in the answer is used; with metadata.recovery.strategy
		// none (or from the bootstrap servers themselves) it is a failed
		// request, retried after the backoff.
		s.metadataFailed(fmt.Errorf("metadata answer: %w", kerr.ErrorForCode(res.ErrorCode)))
		return
	}
	s.bootOnly = false
	now := time.Now()
	s.metaBusy = false
	s.metaNext = now.Add(s.cfg.metadataMaxAge)
	s.rescan = true // leaders and broker addresses may have changed
	changed := false
	for id, addr := range res.Brokers {
		n := s.node(id)
		if n.addr != addr {
			changed = true
			if n.conn != nil {
				s.connFailed(n, n.conn, errors.New("producer: broker address changed"))
			}
			if n.draining != nil && !s.cfg.regress.on(movedRenewalContinues) {
				// Another broker process: the connection that replaces
				// this one must not continue it as a SASL renewal would,
				// with windows the new one never announced (checkConn).
				s.connFailed(n, n.draining, errors.New("producer: broker address changed"))
			}
			n.addr = addr
		}
	}
	// again asks for another request after the backoff: only for what
	// records wait on. A topic or partition nothing waits for is asked
	// for at the periodic refresh only, until metadata.max.idle.ms drops
	// it, so a dead topic is not polled at the backoff's pace.
	again := false
	var leaders []leaderUpdate
	s.holdWindows = true // re-created topics reset their partitions' limits
	s.p.acc.locked(func(v accHeld) {
		leaders, again, changed = s.applyTopics(v, res, now, changed)
	})
	s.releaseWindows()
	// Applied outside acc.mu: a leader change reports
	// HookWindowChanged, and a hook may call InFlightLimit, Stats or
	// Produce, which take the lock (the sender deadlocked on itself).
	for _, u := range leaders {
		changed = s.updateLeader(u.ps, u.leader, u.epoch) || changed
	}
	switch {
	case again || (asked && !changed):
		s.metaFailures++
		s.metaRetryAt = now.Add(s.backoff(s.metaFailures))
		if again {
			s.metaWanted.Store(true)
		}
	case changed:
		s.metaFailures = 0
	}
}

// applyTopics is applyMetadata's part under the accumulator's lock: racks,
// topic errors, ids, partition counts (placing the records that waited
// for them) and the leaders to apply once the lock is released. changed
// comes in with what the broker list changed.
func (s *sender) applyTopics(v accHeld, res *protocol.MetadataResult, now time.Time, changed bool) (leaders []leaderUpdate, again, _ bool) {
	v.setRacks(res)
	for name, tm := range res.Topics {
		t := v.topic(name)
		if t == nil {
			continue
		}
		if tm.ErrorCode != 0 {
			err := kerr.ErrorForCode(tm.ErrorCode)
			changed = changed || !errors.Is(t.lastErr, err)
			t.lastErr = err
			waiting, _ := v.waiting(t)
			switch topicVerdict(tm.ErrorCode) {
			case metaFail:
				v.failWaiting(t, err)
			default:
				again = again || waiting > 0 || s.partitionsHold(v, t)
			}
			continue
		}
		if err := checkPartitions(tm.Partitions); err != nil && !s.cfg.regress.on(metadataUnchecked) &&
			!(s.cfg.regress.on(emptyPartitionsTaken) && len(tm.Partitions) == 0) {
			// A broker bug or a hostile answer: keep what we knew.
			s.p.log.Warn("ignoring unusable metadata for a topic", "topic", name, "err", err)
			again = true
			continue
		}
		changed = changed || t.lastErr != nil || t.parts == nil
		t.lastErr = nil
		count := int32(len(tm.Partitions))
		if t.id != tm.ID && t.id != ([16]byte{}) && tm.ID != ([16]byte{}) {
			s.topicRecreated(v, t, count)
			changed = true
		}
		t.id = tm.ID
		v.noteLeaders(t, tm.Partitions, res.Brokers)
		if count > int32(len(t.parts)) {
			s.addPartitions(v, t, count, now)
			changed = true
		}
		for _, pm := range tm.Partitions {
			leader, epoch := pm.Leader, max(pm.LeaderEpoch, -1)
			var ps *partitionState
			if int(pm.Partition) < len(t.parts) {
				ps = t.parts[pm.Partition]
			}
			wanted := ps != nil && s.holdsData(v, ps)
			if !partitionUsable(pm.ErrorCode) || leader < 0 {
				again = again || wanted
			} else if _, ok := res.Brokers[leader]; !ok {
				// A leader the broker list does not name cannot be
				// reached: ask again, with backoff.
				again = again || wanted
				leader, epoch = -1, -1
			}
			if ps != nil {
				leaders = append(leaders, leaderUpdate{ps, leader, epoch})
			}
		}
	}
	v.topics(func(t *topicState) {
		if n, _ := v.waiting(t); t.parts == nil && n > 0 {
			again = true
		}
	})
	return leaders, again, changed
}

// addPartitions grows t to count partitions from metadata: their sender
// halves here, their accumulator halves in the accumulator, which places
// the records that were waiting for them.
func (s *sender) addPartitions(v accHeld, t *topicState, count int32, now time.Time) {
	from := len(t.parts)
	for i := int32(from); i < count; i++ {
		ps := &partitionState{topic: t, id: i, admission: s.p.limiter.Partition(t.name, i)}
		ps.buf = &partBuf{ps: ps}
		t.parts = append(t.parts, ps)
	}
	v.addPartitions(t, t.parts[from:], now)
}

// partitionsHold reports whether any of t's partitions holds records.
func (s *sender) partitionsHold(v accHeld, t *topicState) bool {
	for _, ps := range t.parts {
		if s.holdsData(v, ps) {
			return true
		}
	}
	return false
}

// topicNeeded reports whether metadata requests should name t: records
// wait for it or are buffered or in flight, or it was produced to within
// metadata.max.idle.ms. An idle topic is left out (its state, sequence
// numbers included, is kept) so a mistyped or deleted topic is not polled
// for the producer's life.
func (s *sender) topicNeeded(v accHeld, t *topicState, now time.Time) bool {
	if n, _ := v.waiting(t); n > 0 || now.Sub(v.used(t)) < s.cfg.metadataMaxIdle || s.cfg.regress.on(pollIdleTopics) {
		return true
	}
	return s.partitionsHold(v, t)
}

// holdsData reports whether the partition has records open, queued,
// waiting for a retry or in flight.
func (s *sender) holdsData(v accHeld, ps *partitionState) bool {
	return v.holds(ps) || len(ps.retry) > 0 || len(ps.inflight) > 0
}

// checkPartitions rejects a topic's partition list unless it names each of
// 0..n-1 exactly once, as Kafka's does: an answer with a negative,
// duplicate or missing id must not size or index the partition table. An
// empty list is rejected too: a Kafka topic has a partition at least, and
// a table of none, taken for a re-created topic, had records placed
// modulo 0.
func checkPartitions(parts []protocol.PartitionMetadata) error {
	if len(parts) == 0 {
		return errors.New("no partitions")
	}
	seen := make([]bool, len(parts))
	for _, pm := range parts {
		if pm.Partition < 0 || int(pm.Partition) >= len(parts) {
			return fmt.Errorf("partition id %d outside 0..%d", pm.Partition, len(parts)-1)
		}
		if seen[pm.Partition] {
			return fmt.Errorf("partition id %d listed twice", pm.Partition)
		}
		seen[pm.Partition] = true
	}
	return nil
}

// leaderUpdate is a partition's leader as a Metadata answer named it,
// applied by applyMetadata once acc.mu is released.
type leaderUpdate struct {
	ps            *partitionState
	leader, epoch int32
}

// updateLeader records a partition's leader from metadata or a KIP-951
// hint, and reports whether anything changed. A partition moves to a new
// leader only once its batches in flight to the old one are done, so the
// two never hold its batches at once. An older leader epoch is stale,
// unless the partition's leader is a node without an address: an epoch
// must not pin a partition to a node the producer cannot reach.
func (s *sender) updateLeader(ps *partitionState, leader, epoch int32) bool {
	cur, curEpoch := ps.admission.Leader()
	if epoch >= 0 && curEpoch >= 0 && epoch < curEpoch && (s.reachable(cur) || s.cfg.regress.on(hintUnreachable)) {
		return false // stale metadata
	}
	if leader == cur && epoch == curEpoch {
		was := ps.hasPending
		ps.hasPending = false
		return was
	}
	if len(ps.inflight) > 0 {
		if ps.hasPending && ps.pendingLeader == leader && ps.pendingEpoch == epoch {
			return false
		}
		ps.pendingLeader, ps.pendingEpoch, ps.hasPending = leader, epoch, true
		return true
	}
	s.applyLeader(ps, leader, epoch)
	return true
}

// reachable reports whether node id has an address to dial.
func (s *sender) reachable(id int32) bool {
	n := s.nodes[id]
	return n != nil && n.addr != ""
}

func (s *sender) applyLeader(ps *partitionState, leader, epoch int32) {
	ps.hasPending = false
	// Resets the window to 5 and re-arms the first-batch gate.
	s.p.limiter.SetLeader(ps.admission, leader, epoch)
	s.p.leadersGen.Add(1)
	s.markReady(ps)
}

// maintainIdentity gets a producer id at start, and bumps the epoch once
// every batch in flight has come back after a sequence problem.
func (s *sender) maintainIdentity(now time.Time) time.Time {
	if s.txn != nil {
		return s.txn.maintain(now) // the transaction's coordinator gives the identity
	}
	if s.idBusy {
		return time.Time{}
	}
	if now.Before(s.idRetryAt) {
		return s.idRetryAt
	}
	switch {
	case !s.haveID:
		s.startInit(-1, -1)
	case s.needBump && !s.anyInflight() && !s.resolving():
		switch {
		case s.needNewID || s.epoch == math.MaxInt16:
			// An epoch cannot go past 32767: a new id starts again at 0.
			s.startInit(-1, -1)
		case s.canBumpLocally():
			// KIP-360 for a producer without a transactional id: it
			// raises its own epoch, as the Java client does, and brokers
			// accept the higher epoch from sequence 0. Asking
			// InitProducerId would cost a round trip for a new id: Kafka
			// answers it with one when there is no transactional id.
			s.initDone(s.pid, s.pid, s.epoch+1, 0)
		default:
			// No connection tells the broker's version yet: ask; brokers
			// without KIP-360 get asked for a new id (startInit).
			s.startInit(s.pid, s.epoch)
		}
	}
	return time.Time{}
}

// canBumpLocally reports whether the brokers support KIP-360 (InitProducerId
// v3+, Kafka 2.5): only they accept a producer raising its own epoch for an
// existing id. The control connection, or any broker connection, tells.
func (s *sender) canBumpLocally() bool {
	if s.cfg.regress.on(bumpOnOldBrokers) {
		return false // the old path: ask the broker for the bump
	}
	c := s.control
	if c == nil {
		for _, n := range s.byID {
			if n.conn != nil {
				c = n.conn
				break
			}
		}
	}
	if c == nil {
		return false
	}
	v, ok := c.Version(22)
	return ok && v >= 3
}

func (s *sender) startInit(pid int64, epoch int16) {
	s.idBusy = true
	s.runControl(func(ctx context.Context, c *protocol.Conn) (func(), error) {
		asked := pid
		if v, ok := c.Version(22); ok && v < 3 && pid >= 0 && !s.cfg.regress.on(bumpOnOldBrokers) {
			// Brokers before Kafka 2.5 (no KIP-360) cannot bump the epoch
			// of an existing id: a new id does the same job, every
			// partition's sequence starting again at 0.
			asked = -1
		}
		id, ep, code, err := protocol.InitProducerID(ctx, c, asked, epochFor(asked, epoch), s.cfg.requestTimeout)
		if err != nil {
			return nil, err
		}
		return func() { s.initDone(asked, id, ep, code) }, nil
	}, s.initFailed)
}

// epochFor is the epoch to send with producer id pid: -1 for a new id.
func epochFor(pid int64, epoch int16) int16 {
	if pid < 0 {
		return -1
	}
	return epoch
}

func (s *sender) initFailed(err error) {
	s.idBusy = false
	s.idFailures++
	s.idRetryAt = time.Now().Add(s.backoff(s.idFailures))
	s.lastIDErr = err
	s.p.log.Warn("InitProducerId failed", "err", err)
}

func (s *sender) initDone(askedPID, id int64, epoch int16, code int16) {
	if code != 0 {
		err := kerr.ErrorForCode(code)
		if askedPID >= 0 && !kerr.IsRetriable(err) {
			s.needNewID = true // the broker will not bump this id: take a new one
		}
		s.initFailed(err)
		return
	}
	if s.haveID && id == s.pid && epoch <= s.epoch && !s.cfg.regress.on(sameIdentityTaken) {
		// Not a new identity: the broker keeps our old batches' sequence
		// numbers under it, and the renumbered ones, from 0, would match
		// them as duplicates, acked and never written.
		s.needNewID = true
		s.initFailed(fmt.Errorf("producer: InitProducerId gave back producer id %d epoch %d, not newer than ours (epoch %d)", id, epoch, s.epoch))
		return
	}
	s.idBusy = false
	s.idFailures = 0
	s.lastIDErr = nil
	bump := s.haveID
	s.cfg.hooks.producerID(s.pid, s.epoch, id, epoch)
	s.pid, s.epoch, s.haveID = id, epoch, true
	s.idPub.Store(id<<16 | int64(uint16(epoch)))
	if bump {
		s.renumber()
		s.bumps.Add(1)
		s.p.log.Info("producer epoch bumped; unacknowledged batches renumbered", "producer_id", id, "epoch", epoch)
	}
	s.needBump, s.needNewID = false, false
	s.p.limiter.ResetAll()
}

// renumber gives every unacknowledged batch, partition by partition, new
// sequence numbers from 0 under the new epoch. Nothing is in flight, and no
// waiting batch may be in the log (resolving). A waiting batch older than
// one the broker acknowledged, or one that failed and may be in the log,
// fails with ErrOrderLost instead: written now, it would (or could) land
// after its successors.
func (s *sender) renumber() {
	s.p.acc.locked(func(v accHeld) { v.topics(s.renumberTopic) })
}

// renumberTopic is renumber for one topic's partitions.
func (s *sender) renumberTopic(t *topicState) {
	for _, ps := range t.parts {
		for i := 0; i < len(ps.retry); {
			b := ps.retry[i]
			if s.matrix.OrderLost(judge.OrderFacts{AtBump: true, LaterAcked: b.ord < ps.ackedUpTo, LaterInDoubt: b.ord < ps.doubtUpTo, MaybeWritten: b.maybeWritten}) {
				s.failBatch(b, fmt.Errorf("%w (last error: %w)", ErrOrderLost, b.lastErr), b.maybeWritten)
				continue
			}
			i++
		}
		seq := int32(0)
		for _, b := range ps.retry {
			// A fresh position: the batch goes out as a new one
			// under the new epoch (its old one may have been parked).
			s.p.limiter.Abandon(ps.admission, b.ord)
			b.ord = ps.nextOrd
			ps.nextOrd++
			b.parked = false
			// A copy: a dead connection's writer may still hold the
			// old bytes.
			b.bytes = append([]byte(nil), b.bytes...)
			if err := protocol.SetBatchSequence(b.bytes, s.pid, s.epoch, seq); err != nil {
				panic("producer: renumbering a batch we built: " + err.Error())
			}
			b.seq = seq
			seq = addSeq(seq, len(b.records))
		}
		ps.nextSeq = seq
	}
}
