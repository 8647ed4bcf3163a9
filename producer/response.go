package producer

import (
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/longhaul-kafka/longhaul/inflight"
	"github.com/longhaul-kafka/longhaul/protocol"
)

// handleProduce applies one ProduceRequest's outcome: every batch is acked,
// put back for retry, or failed, and every ticket is completed once.
func (s *sender) handleProduce(sr *sentRequest) {
	resp, err := sr.resp, sr.err
	defer func() {
		s.p.limiter.Finish(&sr.ir)
		s.applyPendingLeaders()
		s.unblock(sr.node) // a request slot on the node is free
		s.freeRequest(sr)
	}()
	// A batch may be recycled once completed: note its partition first.
	for _, b := range sr.batches {
		s.touched = append(s.touched, b.part)
	}
	now := time.Now()
	if err != nil {
		s.connFailed(sr.node, sr.conn, err)
		code := codeUnsent
		if !protocol.SafeToRetry(err) {
			code = codeLost
		}
		for i, b := range sr.batches {
			s.p.limiter.Complete(sr.ir.Tickets[i], inflight.Outcome{})
			s.removeInflight(b)
			s.batchRejected(b, code, err, nil, now)
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
	pr, _ := resp.(*kmsg.ProduceResponse)
	s.cfg.hooks.throttled(sr.node.id, pr)
	if pr != nil {
		s.learnEndpoints(pr.Brokers)
		s.throttled(sr, time.Duration(pr.ThrottleMillis)*time.Millisecond, now)
	}
	cur := respCursor{pr: pr, version: sr.version}
	for i, b := range sr.batches {
		rp := cur.find(b)
		if rp == nil {
			// A response that leaves out a partition we sent is a broker
			// bug; we cannot know what happened, so treat it as lost.
			s.p.limiter.Complete(sr.ir.Tickets[i], inflight.Outcome{})
			s.removeInflight(b)
			s.batchRejected(b, codeLost, errMissingPartition, nil, now)
			continue
		}
		window, present, werr := protocol.BatchesToRetain(sr.version, rp)
		if werr != nil {
			s.p.log.Warn("malformed ProducerStateBatchesToRetain; using 5", "topic", b.part.topic.name, "partition", b.part.id, "err", werr)
			window, present = protocol.DefaultBatchesToRetain, false
		}
		out := inflight.Outcome{Window: window, WindowPresent: present}
		s.removeInflight(b)
		switch rp.ErrorCode {
		case 0, kerr.DuplicateSequenceNumber.Code:
			out.Acked = true
			s.p.limiter.Complete(sr.ir.Tickets[i], out)
			offset := rp.BaseOffset
			if rp.ErrorCode != 0 {
				offset = -1
			}
			s.cfg.hooks.batchAcked(s, sr.node.id, b, offset)
			s.batchAcked(b, offset, now)
		default:
			s.p.limiter.Complete(sr.ir.Tickets[i], out)
			s.cfg.hooks.windowChanged(s, b.part, WindowLearned)
			cause := kerr.ErrorForCode(rp.ErrorCode)
			if rp.ErrorMessage != nil && *rp.ErrorMessage != "" {
				cause = &brokerError{err: cause, msg: *rp.ErrorMessage}
			}
			s.batchRejected(b, rp.ErrorCode, cause, &rp.CurrentLeader, now)
		}
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

var errMissingPartition = errors.New("producer: broker response left out the partition")

// respCursor walks a ProduceResponse in the order the request was built, so
// finding each batch's partition is O(1) when the broker answers in request
// order (Kafka does), and a search otherwise; a linear search per batch was
// quadratic in partitions per request.
type respCursor struct {
	pr      *kmsg.ProduceResponse
	version int16
	ti, pj  int // where the next partition is expected
}

func (c *respCursor) find(b *batch) *kmsg.ProduceResponseTopicPartition {
	pr := c.pr
	if pr == nil {
		return nil
	}
	t := b.part.topic
	match := func(rt *kmsg.ProduceResponseTopic) bool {
		if c.version >= 13 {
			return rt.TopicID == b.topicID // the id the request named
		}
		return rt.Topic == t.name
	}
	for c.ti < len(pr.Topics) && c.pj >= len(pr.Topics[c.ti].Partitions) {
		c.ti, c.pj = c.ti+1, 0
	}
	if c.ti < len(pr.Topics) {
		rt := &pr.Topics[c.ti]
		if rp := &rt.Partitions[c.pj]; match(rt) && rp.Partition == b.part.id {
			c.pj++
			return rp
		}
	}
	for i := range pr.Topics {
		rt := &pr.Topics[i]
		if !match(rt) {
			continue
		}
		for j := range rt.Partitions {
			if rt.Partitions[j].Partition == b.part.id {
				c.ti, c.pj = i, j+1
				return &rt.Partitions[j]
			}
		}
	}
	return nil
}

// Pseudo error codes for outcomes without a partition response, judged like
// broker codes.
const (
	codeUnsent int16 = -1000 - iota // the request never reached the broker
	codeLost                        // sent, and no answer: it may have been appended
)

func init() {
	produceCodes[codeUnsent] = codeInfo{classRetry, false}
	produceCodes[codeLost] = codeInfo{classRetry, true}
}

// facts gathers what judge needs to know about b.
func (s *sender) facts(b *batch) batchFacts {
	ps := b.part
	f := batchFacts{
		maybeWritten: b.maybeWritten,
		laterAcked:   ps.ackedUpTo > b.ord+1 && !s.cfg.regress.on(orderLostLeadingOnly),
		newestSeq:    ps.nextOrd == b.ord+1,
		resolving:    s.needBump,
		records:      len(b.records),
	}
	for _, x := range ps.inflight {
		if x.ord < b.ord {
			f.earlierUnacked = true
		}
	}
	for _, x := range ps.retry {
		if x.ord < b.ord {
			f.earlierUnacked = true
			if !x.maybeWritten {
				f.earlierRefused = true
			}
		}
	}
	return f
}

// batchRejected applies judge's verdict for a batch whose attempt did not
// end in an acknowledgement. b has already left ps.inflight.
func (s *sender) batchRejected(b *batch, code int16, cause error, hint *kmsg.ProduceResponseTopicPartitionCurrentLeader, now time.Time) {
	ps := b.part
	if ps.gone {
		// The partition vanished with its topic: nowhere to retry.
		s.failBatch(b, ps.goneErr, b.maybeWritten || lookupCode(code).mayAppend)
		return
	}
	f := s.facts(b)
	v := judge(code, f)
	if s.cfg.regress.on(oooProvesUnwritten) && lookupCode(code).class == classSequence && f.earlierUnacked && f.earlierRefused {
		v = verdict{act: actRetry}
		if f.laterAcked {
			v.act = actOrderLost
		}
	}
	if s.cfg.regress.on(notLeaderNotWritten) && lookupCode(code).class == classLeader {
		v.maybeWritten = b.maybeWritten
	}
	s.cfg.hooks.batchRejected(s, -1, b, cause, v.act == actRetry || v.act == actSplit)
	b.maybeWritten = v.maybeWritten
	if b.maybeWritten && !s.cfg.regress.on(splitMaybeWritten) {
		// A batch waiting to be split (too large) went out whole behind
		// another retry, and that attempt may be in the log: it is never
		// split now. Halves carry sub-ranges of its sequences, which the
		// broker cannot match as duplicates of the written whole (a half
		// would be refused as out of order, then failed as ErrOrderLost
		// while its records are in the log). Sent whole, it
		// is acked as a duplicate, or refused as too large and fails,
		// fate unknown (judge).
		b.split = false
	}
	if v.refreshMetadata {
		if hint != nil {
			s.leaderHint(b, hint.LeaderID, hint.LeaderEpoch) // KIP-951
		}
		s.wantMetadata()
	}
	if v.bump {
		s.needBump = true
	}
	if v.newID {
		s.needNewID = true
	}
	switch v.act {
	case actRetry:
		s.retryBatch(b, cause, now)
	case actSplit:
		b.split = true
		s.retryBatch(b, cause, now)
	case actOrderLost:
		s.failBatch(b, fmt.Errorf("%w (last error: %w)", ErrOrderLost, cause), false)
	case actFail:
		if v.rewind {
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
	// A batch sent before b that the broker certainly did not write, yet b
	// was written: the broker had no state for us and took b out of order
	// (the trap of KAFKA-15591). Writing the earlier one now would reorder
	// the partition, so it fails, as not written, wherever it waits.
	// Earlier batches still in flight are judged when they return
	// (batchFacts.laterAcked).
	for i := 0; i < len(ps.retry); {
		x := ps.retry[i]
		if x.ord < b.ord && !x.maybeWritten {
			s.failBatch(x, fmt.Errorf("%w (last error: %w)", ErrOrderLost, x.lastErr), false)
			continue
		}
		if s.cfg.regress.on(orderLostLeadingOnly) {
			break
		}
		i++
	}
	for i := range b.records {
		r := b.records[i].rec
		r.Offset = -1
		if baseOffset >= 0 {
			r.Offset = baseOffset + int64(i)
		}
	}
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
	ps := b.part
	if !b.inReport || s.cfg.regress.on(callbacksUnordered) {
		if len(ps.report) == 0 || s.cfg.regress.on(callbacksUnordered) {
			s.complete(b) // nothing earlier pending: the common case
			return
		}
		// Never sent, so after every batch that was.
		ps.report = append(ps.report, b)
		b.inReport = true
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
