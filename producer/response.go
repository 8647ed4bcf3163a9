package producer

import (
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/longhaul-kafka/longhaul/inflight"
	"github.com/longhaul-kafka/longhaul/producer/internal/judge"
	"github.com/longhaul-kafka/longhaul/protocol"
)

// handleProduce applies one ProduceRequest's outcome: every batch is acked,
// put back for retry, or failed, and every ticket is completed once.
func (s *sender) handleProduce(sr *sentRequest) {
	err := sr.err
	now := time.Now()
	defer func() {
		s.p.limiter.Finish(&sr.ir)
		s.requestDone(sr, now)
		s.applyPendingLeaders()
		s.unblock(sr.node) // a request slot on the node is free
		s.freeRequest(sr)
	}()
	// A batch may be recycled once completed: note its partition first.
	for _, b := range sr.batches {
		s.touched = append(s.touched, b.part)
	}
	if err != nil {
		s.connFailed(sr.node, sr.conn, err)
		code := judge.CodeUnsent
		if !protocol.SafeToRetry(err) {
			code = judge.CodeLost
		}
		for i, b := range sr.batches {
			s.p.limiter.Complete(sr.ir.Tickets[i], inflight.Outcome{})
			s.removeInflight(b)
			s.batchRejected(b, s.judge(b, code), err, noHint, now)
		}
		return
	}
	if n := sr.node; sr.conn == n.conn {
		rt := now.Sub(sr.sentAt)
		n.rtLast = rt
		if n.rtMin == 0 || rt < n.rtMin {
			n.rtMin = max(rt, time.Nanosecond)
		}
	}
	s.cfg.hooks.throttled(sr.node.id, sr.res.Throttle)
	s.learnEndpoints(sr.res.NodeEndpoints)
	s.throttled(sr, sr.res.Throttle, now)
	for i, b := range sr.batches {
		rp := &sr.res.Partitions[i] // the answer for b: Produce keeps the order of the Adds
		if !rp.Answered {
			// A response that leaves out a partition we sent is a broker
			// bug; we cannot know what happened, so treat it as lost.
			s.p.limiter.Complete(sr.ir.Tickets[i], inflight.Outcome{})
			s.removeInflight(b)
			s.batchRejected(b, s.judge(b, judge.CodeLost), errMissingPartition, noHint, now)
			continue
		}
		if rp.WindowErr != nil {
			s.p.log.Warn("malformed ProducerStateBatchesToRetain; using 5", "topic", b.part.topic.name, "partition", b.part.id, "err", rp.WindowErr)
		}
		out := inflight.Outcome{Window: rp.Window, WindowPresent: rp.WindowPresent}
		s.removeInflight(b)
		v := s.judge(b, rp.ErrorCode)
		if v.Act == judge.ActAck {
			out.Acked = true
			s.p.limiter.Complete(sr.ir.Tickets[i], out)
			offset := rp.BaseOffset
			if v.OffsetUnknown {
				offset = -1
			}
			s.cfg.hooks.batchAcked(s, sr.node.id, b, offset)
			s.batchAcked(b, offset, now)
			continue
		}
		s.p.limiter.Complete(sr.ir.Tickets[i], out)
		cause := kerr.ErrorForCode(rp.ErrorCode)
		if rp.ErrorMessage != "" {
			cause = &brokerError{err: cause, msg: rp.ErrorMessage}
		}
		s.batchRejected(b, v, cause, currentLeader{rp.LeaderID, rp.LeaderEpoch}, now)
	}
}

// applyPendingLeaders moves the partitions of the request just handled to
// the leader that metadata named while their batches were in flight, once
// none are: a partition never has batches at two leaders. It runs once the
// whole response is handled, the one place a pending leader is applied
// besides updateLeader itself (nothing in flight). Every touched partition
// goes into the ready set: its window, retries or leader changed.
func (s *sender) applyPendingLeaders() {
	for i, ps := range s.touched {
		if ps.hasPending && len(ps.inflight) == 0 {
			s.applyLeader(ps, ps.pendingLeader, ps.pendingEpoch)
		}
		s.markReady(ps)
		s.touched[i] = nil
	}
	s.touched = s.touched[:0]
}

// requestDone counts sr's completion in its node's figures and reports it
// to the hooks, once its slot is free.
func (s *sender) requestDone(sr *sentRequest, now time.Time) {
	n := sr.node
	latency := now.Sub(sr.sentAt)
	n.stats.requests.Add(1)
	n.stats.requestNanos.Add(int64(latency))
	s.cfg.hooks.requestDone(s, n, latency, sr.err)
}

var errMissingPartition = errors.New("producer: broker response left out the partition")

// currentLeader is KIP-951's CurrentLeader from a partition's answer: the
// leader the broker names, -1 for none.
type currentLeader struct{ id, epoch int32 }

// noHint is an outcome without an answer to take a hint from.
var noHint = currentLeader{-1, -1}

// judge classifies the outcome code (a broker's, or a pseudo-code) of b's
// attempt by the sender's error matrix; b has already left ps.inflight.
func (s *sender) judge(b *batch, code int16) judge.Verdict {
	return s.matrix.Judge(code, s.facts(b))
}

// facts gathers what judge needs to know about b.
func (s *sender) facts(b *batch) judge.Facts {
	ps := b.part
	f := judge.Facts{
		MaybeWritten: b.maybeWritten,
		LaterAcked:   ps.ackedUpTo > b.ord+1,
		NewestSeq:    ps.nextOrd == b.ord+1,
		SplitPending: b.split,
		Resolving:    s.needBump,
		Records:      len(b.records),
	}
	for _, x := range ps.inflight {
		if x.ord < b.ord {
			f.EarlierUnacked = true
		}
	}
	for _, x := range ps.retry {
		if x.ord < b.ord {
			f.EarlierUnacked = true
			if !x.maybeWritten {
				f.EarlierRefused = true
			}
		}
	}
	return f
}

// batchRejected applies judge's verdict v for a batch whose attempt did
// not end in an acknowledgement. b has already left ps.inflight.
func (s *sender) batchRejected(b *batch, v judge.Verdict, cause error, hint currentLeader, now time.Time) {
	ps := b.part
	if ps.gone {
		// The partition vanished with its topic: nowhere to retry.
		s.failBatch(b, ps.goneErr, v.MaybeWritten)
		return
	}
	if s.txn != nil {
		v, cause = s.txn.noRecovery(v, cause)
	}
	s.cfg.hooks.batchRejected(s, -1, b, cause, v.Act == judge.ActRetry || v.Act == judge.ActSplit)
	if tooLargeAnswer(cause) && len(b.bytes) > 0 {
		ps.topic.limit.refusedBatch(int64(len(b.bytes)), int64(now.Sub(s.base)), s.cfg.metadataMaxAge)
	}
	b.maybeWritten = v.MaybeWritten
	// Never split once an attempt sent whole may be in the log
	// (judge.KeepSplitRule).
	b.split = v.KeepSplit
	if v.RefreshMetadata {
		s.leaderHint(b, hint.id, hint.epoch) // KIP-951
		s.wantMetadata()
	}
	if v.Bump {
		s.needBump = true
	}
	if v.NewID {
		s.needNewID = true
	}
	switch v.Act {
	case judge.ActRetry:
		s.retryBatch(b, cause, now)
	case judge.ActSplit:
		b.split = true
		s.retryBatch(b, cause, now)
	case judge.ActOrderLost:
		s.failBatch(b, fmt.Errorf("%w (last error: %w)", ErrOrderLost, cause), false)
	case judge.ActFail:
		if v.Rewind {
			// b was the newest batch with a sequence and is not in the
			// log: the next batch takes its sequence numbers.
			ps.nextSeq = b.seq
		}
		s.failBatch(b, cause, b.maybeWritten)
	}
}

// brokerError keeps the kerr error for errors.Is and adds the broker's text.
type brokerError struct {
	err error
	msg string
}

func (e *brokerError) Error() string { return e.err.Error() + ": " + e.msg }
func (e *brokerError) Unwrap() error { return e.err }

// batchAcked reports success for every record of b. b has already left
// ps.inflight.
func (s *sender) batchAcked(b *batch, baseOffset int64, now time.Time) {
	ps := b.part
	ps.failures = 0
	ps.lastAck = now // the response's arrival: one clock read per response, not per batch
	ps.ackedUpTo = max(ps.ackedUpTo, b.ord+1)
	// A batch sent before b that waits for retry may now fail as
	// ErrOrderLost (judge.Matrix.OrderLost); earlier batches still in flight are judged
	// when they return (judge.Facts.LaterAcked).
	for i := 0; i < len(ps.retry); {
		x := ps.retry[i]
		if s.matrix.OrderLost(judge.OrderFacts{LaterAcked: x.ord < b.ord, MaybeWritten: x.maybeWritten, AtAck: true, Leading: i == 0}) {
			s.failBatch(x, fmt.Errorf("%w (last error: %w)", ErrOrderLost, x.lastErr), false)
			continue
		}
		i++
	}
	if baseOffset >= 0 {
		ps.ackedEnd = max(ps.ackedEnd, baseOffset+int64(len(b.records)))
		if len(s.settling) > 0 {
			s.fenceAcked(b, baseOffset)
		}
	}
	for i := range b.records {
		r := b.records[i].rec
		r.Offset = -1
		if baseOffset >= 0 {
			r.Offset = baseOffset + int64(i)
		}
	}
	ps.topic.limit.written(int64(len(b.bytes)), int64(now.Sub(s.base)), s.cfg.metadataMaxAge)
	s.stats.recordsSent.Add(int64(len(b.records)))
	s.finish(b, nil)
}

// failBatch reports err for every record of b; b leaves the partition, and
// its position (if it was ever sent) stops holding the limiter's window.
func (s *sender) failBatch(b *batch, cause error, fateUnknown bool) {
	if fateUnknown && b.attempts > 0 {
		b.part.doubtUpTo = max(b.part.doubtUpTo, b.ord+1)
	}
	if b.attempts > 0 {
		s.p.limiter.Abandon(b.part.admission, b.ord)
	}
	s.markReady(b.part) // the window's anchor may have moved
	s.removeInflight(b)
	s.removeRetry(b)
	if fateUnknown && s.settleLater(b, cause) {
		return // called back once read-back has settled it (readback.go)
	}
	seq := b.seq
	if b.attempts == 0 {
		seq = -1
	}
	for i := range b.records {
		b.records[i].rec.Offset = -1
	}
	s.stats.recordsFailed.Add(int64(len(b.records)))
	s.finish(b, &DeliveryError{
		Topic: b.part.topic.name, Partition: b.part.id, BaseSequence: seq,
		FateUnknown: fateUnknown, Err: cause,
	})
}

// finish records b's outcome and releases the callbacks of every batch of
// the partition whose predecessors are all done: callbacks run in produce
// order within a partition even when a later batch is acked before an
// earlier one (a lost response waiting for request.timeout.ms).
func (s *sender) finish(b *batch, err error) {
	if b.done {
		panic("producer: batch completed twice")
	}
	b.done = true
	b.err = err
	if s.txn != nil {
		s.txn.done(b, err)
	}
	ps := b.part
	if b.attempts == 0 || s.cfg.regress.on(callbacksUnordered) { // in ps.report from its first send (takeBatch)
		if len(ps.report) == 0 || s.cfg.regress.on(callbacksUnordered) {
			s.complete(b) // nothing earlier pending: the common case
			return
		}
		// Never sent, so after every batch that was.
		ps.report = append(ps.report, b)
	}
	n := 0
	for n < len(ps.report) && ps.report[n].done {
		s.complete(ps.report[n])
		ps.report[n] = nil
		n++
	}
	if n > 0 {
		k := copy(ps.report, ps.report[n:])
		clear(ps.report[k:])
		ps.report = ps.report[:k]
	}
}

// complete hands b's callbacks to the callback goroutine, which releases
// b's buffer.memory once they have run.
func (s *sender) complete(b *batch) {
	s.p.cbs.pushCounted(completion{b: b, err: b.err, memory: b.memory}, s.p)
}

// retryBatch puts b back to be sent again, in order, after a backoff. b has
// already left ps.inflight.
func (s *sender) retryBatch(b *batch, cause error, now time.Time) {
	ps := b.part
	b.lastErr = cause
	s.p.log.Debug("batch will be retried", "topic", ps.topic.name, "partition", ps.id, "seq", b.seq, "attempts", b.attempts, "err", cause)
	i := len(ps.retry)
	for i > 0 && ps.retry[i-1].ord > b.ord {
		i--
	}
	ps.retry = append(ps.retry, nil)
	copy(ps.retry[i+1:], ps.retry[i:])
	ps.retry[i] = b
	// It was created before the last walk of expire may have looked: its
	// deadline can be the earliest.
	s.expireAt = earliest(s.expireAt, b.created.Add(s.cfg.deliveryTimeout))
	ps.failures++
	ps.backoffUntil = now.Add(s.backoff(ps.failures))
	s.backoffWait.fix(ps)
}

func (s *sender) removeInflight(b *batch) {
	ps := b.part
	for i, x := range ps.inflight {
		if x == b {
			last := len(ps.inflight) - 1
			copy(ps.inflight[i:], ps.inflight[i+1:])
			ps.inflight[last] = nil
			ps.inflight = ps.inflight[:last]
			return
		}
	}
}

func (s *sender) removeRetry(b *batch) {
	ps := b.part
	for i, x := range ps.retry {
		if x == b {
			ps.retry = append(ps.retry[:i], ps.retry[i+1:]...)
			return
		}
	}
}
