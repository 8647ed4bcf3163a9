package producer

import (
	"context"
	"fmt"
	"slices"
	"sync"
)

// ProduceResult is the outcome of one record of [Producer.ProduceSync].
type ProduceResult struct {
	Record *Record
	// Err is nil when the record was written (Record's partition and
	// Offset are then set); otherwise see ProduceSync.
	Err error
}

// ProduceResults are the outcomes of one [Producer.ProduceSync] call, in
// the order of its records.
type ProduceResults []ProduceResult

// FirstErr returns the error of the first record that failed, in record
// order, or nil if every record was written.
func (rs ProduceResults) FirstErr() error {
	for _, r := range rs {
		if r.Err != nil {
			return r.Err
		}
	}
	return nil
}

// ProduceSync produces records as [Producer.Produce] does and waits for
// their outcomes, one [ProduceResult] per record, in order. It returns when
// every record has its outcome, or soon after ctx is done:
//
//   - Records not yet sent to a broker (buffered, or waiting for their
//     topic's partitions) are withdrawn: they are never sent, and their Err
//     is a [*DeliveryError] wrapping ctx's error, not FateUnknown.
//   - Records already sent (in flight, or waiting to be retried) cannot be
//     withdrawn: their sequence numbers are taken, and the broker may have
//     written them. They complete in the background, and their Err is a
//     [*DeliveryError] marked FateUnknown wrapping [ErrInFlight] and ctx's
//     error. The producer keeps owning such a Record: do not read or reuse
//     it until a later [Producer.Flush] (or Close) has returned, after which
//     its Offset is set if it was written.
//   - Records that already had their outcome keep it.
//
// A failed record's Offset is -1. ProduceSync blocks while buffer.memory is
// full, as Produce does, until ctx is done. Called from a record callback
// or a hook it returns at once with [ErrInCallback] for every record and
// produces nothing. A nil ctx panics at once, before any record is taken,
// as in Produce.
func (p *Producer) ProduceSync(ctx context.Context, records ...*Record) ProduceResults {
	mustContext(ctx)
	results := make(ProduceResults, len(records))
	for i, r := range records {
		results[i].Record = r
	}
	if p.onOwnGoroutine() {
		for i := range results {
			results[i].Err = ErrInCallback
		}
		return results
	}
	var (
		mu       sync.Mutex
		called   = make([]bool, len(records))
		left     = len(records)
		returned bool
		progress = make(chan struct{}, 1)
	)
	for i, r := range records {
		p.Produce(ctx, r, func(_ *Record, err error) {
			mu.Lock()
			defer mu.Unlock()
			if returned {
				return // reported as in flight; the Record shows the outcome
			}
			results[i].Err = err
			called[i] = true
			left--
			select {
			case progress <- struct{}{}:
			default:
			}
		})
	}
	waitUntil := func(done func() bool) bool {
		for {
			mu.Lock()
			ok := done()
			mu.Unlock()
			if ok {
				return true
			}
			select {
			case <-progress:
			case <-ctx.Done():
				return false
			}
		}
	}
	if waitUntil(func() bool { return left == 0 }) {
		return results
	}

	// ctx is done: withdraw what was not sent, on the sender goroutine,
	// which owns the decision to send.
	mu.Lock()
	var pending []*Record
	for i, r := range records {
		if !called[i] {
			pending = append(pending, r)
		}
	}
	mu.Unlock()
	inFlight := p.withdraw(pending, ctx.Err())
	// Every other record now has its callback queued: wait for those.
	for {
		mu.Lock()
		rest := 0
		for i, r := range records {
			if !called[i] && !inFlight[r] {
				rest++
			}
		}
		if rest == 0 {
			returned = true
			for i, r := range records {
				if !called[i] {
					results[i].Err = &DeliveryError{Topic: r.Topic, Partition: r.Partition(), BaseSequence: -1,
						FateUnknown: true, Err: fmt.Errorf("%w: %w", ErrInFlight, ctx.Err())}
				}
			}
			mu.Unlock()
			return results
		}
		mu.Unlock()
		<-progress
	}
}

// withdraw removes the records of recs that were not sent yet from the
// producer and fails them with cause; it reports which records were sent
// and are still unresolved. It runs on the sender goroutine, so no batch is
// taken for sending meanwhile. If the sender has already stopped, every
// record has been failed by the shutdown, and nothing is in flight.
func (p *Producer) withdraw(recs []*Record, cause error) map[*Record]bool {
	var inFlight map[*Record]bool
	ran := make(chan struct{})
	p.post(func() {
		inFlight = p.s.withdraw(recs, cause)
		close(ran)
	})
	select {
	case <-ran:
		return inFlight
	case <-p.senderDone:
		select {
		case <-ran: // it ran during shutdown
			return inFlight
		default:
			return nil
		}
	}
}

// withdraw is Producer.withdraw on the sender goroutine.
func (s *sender) withdraw(recs []*Record, cause error) map[*Record]bool {
	p := s.p
	inFlight := make(map[*Record]bool)
	want := make(map[*Record]bool, len(recs))
	for _, r := range recs {
		if r != nil {
			want[r] = true
		}
	}
	p.acc.locked(func(v accHeld) {
		fail := func(t *topicState, pr pendingRecord) {
			v.failRecord(pr, &DeliveryError{Topic: t.name, Partition: pr.rec.Partition(), BaseSequence: -1, Err: cause})
		}
		for _, r := range recs {
			if r == nil {
				continue
			}
			t := v.topic(r.Topic)
			if t == nil {
				continue // rejected before it reached a topic
			}
			v.dropWaiting(t, func(w *waitingRecord) error {
				if want[w.rec] {
					delete(want, w.rec)
					return &DeliveryError{Topic: t.name, Partition: w.rec.Partition(), BaseSequence: -1, Err: cause}
				}
				return nil
			})
			if !want[r] || !r.hasPartition || r.partition < 0 || int(r.partition) >= len(t.parts) {
				continue
			}
			ps := t.parts[r.partition]
			v.withdrawOpen(ps, func(b *batch) bool { return s.withdrawFrom(b, want, fail) })
			s.takeSealed(v, ps)
			ps.queue = slices.DeleteFunc(ps.queue, func(b *batch) bool {
				n := len(b.records)
				empty := s.withdrawFrom(b, want, fail)
				if s.txn != nil && len(b.records) < n {
					s.txn.withdrawn(ps, n-len(b.records), cause)
				}
				if empty {
					b.recycle()
					return true
				}
				return false
			})
			ps.queuedPub.Store(int32(len(ps.queue)))
			for _, bs := range [][]*batch{ps.inflight, ps.retry} {
				for _, b := range bs {
					for _, pr := range b.records {
						if want[pr.rec] {
							inFlight[pr.rec] = true
						}
					}
				}
			}
		}
	})
	return inFlight
}

// withdrawFrom fails and removes the records of unsent batch b that are in
// want, releasing their memory; it reports whether b is now empty.
func (s *sender) withdrawFrom(b *batch, want map[*Record]bool, fail func(*topicState, pendingRecord)) bool {
	hit := false
	for _, pr := range b.records {
		if want[pr.rec] {
			hit = true
			break
		}
	}
	if !hit {
		return false
	}
	keep := make([]bool, len(b.records))
	kept := b.records[:0]
	for i, pr := range b.records {
		if want[pr.rec] {
			delete(want, pr.rec)
			b.memory -= int64(pr.size)
			fail(b.part.topic, pr)
			continue
		}
		keep[i] = true
		kept = append(kept, pr)
	}
	clear(b.records[len(kept):])
	b.records = kept
	b.builder.Retain(func(i int) bool { return keep[i] })
	s.p.acc.settleMemory(b) // the withdrawn records released their own
	return len(b.records) == 0
}
