package broker

import (
	"math"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// EndTxn: v0-5
//
// Behavior (Kafka's TransactionCoordinator.endTransaction), at the
// transactional id's coordinator only (NOT_COORDINATOR elsewhere). The
// answer comes once the transaction is prepared; its markers are written
// afterwards ([Cluster.SetMarkerDelay], [Cluster.HoldMarkers]).
// * An unknown transactional id, or another producer id, is
//   INVALID_PRODUCER_ID_MAPPING.
// * v0-4 (transaction version 0/1): another epoch is PRODUCER_FENCED
//   (INVALID_PRODUCER_EPOCH below v2). An ongoing transaction is prepared;
//   one being completed with the same result is CONCURRENT_TRANSACTIONS,
//   one completed with the same result is a retry (no error); the other
//   result, or no transaction, is INVALID_TXN_STATE. The markers carry the
//   transaction's epoch, so sequences continue in the next transaction.
// * v5 (transaction version 2, KIP-890): a transaction being completed is
//   CONCURRENT_TRANSACTIONS (checked first). The request's epoch one below
//   the id's (or the exhausted epoch of the producer id before the
//   current one, now at epoch 0), after a transaction completed with the
//   same result, is a retry, answered with the current id and epoch,
//   also by a coordinator that loaded the id since (the epoch is in
//   Kafka's log), and whatever version ended it; after the coordinator
//   aborted the transaction on its timeout, a commit at that epoch is
//   INVALID_TXN_STATE, as on Kafka 4.4.0 (PRODUCER_FENCED since
//   KAFKA-20785: [Cluster.SetTimedOutCommitError]), and an abort a retry
//   answered with the epoch the timeout bumped. Otherwise the epoch must be the
//   id's (PRODUCER_FENCED): an ongoing transaction is prepared and the
//   epoch bumped (a new producer id at epoch 0 once exhausted); an abort
//   with no transaction bumps the epoch too; a commit with none is
//   INVALID_TXN_STATE. The answer carries the id and epoch for the next
//   transaction, and the markers the bumped epoch, so every transaction
//   starts each partition at sequence 0.

func init() { regKey(26, 0, 5, handleEndTxn) }

func handleEndTxn(c *Cluster, r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.EndTxnRequest)
	resp := req.ResponseKind().(*kmsg.EndTxnResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if code := c.coordCheck(r.n, 26, coordTxn, req.TransactionalID); code != 0 {
		resp.ErrorCode = code
		return resp, nil
	}
	m := c.txns[req.TransactionalID]
	if m == nil || (m.pid != req.ProducerID && !(req.Version >= 5 && m.prevPID == req.ProducerID)) {
		resp.ErrorCode = kerr.InvalidProducerIDMapping.Code
		return resp, nil
	}
	if req.Version >= 5 {
		resp.ErrorCode = c.endTxnV2(m, req)
		if resp.ErrorCode == 0 {
			resp.ProducerID, resp.ProducerEpoch = m.pid, m.epoch
		}
		return resp, nil
	}
	resp.ErrorCode = c.endTxnV1(m, req)
	return resp, nil
}

// endTxnV1 ends m's transaction under transaction version 0/1. c.mu is
// held.
func (c *Cluster) endTxnV1(m *txnMeta, req *kmsg.EndTxnRequest) int16 {
	if m.pid != req.ProducerID || m.epoch != req.ProducerEpoch {
		if req.Version >= 2 {
			return kerr.ProducerFenced.Code
		}
		return kerr.InvalidProducerEpoch.Code
	}
	same := req.Commit == (m.state == txnPrepareCommit || m.state == txnCompleteCommit)
	switch m.state {
	case txnOngoing:
		c.prepareEnd(m, req.Commit, m.epoch)
		return c.answerApplied(m, 26, 0)
	case txnPrepareCommit, txnPrepareAbort:
		if same {
			return c.countConcurrent(kerr.ConcurrentTransactions.Code)
		}
	case txnCompleteCommit, txnCompleteAbort:
		if same {
			return 0
		}
	}
	return kerr.InvalidTxnState.Code
}

// endTxnV2 ends m's transaction under transaction version 2. c.mu is
// held.
func (c *Cluster) endTxnV2(m *txnMeta, req *kmsg.EndTxnRequest) int16 {
	if m.state.preparing() {
		return c.countConcurrent(kerr.ConcurrentTransactions.Code)
	}
	committed := m.state == txnCompleteCommit
	// A retry is told by the epoch alone, one below the id's (or the
	// last epoch of the producer id before an exhausted one moved to a
	// new id at epoch 0): the state Kafka keeps in its log, so a
	// coordinator that loaded the id answers it as the one that bumped.
	retryEpoch := req.ProducerID == m.pid && int(req.ProducerEpoch)+1 == int(m.epoch) ||
		req.ProducerID == m.prevPID && req.ProducerEpoch == math.MaxInt16-1 && m.epoch == 0
	if retryEpoch && (m.state == txnCompleteCommit || m.state == txnCompleteAbort) {
		switch {
		case m.timedOut && req.Commit:
			if c.timedOutCommit != 0 {
				return c.timedOutCommit
			}
			return kerr.InvalidTxnState.Code
		case req.Commit == committed:
			return 0
		}
		return kerr.InvalidTxnState.Code
	}
	if m.pid != req.ProducerID || m.epoch != req.ProducerEpoch {
		return kerr.ProducerFenced.Code
	}
	switch {
	case m.state == txnOngoing:
	case !req.Commit:
		// An abort with no transaction is allowed and bumps the epoch.
	default:
		return kerr.InvalidTxnState.Code
	}
	c.bumpEpoch(m)
	m.timedOut = false
	c.prepareEnd(m, req.Commit, m.epoch)
	return c.answerApplied(m, 26, 0)
}
