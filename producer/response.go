package producer

import (
	"errors"
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
		s.p.lim.Finish(&sr.ir)
		s.freeRequest(sr)
	}()
	now := time.Now()
	if err != nil {
		s.connFailed(sr.node, sr.conn, err)
		for i, b := range sr.batches {
			s.p.lim.Complete(sr.ir.Tickets[i], inflight.Outcome{})
			b.maybeWritten = b.maybeWritten || !protocol.SafeToRetry(err)
			s.retryBatch(b, err, now)
		}
		return
	}
	pr, _ := resp.(*kmsg.ProduceResponse)
	for i, b := range sr.batches {
		rp := findPartition(pr, b, sr.version)
		if rp == nil {
			// A response that leaves out a partition we sent is a broker
			// bug; we cannot know what happened, so treat it as lost.
			s.p.lim.Complete(sr.ir.Tickets[i], inflight.Outcome{})
			b.maybeWritten = true
			s.retryBatch(b, errMissingPartition, now)
			continue
		}
		window, present, werr := protocol.BatchesToRetain(sr.version, rp)
		if werr != nil {
			s.p.log.Warn("malformed ProducerStateBatchesToRetain; using 5", "topic", b.part.topic.name, "partition", b.part.id, "err", werr)
			window, present = protocol.DefaultBatchesToRetain, false
		}
		out := inflight.Outcome{Window: window, WindowPresent: present}
		switch rp.ErrorCode {
		case 0:
			out.Acked = true
			s.p.lim.Complete(sr.ir.Tickets[i], out)
			s.batchAcked(b, rp.BaseOffset)
		case kerr.DuplicateSequenceNumber.Code:
			out.Acked = true
			s.p.lim.Complete(sr.ir.Tickets[i], out)
			s.batchAcked(b, -1)
		default:
			s.p.lim.Complete(sr.ir.Tickets[i], out)
			s.batchRejected(b, rp, now)
		}
	}
}

var errMissingPartition = errors.New("producer: broker response left out the partition")

func findPartition(pr *kmsg.ProduceResponse, b *batch, version int16) *kmsg.ProduceResponseTopicPartition {
	if pr == nil {
		return nil
	}
	t := b.part.topic
	for i := range pr.Topics {
		rt := &pr.Topics[i]
		if version >= 13 && rt.TopicID != t.id || version < 13 && rt.Topic != t.name {
			continue
		}
		for j := range rt.Partitions {
			if rt.Partitions[j].Partition == b.part.id {
				return &rt.Partitions[j]
			}
		}
	}
	return nil
}

// batchRejected handles a partition response with an error code: the error
// matrix of SPEC.md.
func (s *sender) batchRejected(b *batch, rp *kmsg.ProduceResponseTopicPartition, now time.Time) {
	ps := b.part
	code := rp.ErrorCode
	cause := kerr.ErrorForCode(code)
	if rp.ErrorMessage != nil && *rp.ErrorMessage != "" {
		cause = &brokerError{err: cause, msg: *rp.ErrorMessage}
	}
	switch code {
	case kerr.OutOfOrderSequenceNumber.Code, kerr.UnknownProducerID.Code:
		if s.earlierUnacked(b) {
			// Its predecessor failed, so the broker saw a gap: that batch
			// goes again first and this one follows.
			s.retryBatch(b, cause, now)
			return
		}
		// The broker lost or never had our state (KIP-854 expiry, a new
		// leader without it). Bump the epoch and renumber from 0; a batch
		// that may already be in the log cannot be resent safely.
		s.needBump = true
		if b.maybeWritten {
			s.failBatch(b, cause, true)
			return
		}
		s.retryBatch(b, cause, now)
	case kerr.InvalidProducerEpoch.Code, kerr.ProducerFenced.Code:
		s.needBump = true
		s.needNewID = true
		if b.maybeWritten {
			s.failBatch(b, cause, true)
			return
		}
		s.retryBatch(b, cause, now)
	case kerr.NotLeaderForPartition.Code, kerr.FencedLeaderEpoch.Code, kerr.UnknownTopicOrPartition.Code,
		kerr.LeaderNotAvailable.Code, kerr.UnknownLeaderEpoch.Code:
		if cl := rp.CurrentLeader; cl.LeaderID >= 0 && cl.LeaderEpoch > ps.leaderEpoch {
			s.updateLeader(ps, cl.LeaderID, cl.LeaderEpoch) // KIP-951 hint
		}
		s.wantMetadata()
		s.retryBatch(b, cause, now)
	default:
		if kerr.IsRetriable(cause) {
			if code == kerr.NotEnoughReplicasAfterAppend.Code || code == kerr.RequestTimedOut.Code {
				b.maybeWritten = true
			}
			s.retryBatch(b, cause, now)
			return
		}
		// MESSAGE_TOO_LARGE, INVALID_RECORD, authorization...: only these
		// records fail. Their sequence numbers leave a gap, so the epoch is
		// bumped and the partition's later batches renumbered.
		s.needBump = true
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

// earlierUnacked reports whether a batch sent before b is still unacked.
func (s *sender) earlierUnacked(b *batch) bool {
	ps := b.part
	return len(ps.retry) > 0 && ps.retry[0].ord < b.ord ||
		len(ps.inflight) > 0 && ps.inflight[0].ord < b.ord
}

// batchAcked reports success for every record of b.
func (s *sender) batchAcked(b *batch, baseOffset int64) {
	ps := b.part
	s.removeInflight(b)
	ps.failures = 0
	ps.lastAck = time.Now()
	// A batch sent before b that the broker certainly did not write, yet b
	// was written: the broker had no state for us and took b out of order
	// (the trap of KAFKA-15591). Writing the earlier one now would reorder
	// the partition, so it fails, as not written.
	for len(ps.retry) > 0 && ps.retry[0].ord < b.ord && !ps.retry[0].maybeWritten {
		s.failBatch(ps.retry[0], ErrOrderLost, false)
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

// failBatch reports err for every record of b; b leaves the partition.
func (s *sender) failBatch(b *batch, cause error, fateUnknown bool) {
	s.removeInflight(b)
	s.removeRetry(b)
	seq := b.seq
	if b.attempts == 0 {
		seq = -1
	}
	s.stats.recordsFailed.Add(int64(len(b.records)))
	s.finish(b, &DeliveryError{
		Topic: b.part.topic.name, Partition: b.part.id, BaseSequence: seq,
		FateUnknown: fateUnknown, Err: cause,
	})
}

func (s *sender) finish(b *batch, err error) {
	if b.done {
		panic("producer: batch completed twice")
	}
	b.done = true
	s.p.mem.Release(b.memory)
	s.p.cbs.pushCounted(completion{b: b, err: err}, s.p)
}

// retryBatch puts b back to be sent again, in order, after a backoff.
func (s *sender) retryBatch(b *batch, cause error, now time.Time) {
	ps := b.part
	s.removeInflight(b)
	b.lastErr = cause
	s.p.log.Debug("batch will be retried", "topic", ps.topic.name, "partition", ps.id, "seq", b.seq, "attempts", b.attempts, "err", cause)
	i := len(ps.retry)
	for i > 0 && ps.retry[i-1].ord > b.ord {
		i--
	}
	ps.retry = append(ps.retry, nil)
	copy(ps.retry[i+1:], ps.retry[i:])
	ps.retry[i] = b
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
			s.totalInflight--
			break
		}
	}
	if len(ps.inflight) == 0 && ps.hasPending {
		s.applyLeader(ps, ps.pendingLeader, ps.pendingEpoch)
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
