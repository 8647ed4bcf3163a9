package broker

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// AddPartitionsToTxn: v0-5
//
// Behavior (Kafka's TransactionCoordinator.handleAddPartitionsToTransaction),
// at the transactional id's coordinator only (NOT_COORDINATOR on every
// partition elsewhere):
// * An unknown transactional id, or another producer id, is
//   INVALID_PRODUCER_ID_MAPPING; another epoch PRODUCER_FENCED
//   (INVALID_PRODUCER_EPOCH below v2); a transaction whose markers are
//   pending CONCURRENT_TRANSACTIONS. The code is given to every partition.
// * An unknown partition is UNKNOWN_TOPIC_OR_PARTITION and the others of
//   the request OPERATION_NOT_ATTEMPTED.
// * Otherwise the partitions join the transaction, which becomes ongoing
//   (its timeout starts with its first partition).
// * v4+ (broker to coordinator, KIP-890) carries several transactions;
//   VerifyOnly answers, per partition, whether it is in the ongoing
//   transaction (INVALID_TXN_STATE if not) without adding it.

func init() { regKey(24, 0, 5, handleAddPartitionsToTxn) }

// txnCheck validates a coordinator request's producer id and epoch for
// transactional id id (AddPartitionsToTxn, AddOffsetsToTxn,
// TxnOffsetCommit): 0 and the state, or the error code. fencedV is the
// first request version answering PRODUCER_FENCED. c.mu is held.
func (c *Cluster) txnCheck(id string, pid int64, epoch int16, version, fencedV int16) (*txnMeta, int16) {
	m := c.txns[id]
	switch {
	case m == nil || m.pid != pid:
		return nil, kerr.InvalidProducerIDMapping.Code
	case m.epoch != epoch:
		if version >= fencedV {
			return nil, kerr.ProducerFenced.Code
		}
		return nil, kerr.InvalidProducerEpoch.Code
	case m.state.preparing():
		return nil, c.countConcurrent(kerr.ConcurrentTransactions.Code)
	}
	return m, 0
}

type addTopic struct {
	name  string
	parts []int32
}

func handleAddPartitionsToTxn(c *Cluster, r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.AddPartitionsToTxnRequest)
	resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	now := time.Now()
	if req.Version <= 3 {
		topics := make([]addTopic, 0, len(req.Topics))
		for _, t := range req.Topics {
			topics = append(topics, addTopic{t.Topic, t.Partitions})
		}
		for _, rt := range c.addPartitions(r, req.TransactionalID, req.ProducerID, req.ProducerEpoch, false, topics, now) {
			t := kmsg.NewAddPartitionsToTxnResponseTopic()
			t.Topic = rt.name
			for i, p := range rt.parts {
				sp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
				sp.Partition, sp.ErrorCode = p, rt.codes[i]
				t.Partitions = append(t.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, t)
		}
		return resp, nil
	}
	for _, tx := range req.Transactions {
		topics := make([]addTopic, 0, len(tx.Topics))
		for _, t := range tx.Topics {
			topics = append(topics, addTopic{t.Topic, t.Partitions})
		}
		rtx := kmsg.NewAddPartitionsToTxnResponseTransaction()
		rtx.TransactionalID = tx.TransactionalID
		for _, rt := range c.addPartitions(r, tx.TransactionalID, tx.ProducerID, tx.ProducerEpoch, tx.VerifyOnly, topics, now) {
			t := kmsg.NewAddPartitionsToTxnResponseTransactionTopic()
			t.Topic = rt.name
			for i, p := range rt.parts {
				sp := kmsg.NewAddPartitionsToTxnResponseTransactionTopicPartition()
				sp.Partition, sp.ErrorCode = p, rt.codes[i]
				t.Partitions = append(t.Partitions, sp)
			}
			rtx.Topics = append(rtx.Topics, t)
		}
		resp.Transactions = append(resp.Transactions, rtx)
	}
	return resp, nil
}

type addResult struct {
	name  string
	parts []int32
	codes []int16
}

// addPartitions adds (or, verifyOnly, checks) the partitions of topics to
// id's transaction and returns a code per partition. c.mu is held.
func (c *Cluster) addPartitions(r *request, id string, pid int64, epoch int16, verifyOnly bool, topics []addTopic, now time.Time) []addResult {
	out := make([]addResult, len(topics))
	all := func(code int16) []addResult {
		for i, t := range topics {
			out[i] = addResult{t.name, t.parts, make([]int16, len(t.parts))}
			for j := range t.parts {
				out[i].codes[j] = code
			}
		}
		return out
	}
	if code := c.coordCheck(r.n, 24, coordTxn, id); code != 0 {
		return all(code)
	}
	m, code := c.txnCheck(id, pid, epoch, r.version, 2)
	if code != 0 {
		return all(code)
	}
	var parts []*partition
	unknown := false
	for _, t := range topics {
		for _, p := range t.parts {
			if q := c.partition(t.name, p); q != nil {
				parts = append(parts, q)
			} else {
				unknown = true
			}
		}
	}
	if unknown {
		all(kerr.OperationNotAttempted.Code)
		for i, t := range topics {
			for j, p := range t.parts {
				if c.partition(t.name, p) == nil {
					out[i].codes[j] = kerr.UnknownTopicOrPartition.Code
				}
			}
		}
		return out
	}
	if verifyOnly {
		all(0)
		for i, t := range topics {
			for j, p := range t.parts {
				if m.state != txnOngoing || !m.hasPartition(c.partition(t.name, p)) {
					out[i].codes[j] = kerr.InvalidTxnState.Code
				}
			}
		}
		return out
	}
	c.beginTxn(m, now)
	for _, p := range parts {
		if !m.hasPartition(p) {
			m.parts = append(m.parts, p)
		}
	}
	return all(0)
}
