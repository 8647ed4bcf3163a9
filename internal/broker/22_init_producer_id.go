package broker

import (
	"math"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// InitProducerId: v0-5
//
// Behavior without a transactional id:
// * Without a producer id (-1) it hands out a new id with epoch 0.
// * With an id and epoch (v3+, KIP-360) that match the latest epoch the
//   cluster handed out for that id, it answers the same id with epoch+1;
//   with a stale or unknown pair, or an exhausted epoch, a new id. Producer
//   state on partitions is untouched: the bumped epoch resets sequences at
//   its first append.
//
// Behavior with a transactional id (Kafka's
// TransactionCoordinator.handleInitProducerId), at its coordinator only
// (NOT_COORDINATOR elsewhere):
// * An empty id is INVALID_REQUEST; a timeout of 0 or less, or above 15
//   minutes (transaction.max.timeout.ms), INVALID_TRANSACTION_TIMEOUT.
// * A new id gets a new producer id at epoch 0.
// * While the id's transaction is being completed (markers pending) the
//   answer is CONCURRENT_TRANSACTIONS.
// * v3+ with a producer id and epoch: they must be the id's current ones
//   (the epoch is bumped), or the ones before its last bump (a retry,
//   answered the current pair); anything else is PRODUCER_FENCED
//   (INVALID_PRODUCER_EPOCH below v4). The epoch before the last bump is
//   known only to the coordinator that bumped: one that loaded the id
//   since (a coordinator move or failover, a new process on its node)
//   fences such a retry, as Kafka's, whose log does not hold that epoch.
//   A bump without a producer id (a new instance) forgets it too, so the
//   old instance's retry is fenced.
// * An ongoing transaction is fenced, checked before the epoch (v3+: if
//   the producer id is the id's, whatever the epoch sent): the epoch is
//   bumped, the transaction aborted (its markers carry the new epoch) and
//   the answer is CONCURRENT_TRANSACTIONS. Under transaction version 0/1
//   the fence forgets the epoch before it (Kafka sets lastProducerEpoch to
//   none), so a retry with the epoch the fence met is PRODUCER_FENCED; one
//   with the new epoch, or without a producer id, gets a further epoch.
// * Otherwise the epoch is bumped (a new producer id at epoch 0 once it
//   would reach 32767) and the id's transaction is empty.
//
// Simplifications: ids are never reused; two-phase commit (v6) is not
// served.

func init() { regKey(22, 0, 5, handleInitProducerID) }

func handleInitProducerID(c *Cluster, r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.InitProducerIDRequest)
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	if req.TransactionalID != nil {
		resp.ProducerID, resp.ProducerEpoch = -1, -1
		if resp.ErrorCode = c.initTransactional(r, req, resp); resp.ErrorCode != 0 {
			resp.ProducerID, resp.ProducerEpoch = -1, -1
		}
		return resp, nil
	}
	if req.ProducerID >= 0 {
		c.initAsks[1]++
	} else {
		c.initAsks[0]++
	}
	if req.ProducerID >= 0 {
		if cur, ok := c.pidEpochs[req.ProducerID]; ok && cur == req.ProducerEpoch && cur < math.MaxInt16-1 {
			c.pidEpochs[req.ProducerID] = cur + 1
			resp.ProducerID, resp.ProducerEpoch = req.ProducerID, cur+1
			return resp, nil
		}
	}
	resp.ProducerID, resp.ProducerEpoch = c.newProducerID(), 0
	return resp, nil
}

// initTransactional answers InitProducerId for a transactional id, filling
// resp's id and epoch on success. c.mu is held.
func (c *Cluster) initTransactional(r *request, req *kmsg.InitProducerIDRequest, resp *kmsg.InitProducerIDResponse) int16 {
	id := *req.TransactionalID
	if id == "" {
		return kerr.InvalidRequest.Code
	}
	if code := c.coordCheck(r.n, 22, coordTxn, id); code != 0 {
		return code
	}
	timeout := time.Duration(req.TransactionTimeoutMillis) * time.Millisecond
	if timeout <= 0 || timeout > maxTxnTimeout {
		return kerr.InvalidTransactionTimeout.Code
	}
	m := c.txns[id]
	if m == nil {
		m = &txnMeta{id: id, pid: c.newProducerID(), prevPID: -1, lastEpoch: -1, forgotten: -1, timeout: timeout}
		c.txns[id] = m
		c.initAsks[0]++
		resp.ProducerID, resp.ProducerEpoch = m.pid, m.epoch
		return c.answerApplied(m, 22, 0)
	}
	if req.ProducerID >= 0 {
		c.initAsks[1]++
	} else {
		c.initAsks[0]++
	}
	if m.state.preparing() {
		return c.countConcurrent(kerr.ConcurrentTransactions.Code)
	}
	if req.Version >= 3 && req.ProducerID >= 0 {
		switch {
		case m.state == txnOngoing && req.ProducerID == m.pid:
			// Kafka fences an ongoing transaction of the producer id
			// whatever the epoch sent.
		case req.ProducerID == m.pid && req.ProducerEpoch == m.epoch:
			// the current pair: bump below
		case m.state != txnOngoing && m.lastEpoch >= 0 && req.ProducerEpoch == m.lastEpoch &&
			(req.ProducerID == m.pid || req.ProducerID == m.prevPID && m.epoch == 0):
			// A retry of the bump that produced the current pair (or
			// moved to a new producer id).
			resp.ProducerID, resp.ProducerEpoch = m.pid, m.epoch
			return c.answerApplied(m, 22, 0)
		default:
			if m.forgotten >= 0 && req.ProducerEpoch == m.forgotten {
				c.txnStats.LoadFencedRetries++
			}
			if req.Version >= 4 {
				return kerr.ProducerFenced.Code
			}
			return kerr.InvalidProducerEpoch.Code
		}
	}
	m.timeout = timeout
	if m.state == txnOngoing {
		c.txnStats.Fenced++
		c.fence(m)
		return c.answerApplied(m, 22, c.countConcurrent(kerr.ConcurrentTransactions.Code))
	}
	c.bumpEpoch(m)
	if req.Version < 3 || req.ProducerID < 0 {
		// A new instance of the application: Kafka forgets the epoch
		// before, so the old instance's InitProducerId with it is fenced
		// and not taken as a retry.
		m.lastEpoch = -1
	}
	m.to(txnEmpty)
	m.timedOut = false
	resp.ProducerID, resp.ProducerEpoch = m.pid, m.epoch
	return c.answerApplied(m, 22, 0)
}

// newProducerID hands out a fresh producer id at epoch 0. c.mu must be
// held.
func (c *Cluster) newProducerID() int64 {
	id := c.nextPID
	c.nextPID++
	c.pidEpochs[id] = 0
	return id
}
