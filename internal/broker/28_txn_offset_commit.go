package broker

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TxnOffsetCommit: v0-5
//
// Behavior, at the group's coordinator only (NOT_COORDINATOR elsewhere),
// one code for every partition of the request:
// * The transactional id must map to the producer id
//   (INVALID_PRODUCER_ID_MAPPING) at its epoch (PRODUCER_FENCED from v3,
//   INVALID_PRODUCER_EPOCH before).
// * v3+ (KIP-447): a member id or generation names the group's current
//   generation: an unknown member is UNKNOWN_MEMBER_ID, another
//   generation ILLEGAL_GENERATION, a group instance id held by another
//   member FENCED_INSTANCE_ID. An empty member id with generation -1 is
//   not checked.
// * v5 (transaction version 2) adds the group to the transaction
//   (CONCURRENT_TRANSACTIONS while the previous one is being completed),
//   whatever the finalized transaction.version, as Kafka 4.4 does; below
//   v5 the group must have been added by AddOffsetsToTxn
//   (INVALID_TXN_STATE).
// * The offsets stay pending until the transaction's marker: committed
//   with it, discarded on abort; OffsetFetch with RequireStable answers
//   UNSTABLE_OFFSET_COMMIT for them meanwhile.
//
// Simplifications: topics are named (v6's topic ids are not served).

func init() { regKey(28, 0, 5, handleTxnOffsetCommit) }

func handleTxnOffsetCommit(c *Cluster, r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.TxnOffsetCommitRequest)
	resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	code := c.txnOffsetCommit(r, req)
	for _, qt := range req.Topics {
		rt := kmsg.NewTxnOffsetCommitResponseTopic()
		rt.Topic = qt.Topic
		for _, qp := range qt.Partitions {
			sp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
			sp.Partition, sp.ErrorCode = qp.Partition, code
			rt.Partitions = append(rt.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

func (c *Cluster) txnOffsetCommit(r *request, req *kmsg.TxnOffsetCommitRequest) int16 {
	if c.deniedTxnIDs[req.TransactionalID] {
		return kerr.TransactionalIDAuthorizationFailed.Code
	}
	if code := c.coordCheck(r.n, 28, coordGroup, req.Group); code != 0 {
		return code
	}
	if req.Group == "" {
		return kerr.InvalidGroupID.Code
	}
	m := c.txns[req.TransactionalID]
	switch {
	case m == nil || m.pid != req.ProducerID:
		return kerr.InvalidProducerIDMapping.Code
	case m.epoch != req.ProducerEpoch:
		if req.Version >= 3 {
			return kerr.ProducerFenced.Code
		}
		return kerr.InvalidProducerEpoch.Code
	}
	if req.Version >= 3 {
		if code := c.checkMember(req.Group, req.MemberID, req.Generation, req.InstanceID); code != 0 {
			return code
		}
	}
	if req.Version >= 5 {
		if m.state.preparing() {
			return c.countConcurrent(kerr.ConcurrentTransactions.Code)
		}
		c.beginTxn(m, time.Now())
		if !m.hasGroup(req.Group) {
			m.groups = append(m.groups, req.Group)
		}
	} else if m.state != txnOngoing || !m.hasGroup(req.Group) {
		return kerr.InvalidTxnState.Code
	}
	g := c.groupOf(req.Group)
	offs := g.pending[m.pid]
	if offs == nil {
		offs = make(map[topicPart]offsetEntry)
		g.pending[m.pid] = offs
	}
	for _, qt := range req.Topics {
		for _, qp := range qt.Partitions {
			offs[topicPart{qt.Topic, qp.Partition}] = offsetEntry{qp.Offset, qp.LeaderEpoch, qp.Metadata}
		}
	}
	return 0
}
