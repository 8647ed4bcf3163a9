package producer

import (
	"context"
	"fmt"

	"github.com/longhaul-kafka/longhaul/protocol"
)

// Purge fails every record the producer holds that it has not sent: its
// callback gets a [*DeliveryError] wrapping [ErrPurged], with FateUnknown
// false, since no broker has seen it. Records sent at least once (in flight,
// or waiting to be sent again after a failed attempt) are not purged: they
// keep going and get their own outcomes, because a sent record may already
// be in the log and failing it would lie about it. Within a partition the
// callbacks keep produce order: a purged record is called back after every
// record produced before it, so it may wait for the outcome of a record in
// flight ahead of it.
//
// The producer stays open: records produced after Purge returns are sent
// as usual. A record produced while Purge runs, from another goroutine,
// may be purged or sent. The purged records' buffer.memory is given back
// before their callbacks run (their bytes are no longer needed), and they
// count for [Producer.Flush] as called back once their callbacks ran, so a
// Flush waiting for them returns once the records in flight are done.
//
// Purge returns nil once the unsent records are failed and their
// buffer.memory is given back (their callbacks run later, on the callback
// goroutine; [Producer.Flush] waits for them). If ctx ends first it
// returns ctx's error, wrapped, and the purge still happens when the
// producer gets to it. It returns [ErrClosed] once Close has begun (Close
// fails what is unsent itself), and [ErrInCallback], purging nothing, when
// called from a record callback or a hook. A nil ctx panics, as in
// Produce.
func (p *Producer) Purge(ctx context.Context) error {
	mustContext(ctx)
	if p.onOwnGoroutine() {
		return ErrInCallback
	}
	if p.acc.isClosed() {
		return ErrClosed
	}
	// The sender goroutine owns the batches it took from the accumulator
	// and the per-partition report order, so the purge runs there, between
	// two of its passes: nothing is half sent then.
	done := make(chan struct{})
	p.post(func() {
		p.s.purge()
		close(done)
	})
	select {
	case <-done:
		return nil
	case <-p.senderDone:
		// Close ended the sender; it runs the events posted before its
		// last look, so done may be closed too.
		select {
		case <-done:
			return nil
		default:
			return ErrClosed
		}
	case <-ctx.Done():
		return fmt.Errorf("producer: purge: %w", ctx.Err())
	}
}

// purge fails every record not yet sent: those waiting for their topic's
// partitions, those in open and sealed batches, and those the sender
// queued. Batches sent at least once (p.inflight, p.retry) are left alone.
// A transactional producer that purges records of its open transaction
// can no longer commit it: a commit would leave out records produced
// into it, so the transaction becomes abort-only, as when any of its
// records fails. Runs on the sender goroutine.
func (s *sender) purge() {
	s.p.acc.locked(func(v accHeld) { v.topics(func(t *topicState) { s.purgeTopic(v, t) }) })
}

// purgeTopic is purge for one topic.
func (s *sender) purgeTopic(v accHeld, t *topicState) {
	p := s.p
	if n, _ := v.waiting(t); n > 0 && s.txn != nil {
		// The core counts a record once its batch is queued, and sees a
		// queued one fail through finish; these it never saw.
		s.txn.failedUncounted(ErrPurged)
	}
	v.dropWaiting(t, func(w *waitingRecord) error {
		p.mem.Release(int64(w.size))
		w.size = 0
		return &DeliveryError{Topic: t.name, Partition: -1, BaseSequence: -1, Err: ErrPurged}
	})
	for _, ps := range t.parts {
		s.takeUnsent(v, ps)
		for len(ps.queue) > 0 {
			b := s.popQueue(ps)
			// Never sent, its bytes go now: its callbacks may wait
			// for the batches in flight before it (report order).
			p.mem.Release(b.memory)
			b.memory = 0
			b.builder = protocol.BatchBuilder{}
			s.failBatch(b, ErrPurged, false)
		}
	}
}
