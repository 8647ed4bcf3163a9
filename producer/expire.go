package producer

import (
	"cmp"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// expire fails what delivery.timeout.ms has run out for: records waiting for
// their topic's metadata, and batches not in flight. Batches in flight wait
// for their response or request.timeout.ms first, as in the Java client.
// It returns when the next record or batch not in flight runs out, so the
// sender sleeps until then (a batch coming back from flight arrives as an
// event, which runs expire again); zero if nothing waits; now when it
// failed a retried batch, whose sequence gap the epoch bump must close.
//
// It fails them at once, with ErrAuthentication, when the connection they
// wait for failed authentication or TLS verification (see fatalDialError):
// retrying cannot help until the configuration or the broker changes, and
// the caller should learn that in seconds, not after delivery.timeout.ms.
// Dials go on with backoff, so records produced after a fix go through.
func (s *sender) expire(now time.Time) (next time.Time) {
	timeout := s.cfg.deliveryTimeout
	p := s.p
	idFatal := idFatalCause(s.lastIDErr)
	var parts time.Time // the partitions' earliest deadline
	walked := false
	p.acc.locked(func(v accHeld) {
		// Records waiting for their topic's partitions fail after
		// max.block.ms (or delivery.timeout.ms if shorter), naming the
		// last metadata error.
		waitLimit := min(timeout, s.cfg.maxBlock)
		v.topics(func(t *topicState) {
			fatal := fatalCause(t.lastErr)
			n, oldest := v.waiting(t)
			if n == 0 {
				return
			}
			if fatal == nil && now.Sub(oldest) < waitLimit {
				next = earliest(next, oldest.Add(waitLimit))
				return
			}
			v.dropWaiting(t, func(w *waitingRecord) error {
				if fatal == nil && now.Sub(w.at) < waitLimit {
					next = earliest(next, w.at.Add(waitLimit))
					return nil
				}
				cause := fatal
				if cause == nil {
					cause = s.waitingCause(t)
				}
				return &DeliveryError{Topic: t.name, Partition: -1, BaseSequence: -1, Err: cause}
			})
		})
		// The partitions are walked only when something may be due:
		// nothing found at the last walk runs out before s.expireAt, and
		// a batch opened since runs out later (at its creation plus the
		// timeout, after the walk); a batch back from flight lowers
		// s.expireAt itself (retryBatch). A fatal dial or producer id
		// error fails batches at once, so then every pass walks. At
		// 1,000 keyed partitions a walk under acc.mu in every pass (a
		// pass per response) kept Produce waiting for the lock.
		if now.Before(s.expireAt) && !s.anyFatal(idFatal) {
			if v.anyActive() || s.active.len() > 0 {
				next = earliest(next, s.expireAt)
			}
			return
		}
		walked = true
		if s.probe != nil {
			s.probe.expireWalks.Add(1)
		}
		// Sealed batches were never sent: failing them leaves no gap.
		// The accumulator's active list holds every partition with an
		// open or queued batch: a partition is listed when it opens a
		// batch, and leaves here once it holds none.
		v.eachActive(func(ps *partitionState) bool {
			fatal := s.partitionFatal(ps, idFatal)
			if _, open := v.open(ps); open && v.queued(ps) == 0 && (fatal != nil || now.Sub(v.created(ps)) >= timeout) {
				v.seal(ps) // held open while its partition could not send
			}
			s.takeSealed(v, ps)
			for len(ps.queue) > 0 && (fatal != nil || now.Sub(ps.queue[0].created) >= timeout) {
				s.failBatch(s.popQueue(ps), cmp.Or(fatal, s.timeoutCause(ps, nil)), false)
			}
			if len(ps.queue) > 0 {
				parts = earliest(parts, ps.queue[0].created.Add(timeout))
			} else if _, open := v.open(ps); open {
				parts = earliest(parts, v.created(ps).Add(timeout))
			} else {
				return false
			}
			return true
		})
	})
	if !walked {
		return next
	}
	// Retried batches have sequence numbers: failing one leaves a gap, so
	// the epoch is bumped before the partition sends again. s.active holds
	// every partition with a batch waiting for retry (takeSealed).
	s.pruneActive()
	bump := false
	for _, ps := range s.active.members() {
		fatal := s.partitionFatal(ps, idFatal)
		for len(ps.retry) > 0 && (fatal != nil || now.Sub(ps.retry[0].created) >= timeout) {
			b := ps.retry[0]
			s.failBatch(b, cmp.Or(fatal, s.timeoutCause(ps, b.lastErr)), b.maybeWritten)
			// Inside a transaction the failure makes it abort-only instead.
			s.needBump = s.txn == nil
			bump = bump || s.needBump
		}
		for _, b := range ps.retry {
			parts = earliest(parts, b.created.Add(timeout))
		}
	}
	// Nothing found: a batch opened from now on runs out after now plus
	// the timeout.
	s.expireAt = earliest(parts, now.Add(timeout))
	if bump {
		// The bump is due from now, and this pass looked at the identity
		// (maintainIdentity) before: the next pass must come at once.
		// Nothing else need wake the sender: the failed batch's attempts
		// are over, every batch behind it waits for the bump, and so does
		// a batch of unknown fate for its fence.
		return now
	}
	return earliest(next, parts)
}

// anyFatal reports whether some batch may fail at once with
// ErrAuthentication (partitionFatal): a node's connection failed fatally,
// or the producer id is missing or being bumped and getting it failed
// fatally. Nodes are few; partitions may be thousands.
func (s *sender) anyFatal(idFatal error) bool {
	if s.idFatal(idFatal) != nil {
		return true
	}
	for _, n := range s.nodes {
		if nodeFatal(n) != nil {
			return true
		}
	}
	return false
}

// waitingCause says why a record that waited for its topic's partitions
// failed: max.block.ms (ErrTopicMetadata) or delivery.timeout.ms, with the
// last metadata error for the topic.
func (s *sender) waitingCause(t *topicState) error {
	cause, limit := ErrTopicMetadata, s.cfg.maxBlock
	if s.cfg.deliveryTimeout < limit {
		cause, limit = ErrDeliveryTimeout, s.cfg.deliveryTimeout
	}
	if t.lastErr == nil {
		return fmt.Errorf("%w: partitions not known after %d ms", cause, limit.Milliseconds())
	}
	return fmt.Errorf("%w: partitions not known after %d ms: %w", cause, limit.Milliseconds(), t.lastErr)
}

// partitionFatal returns the ErrAuthentication cause that keeps ps from
// sending, or nil: its leader's last dial failed fatally, or there is no
// producer id and getting one failed fatally.
func (s *sender) partitionFatal(ps *partitionState, idFatal error) error {
	if ps.leader() >= 0 {
		if err := nodeFatal(s.nodes[ps.leader()]); err != nil {
			return err
		}
	}
	return s.idFatal(idFatal)
}

// nodeFatal returns the ErrAuthentication cause of n's last failed dial
// while n has no connection, or nil (also for a nil n).
func nodeFatal(n *nodeState) error {
	if n == nil || n.conn != nil {
		return nil
	}
	return fatalCause(n.lastErr)
}

// idFatalCause is what fails batches at once while the producer has no
// usable id: a fatal dial error (fatalCause) of the control connection,
// or InitProducerId refused for want of the right to write idempotently
// (CLUSTER_AUTHORIZATION_FAILED; the Java producer's error is fatal too),
// which retrying cannot fix until the ACLs change. Nil otherwise.
func idFatalCause(err error) error {
	if errors.Is(err, kerr.ClusterAuthorizationFailed) || errors.Is(err, kerr.TransactionalIDAuthorizationFailed) {
		return fmt.Errorf("producer: InitProducerId refused: %w", err)
	}
	return fatalCause(err)
}

// idFatal returns idFatal while the producer id is missing or being
// bumped, or nil: a fatal id error blocks sending only until an id is had.
func (s *sender) idFatal(idFatal error) error {
	if !s.haveID || s.needBump {
		return idFatal
	}
	return nil
}

func (s *sender) timeoutCause(ps *partitionState, last error) error {
	if last == nil && ps.leader() >= 0 {
		if n := s.nodes[ps.leader()]; n != nil {
			last = n.lastErr
		}
	}
	if last == nil {
		last = s.lastIDErr
	}
	if last == nil {
		return ErrDeliveryTimeout
	}
	return fmt.Errorf("%w (last error: %w)", ErrDeliveryTimeout, last)
}
