package producer

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/longhaul-kafka/longhaul/producer/internal/judge"
	"github.com/longhaul-kafka/longhaul/protocol"
)

// This file is the transaction manager's driver (DESIGN.md,
// "Transactions"): it runs on the sender goroutine and feeds txnCore the
// application's calls (posted as events), the sender's batch events and
// the coordinators' answers, sends the one transactional request the core
// asks for, and applies what the core decides (sequences restarting, the
// gate, calls completed). The core decides; the driver does the I/O.

// txnCall is an application call waiting for the core: err is written
// before done is closed.
type txnCall struct {
	done chan struct{}
	err  error
}

func newTxnCall() *txnCall { return &txnCall{done: make(chan struct{})} }

func (c *txnCall) finish(err error) {
	select {
	case <-c.done:
		return // completed already
	default:
	}
	c.err = err
	close(c.done)
}

func (c *txnCall) finished() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// txnMirror is what Produce and the application calls read of the
// transaction under acc.mu, so that Produce needs no round trip to
// the sender goroutine.
type txnMirror struct {
	// open: BeginTransaction returned and neither Commit nor Abort was
	// called since; Produce is accepted only then.
	open bool
	// failed is the transaction's error once it can only be aborted (or
	// the producer is fenced or failed): Produce fails with it. The sender
	// stores it the moment a record's failure makes the transaction
	// abort-only, before the record's callback is queued, without acc.mu
	// (a batch may complete with acc.mu held), so a call made from or
	// after that callback already sees the transaction abort-only.
	failed atomic.Pointer[txnFailure]
	// end is the last transaction's CommitTransaction or
	// AbortTransaction, kept so that calling it again (after its ctx
	// ended) waits for the same outcome.
	end *txnEnd
}

// txnFailure boxes the error of txnMirror.failed.
type txnFailure struct{ err error }

// failure is the transaction's error once it can only be aborted (or the
// producer is fenced or failed), nil before. Called with acc.mu held.
func (m *txnMirror) failure() error {
	if f := m.failed.Load(); f != nil {
		return f.err
	}
	return nil
}

// txnEnd is a CommitTransaction or AbortTransaction in progress or done.
type txnEnd struct {
	commit bool
	call   *txnCall
	// observed: a call returned its outcome; another call is a new one.
	observed bool
}

// txnDriver runs the transactional producer's protocol on the sender
// goroutine; every field is owned by it.
type txnDriver struct {
	s    *sender
	core *txnCore

	coordAddr string
	coordConn *protocol.Conn // the transaction coordinator, nil until dialed
	groupAddr string
	groupConn *protocol.Conn // to groupAddr, the last group coordinator a TxnOffsetCommit went to

	busy    bool      // a transactional request is in flight
	retryAt time.Time // the core asked for a backoff until then

	initCalls   []*txnCall
	offsetCalls []*txnCall // in call order, as the core completes them
	endCall     *txnCall   // the commit or abort the core works on

	// outs are outcomes of batch events, which happen where acc.mu
	// may be held: applied by settle, outside it.
	outs []txnOutcome
	// dropped: the unsent records were failed since the transaction
	// became abort-only (or the producer fenced or failed).
	dropped bool
}

func newTxnDriver(s *sender) *txnDriver {
	cfg := s.cfg
	// The core re-arms the gate at every version 2 bump; the driver
	// decides per partition, from its leader's Produce version
	// (rearmGateAtTxnBump).
	return &txnDriver{s: s, core: newTxnCore(cfg.transactionalID, cfg.txnTimeout.Milliseconds(), true, true)}
}

// txnTP names a partition for the core.
func txnTP(ps *partitionState) protocol.TopicPartition {
	return protocol.TopicPartition{Topic: ps.topic.name, Partition: ps.id}
}

// --- the sender's batch events -------------------------------------------

// queued records that the sender took these sealed batches of ps (takeSealed).
// Called with acc.mu held.
func (d *txnDriver) queued(ps *partitionState, bs []*batch) {
	n := 0
	for _, b := range bs {
		n += len(b.records)
	}
	if n == 0 {
		return
	}
	d.core.batchQueued(txnTP(ps), n)
	d.s.p.wakeSender() // version 1: the partition must be added first
}

// maySend reports whether ps's next new batch may be sent now.
func (d *txnDriver) maySend(ps *partitionState) bool {
	return d.core.maySend(txnTP(ps))
}

// sent records that b, new, goes out for the first time.
func (d *txnDriver) sent(ps *partitionState, b *batch) {
	if err := d.core.batchSent(txnTP(ps), len(b.records)); err != nil {
		d.s.p.log.Error("transactional batch sent out of turn", "err", err)
	}
}

// done records that b's outcome is final (err nil: written). May run with
// acc.mu held.
func (d *txnDriver) done(b *batch, err error) {
	tp := txnTP(b.part)
	if d.s.cfg.regress.on(txnCommitAfterFailed) {
		err = nil
	}
	if err != nil {
		d.s.p.log.Debug("transactional batch failed", "topic", tp.Topic, "partition", tp.Partition, "seq", b.seq, "attempts", b.attempts, "err", err)
	}
	var out txnOutcome
	var cerr error
	if b.attempts > 0 {
		out, cerr = d.core.batchAnswered(tp, len(b.records), err)
	} else {
		out, cerr = d.core.unsentFailed(tp, len(b.records), err)
	}
	if cerr != nil {
		d.s.p.log.Error("transactional batch accounting", "err", cerr)
	}
	d.publishFailure()
	d.outs = append(d.outs, out)
	d.s.p.wakeSender()
}

// withdrawn records that n records of a queued batch of ps were withdrawn (a
// ProduceSync whose ctx ended) and failed with cause.
func (d *txnDriver) withdrawn(ps *partitionState, n int, cause error) {
	out, err := d.core.unsentFailed(txnTP(ps), n, cause)
	if err != nil {
		d.s.p.log.Error("transactional batch accounting", "err", err)
	}
	d.publishFailure()
	d.outs = append(d.outs, out)
	d.s.p.wakeSender()
}

// failedUncounted makes the open transaction abort-only for records that
// failed before the core counted them (waiting for their topic's
// partitions: Purge).
func (d *txnDriver) failedUncounted(cause error) {
	d.outs = append(d.outs, d.core.fail(&txnError{class: ErrTransactionAbortable, msg: "records failed before they were queued", cause: cause}))
	d.publishFailure()
	d.s.p.wakeSender()
}

// publishFailure shows Produce, BeginTransaction and
// SendOffsetsToTransaction at once that the core can only abort (or is
// fenced or failed), without acc.mu (txnMirror.failed).
func (d *txnDriver) publishFailure() {
	switch c := d.core; c.state {
	case txnAbortableError, txnFenced, txnFatalError:
		d.s.p.acc.txn.failed.Store(&txnFailure{c.err})
	}
}

// noRecovery turns the idempotent recovery a verdict asks for into a
// failed record: inside a transaction there is no epoch bump, renumbering
// or rewind (under version 1 a bump would abort the open transaction at
// the coordinator while the producer went on). The failed record makes
// the transaction abort-only; its abort bumps the epoch.
//
// A transaction that can only be aborted sends nothing again: a batch
// the verdict would retry or split fails instead, with drainCause.
func (d *txnDriver) noRecovery(v judge.Verdict, cause error) (judge.Verdict, error) {
	if d.abortOnly() && (v.Act == judge.ActRetry || v.Act == judge.ActSplit) && !d.s.cfg.regress.on(txnSendsAbortOnly) {
		v.Act = judge.ActFail
		cause = d.drainCause(cause)
	}
	if d.s.cfg.regress.on(txnRecovers) {
		return v, cause
	}
	if v.Bump || v.NewID {
		v.Bump, v.NewID = false, false
		if v.Act == judge.ActRetry {
			v.Act = judge.ActFail
		}
	}
	v.Rewind = false
	return v, cause
}

// abortOnly reports whether the transaction can only end in an abort (or
// the producer is fenced or failed): nothing of it is sent from then on.
func (d *txnDriver) abortOnly() bool {
	switch d.core.state {
	case txnAbortableError, txnAborting, txnFenced, txnFatalError:
		return true
	}
	return false
}

// drainCause is the error of a sent batch that an abort-only transaction
// fails instead of sending it again: the transaction's error (an abort
// without one: ErrTransactionAborted), and own, the batch's last error,
// if any.
func (d *txnDriver) drainCause(own error) error {
	err := d.core.err
	if err == nil {
		err = &txnError{class: ErrTransactionAborted, msg: "AbortTransaction dropped the record before it was sent again"}
	}
	if own == nil {
		return err
	}
	return fmt.Errorf("%w (last error: %w)", err, own)
}

// produceVersionCap is the highest Produce version the open transaction
// may use (0: any).
func (d *txnDriver) produceVersionCap() int16 {
	if d.core.tv == 1 && !d.s.cfg.regress.on(txnTV1Uncapped) {
		return protocol.MaxTV1ProduceVersion
	}
	return 0
}

// --- the application's calls (events on the sender goroutine) -----------

// errTxnNeedInit is what begin answers when it finds the producer uninitialized.
var errTxnNeedInit = errors.New("producer: transactions not initialized")

func (d *txnDriver) init(call *txnCall) {
	c := d.core
	switch c.state {
	case txnUninitialized:
		if err := c.initTransactions(); err != nil {
			call.finish(err)
			return
		}
		d.initCalls = append(d.initCalls, call)
	case txnInitializing:
		d.initCalls = append(d.initCalls, call) // a call again after its ctx ended
	case txnFenced, txnFatalError:
		call.finish(c.err)
	default:
		call.finish(nil) // initialized already
	}
	d.s.p.wakeSender()
}

// begin opens a transaction, of the version the brokers offer now, and
// opens Produce.
func (d *txnDriver) begin() error {
	c := d.core
	if c.state == txnUninitialized {
		return errTxnNeedInit
	}
	tv := d.pickTV()
	if tv == 0 && c.state == txnReady {
		return &txnError{class: ErrTransactionFatal, msg: "the brokers do not offer the transactional requests (Kafka 0.11+)"}
	}
	if err := c.begin(tv); err != nil {
		return err
	}
	d.s.p.acc.transaction(func(m *txnMirror) bool {
		m.open, m.end = true, nil // Produce is accepted from now on
		m.failed.Store(nil)
		return false
	})
	d.dropped = false
	d.s.rescan = true
	return nil
}

// pickTV is the transaction version the connection with the newest
// finalized features offers: 2 or 1 (0 if none can run transactions).
func (d *txnDriver) pickTV() int {
	s := d.s
	var best *protocol.Conn
	consider := func(c *protocol.Conn) {
		if c != nil && (best == nil || c.FinalizedFeaturesEpoch() > best.FinalizedFeaturesEpoch()) {
			best = c
		}
	}
	consider(d.coordConn)
	consider(s.control)
	for _, n := range s.byID {
		consider(n.conn)
	}
	if best == nil {
		return max(d.core.lastTV, 1)
	}
	return protocol.TxnVersion(best)
}

func (d *txnDriver) sendOffsets(call *txnCall, g protocol.GroupMetadata, offsets []protocol.TxnOffset) {
	if err := d.core.sendOffsets(g, offsets); err != nil {
		call.finish(err)
		return
	}
	d.offsetCalls = append(d.offsetCalls, call)
	d.s.p.wakeSender()
}

// commit runs once every record produced in the transaction has been
// called back (CommitTransaction flushed first): EndTxn(commit) goes as
// soon as the offsets are sent.
func (d *txnDriver) commit(call *txnCall) {
	if err := d.core.commit(); err != nil {
		call.finish(err)
		return
	}
	d.endCall = call
	d.s.p.wakeSender()
}

// abort drops what is not sent yet and waits for what is, then
// EndTxn(abort).
func (d *txnDriver) abort(call *txnCall) {
	out, err := d.core.abort()
	if err != nil {
		call.finish(err)
		return
	}
	d.endCall = call
	d.take(out)
	d.dropUnsent(&txnError{class: ErrTransactionAborted, msg: "AbortTransaction dropped the record before it was sent"})
	d.s.p.wakeSender()
}

// dropUnsent fails every record of the producer not sent yet with cause:
// records waiting for metadata, open, sealed and queued batches; and the
// sent batches waiting to be sent again (retries, the halves of a split),
// with drainCause. Batches in flight are left to be answered. Callbacks
// keep their order within a partition (finish).
func (d *txnDriver) dropUnsent(cause error) {
	s := d.s
	s.p.acc.locked(func(v accHeld) {
		v.topics(func(t *topicState) {
			v.dropWaiting(t, func(*waitingRecord) error {
				return &DeliveryError{Topic: t.name, Partition: -1, BaseSequence: -1, Err: cause}
			})
			for _, ps := range t.parts {
				for len(ps.retry) > 0 && !s.cfg.regress.on(txnSendsAbortOnly) {
					b := ps.retry[0]
					s.failBatch(b, d.drainCause(b.lastErr), b.maybeWritten)
				}
				s.takeUnsent(v, ps)
				for len(ps.queue) > 0 {
					s.failBatch(s.popQueue(ps), cause, false)
				}
			}
		})
	})
}

// --- the loop ----------------------------------------------------------------

// maintain applies pending outcomes and sends the core's next request; it
// replaces the idempotent producer's maintainIdentity. It returns when
// it next needs to look (a backoff).
func (d *txnDriver) maintain(now time.Time) time.Time {
	d.settle()
	if d.busy || d.s.stopping {
		return time.Time{}
	}
	if now.Before(d.retryAt) {
		return d.retryAt
	}
	if s := d.s; s.cfg.regress.on(txnRecovers) && s.needBump && !s.anyInflight() && !s.resolving() && !d.core.needBump {
		// The bug: the idempotent epoch bump inside the transaction, an
		// InitProducerId with the current id and epoch.
		d.core.needBump = true
	}
	if d.s.cfg.regress.on(txnEndEarly) && d.core.inflight == txnReqNone &&
		(d.core.state == txnCommitting || d.core.state == txnAborting) && len(d.core.offsets) == 0 && !d.core.needCoordinator {
		// The bug: EndTxn without waiting for the records.
		for _, p := range d.core.parts {
			p.queued, p.inflight = 0, 0
		}
	}
	req, out := d.core.next()
	d.take(out)
	d.settle()
	if req.kind != txnReqNone {
		d.send(req)
	}
	return time.Time{}
}

// settle applies the outcomes batch events left, and what a state the
// core entered asks: abort-only, fenced or failed fails what is not sent
// (Java aborts the undrained batches too) and what waits to be sent
// again (dropUnsent), and Produce fails with the transaction's error from
// then on.
func (d *txnDriver) settle() {
	for i, out := range d.outs {
		d.take(out)
		d.outs[i] = txnOutcome{}
	}
	d.outs = d.outs[:0]
	c := d.core
	switch c.state {
	case txnAbortableError, txnFenced, txnFatalError:
		d.publishFailure() // Produce refuses with the error the core holds now
		if !d.dropped {
			d.dropped = true
			d.dropUnsent(c.err)
			for i, out := range d.outs {
				d.take(out)
				d.outs[i] = txnOutcome{}
			}
			d.outs = d.outs[:0]
		}
	}
	if c.state == txnFenced || c.state == txnFatalError {
		d.failCalls(c.err)
	}
}

// failCalls ends every waiting call with err (a terminal state).
func (d *txnDriver) failCalls(err error) {
	for _, call := range d.initCalls {
		call.finish(err)
	}
	d.initCalls = nil
	for _, call := range d.offsetCalls {
		call.finish(err)
	}
	d.offsetCalls = nil
	if d.endCall != nil {
		d.endCall.finish(err)
		d.endCall = nil
	}
}

// take applies an outcome: a backoff, and the calls it completed.
func (d *txnDriver) take(out txnOutcome) {
	s := d.s
	if out.backoff {
		d.retryAt = time.Now().Add(s.backoff(out.attempt))
	}
	for _, dn := range out.done {
		switch dn.op {
		case txnOpInit:
			for _, call := range d.initCalls {
				call.finish(dn.err)
			}
			d.initCalls = nil
		case txnOpSendOffsets:
			if len(d.offsetCalls) > 0 {
				d.offsetCalls[0].finish(dn.err)
				d.offsetCalls = d.offsetCalls[1:]
			}
		case txnOpCommit, txnOpAbort:
			// Counted before the call is released: a Stats read once
			// CommitTransaction or AbortTransaction returned counts it.
			s.txnEnded(dn.op == txnOpCommit, dn.err)
			if d.endCall != nil {
				d.endCall.finish(dn.err)
				d.endCall = nil
			}
		}
	}
	if len(out.done) > 0 || out.renumber {
		s.rescan = true // what may be sent changed
	}
}

// identity takes the core's producer id and epoch for the batches. Under
// an InitProducerId answer (init, or the bump after a version 1 abort)
// every window and gate resets, as for an idempotent producer's new id;
// under a version 2 EndTxn they stay, and only the gates of partitions
// whose leader is older than Kafka 4.1 re-arm (rearmGateAtTxnBump): sequences
// restart at 0 either way. Nothing is in flight or queued then: the core
// asks for a new identity only once every record is answered.
func (d *txnDriver) identity(fromInit bool, rearm bool) {
	s := d.s
	c := d.core
	s.cfg.hooks.producerID(s.pid, s.epoch, c.id, c.epoch)
	s.pid, s.epoch, s.haveID = c.id, c.epoch, true
	s.idPub.Store(c.id<<16 | int64(uint16(c.epoch)))
	p := s.p
	renumbered := false
	if s.needBump && s.cfg.regress.on(txnRecovers) {
		s.needBump, renumbered = false, true
		s.renumber() // the bug's renumbering of what waits for retry
	}
	var rearmed []*partitionState
	p.acc.locked(func(v accHeld) {
		v.topics(func(t *topicState) {
			for _, ps := range t.parts {
				if !renumbered {
					ps.nextSeq = 0
				}
				if !fromInit && rearm && d.rearmGate(ps) {
					rearmed = append(rearmed, ps)
				}
			}
		})
	})
	if fromInit {
		p.limiter.ResetAll()
	}
	s.resetWhy = WindowBump
	for _, ps := range rearmed {
		// The gate's first batch goes alone; its answer brings the
		// window again (KIP-1269 announces it in every answer).
		p.limiter.Reset(ps.admission)
	}
	s.resetWhy = WindowIdle
	s.rescan = true
}

// rearmGate reports whether ps's gate re-arms at a version 2 bump: its
// leader's connection negotiated Produce below v13 (Kafka 4.0), or there is
// no connection to tell.
func (d *txnDriver) rearmGate(ps *partitionState) bool {
	if d.s.cfg.regress.on(txnGateNeverRearmed) {
		return false
	}
	n := d.s.nodes[ps.leader()]
	if n == nil || n.conn == nil {
		return true
	}
	v, ok := n.conn.Version(0)
	return !ok || rearmGateAtTxnBump(v)
}

// --- requests -----------------------------------------------------------------

// send sends req on the connection it needs: FindCoordinator on the
// control connection, the coordinator's requests on a connection to it.
func (d *txnDriver) send(req txnRequest) {
	d.busy = true
	s := d.s
	s.p.log.Debug("transactional request", "api", req.kind.api(), "producer_id", req.producer.ProducerID, "epoch", req.producer.Epoch,
		"key", req.key, "commit", req.commit, "partitions", len(req.partitions), "coordinator", d.coordAddr)
	switch req.kind {
	case txnReqFindCoordinator:
		s.runControl(func(ctx context.Context, c *protocol.Conn) (func(), error) {
			res, err := protocol.FindCoordinator(ctx, c, req.keyType, req.key)
			if err != nil {
				return nil, err
			}
			return func() { d.onCoordinator(req, res) }, nil
		}, func(err error) { d.failed(req.kind, err) })
	case txnReqInitProducerID:
		timeout := time.Duration(req.timeoutMs) * time.Millisecond
		d.run(false, req.kind, func(ctx context.Context, c *protocol.Conn) (func(), error) {
			res, err := protocol.InitTransactionalID(ctx, c, req.producer.TransactionalID, timeout, req.producer.ProducerID, req.producer.Epoch)
			if err != nil {
				return nil, err
			}
			return func() {
				d.logAnswer(req.kind, res.ErrorCode, "producer_id", res.ProducerID, "epoch", res.Epoch)
				out, err := d.core.onInit(res)
				d.answered(out, err, func() { d.identity(true, true) })
			}, nil
		})
	case txnReqAddPartitions:
		d.run(false, req.kind, func(ctx context.Context, c *protocol.Conn) (func(), error) {
			res, err := protocol.AddPartitionsToTxn(ctx, c, req.producer, req.partitions)
			if err != nil {
				return nil, err
			}
			return func() {
				code := int16(0)
				for _, r := range res {
					if r.ErrorCode != 0 {
						code = r.ErrorCode
						break
					}
				}
				d.logAnswer(req.kind, code)
				d.answered(d.core.onAddPartitions(res))
			}, nil
		})
	case txnReqAddOffsets:
		d.run(false, req.kind, func(ctx context.Context, c *protocol.Conn) (func(), error) {
			code, err := protocol.AddOffsetsToTxn(ctx, c, req.producer, req.group.GroupID)
			if err != nil {
				return nil, err
			}
			return func() {
				d.logAnswer(req.kind, code)
				d.answered(d.core.onAddOffsets(code))
			}, nil
		})
	case txnReqTxnOffsetCommit:
		// The core keeps each group's coordinator; the connection is to
		// the last one used.
		if addr := d.core.groupCoordinator(req.group.GroupID); addr != d.groupAddr {
			if d.groupConn != nil {
				d.groupConn.Close()
				d.groupConn = nil
			}
			d.groupAddr = addr
		}
		d.run(true, req.kind, func(ctx context.Context, c *protocol.Conn) (func(), error) {
			res, err := protocol.TxnOffsetCommit(ctx, c, req.producer, req.group, req.offsets, req.tv)
			if err != nil {
				return nil, err
			}
			return func() { d.answered(d.core.onTxnOffsetCommit(res)) }, nil
		})
	case txnReqEndTxn:
		d.run(false, req.kind, func(ctx context.Context, c *protocol.Conn) (func(), error) {
			res, err := protocol.EndTxn(ctx, c, req.producer, req.commit, req.tv)
			if err != nil {
				return nil, err
			}
			return func() {
				d.logAnswer(req.kind, res.ErrorCode, "producer_id", res.ProducerID, "epoch", res.Epoch)
				tv := d.core.tv
				out, err := d.core.onEndTxn(res)
				d.answered(out, err, func() { d.identity(false, tv == 2) })
			}, nil
		})
	}
}

// logAnswer logs a coordinator's answer at debug level, with its error
// code's error when there is one.
func (d *txnDriver) logAnswer(kind txnReqKind, code int16, attrs ...any) {
	if code != 0 {
		attrs = append(attrs, "err", kerr.ErrorForCode(code))
	}
	d.s.p.log.Debug("transactional answer", append([]any{"api", kind.api()}, attrs...)...)
}

// answered applies the core's outcome of an answer; onRenumber runs when
// the core took a new producer id or epoch.
func (d *txnDriver) answered(out txnOutcome, err error, onRenumber ...func()) {
	d.busy = false
	if err != nil {
		d.s.p.log.Error("transaction state machine", "err", err)
	}
	if out.renumber {
		for _, f := range onRenumber {
			f()
		}
	}
	d.take(out)
	d.settle()
	d.s.rescan = true
}

// failed applies that the request got no answer (connection lost, timeout, a request
// the connection cannot send).
func (d *txnDriver) failed(kind txnReqKind, err error) {
	d.s.p.log.Warn("transactional request failed", "err", err)
	out, cerr := d.core.transportFailed(kind, !protocol.SafeToRetry(err))
	d.answered(out, cerr)
}

func (d *txnDriver) onCoordinator(req txnRequest, res protocol.CoordinatorResult) {
	if res.ErrorCode == 0 && req.keyType == protocol.CoordinatorTransaction {
		if res.Addr != d.coordAddr && d.coordConn != nil {
			d.coordConn.Close()
			d.coordConn = nil
		}
		d.coordAddr = res.Addr
	}
	d.answered(d.core.onCoordinator(res))
}

// run sends op on the transaction coordinator's connection (group false)
// or the group coordinator's, dialing it first if needed, in the
// background; the continuation op returns runs on the sender goroutine.
func (d *txnDriver) run(group bool, kind txnReqKind, op func(ctx context.Context, c *protocol.Conn) (func(), error)) {
	s := d.s
	addr, c := d.coordAddr, d.coordConn
	if group {
		addr, c = d.groupAddr, d.groupConn
	}
	cfg := s.dialConfig()
	timeout := s.cfg.requestTimeout
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		var err error
		if c == nil {
			dctx, cancel := context.WithTimeout(s.ctx, timeout)
			c, err = protocol.Dial(dctx, addr, cfg)
			cancel()
		}
		var then func()
		if err == nil {
			ctx, cancel := context.WithTimeout(s.ctx, timeout)
			then, err = op(ctx, c)
			cancel()
		}
		s.p.post(func() {
			cur := &d.coordConn
			if group {
				cur = &d.groupConn
			}
			if s.stopping {
				if c != nil && c != *cur {
					c.Close()
				}
				return
			}
			if err != nil {
				if c != nil {
					c.Close()
				}
				if *cur == c {
					*cur = nil
				}
				d.failed(kind, err)
				return
			}
			if *cur != c {
				if *cur != nil {
					(*cur).Close()
				}
				*cur = c
			}
			if !group {
				if v, ok := c.Version(22); ok {
					// UNKNOWN_PRODUCER_ID is abortable when the coordinator can
					// bump the epoch (judgeTxn).
					d.core.canBump = v >= 3
				}
			}
			then()
		})
	}()
}

// shutdown closes the coordinators' connections and fails the calls still
// waiting with ErrClosed. It runs in the sender's shutdown, after the
// background requests have ended.
func (d *txnDriver) shutdown() {
	for _, c := range []*protocol.Conn{d.coordConn, d.groupConn} {
		if c != nil {
			c.Close()
		}
	}
	d.coordConn, d.groupConn = nil, nil
	d.failCalls(fmt.Errorf("producer: transaction: %w", ErrClosed))
}
