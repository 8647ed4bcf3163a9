package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// OffsetCommit: v0-9
//
// Behavior, at the group's coordinator only (NOT_COORDINATOR elsewhere),
// one code for every partition of the request: an empty group id is
// INVALID_GROUP_ID; a member id or generation (v1+) must name the group's
// current generation, as for TxnOffsetCommit (UNKNOWN_MEMBER_ID,
// ILLEGAL_GENERATION, FENCED_INSTANCE_ID), and a group waiting for its
// leader's assignment answers REBALANCE_IN_PROGRESS. An empty member id
// with generation -1 commits outside any generation. Offsets are committed
// at once.
//
// Simplifications: retention is not enforced; v10's topic ids are not
// served.

func init() { regKey(8, 0, 9, handleOffsetCommit) }

func handleOffsetCommit(c *Cluster, r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.OffsetCommitRequest)
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	code := c.offsetCommit(r, req)
	for _, qt := range req.Topics {
		rt := kmsg.NewOffsetCommitResponseTopic()
		rt.Topic = qt.Topic
		for _, qp := range qt.Partitions {
			sp := kmsg.NewOffsetCommitResponseTopicPartition()
			sp.Partition, sp.ErrorCode = qp.Partition, code
			rt.Partitions = append(rt.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

func (c *Cluster) offsetCommit(r *request, req *kmsg.OffsetCommitRequest) int16 {
	if code := c.coordCheck(r.n, 8, coordGroup, req.Group); code != 0 {
		return code
	}
	if req.Group == "" {
		return kerr.InvalidGroupID.Code
	}
	gen, id := req.Generation, req.MemberID
	if req.Version == 0 {
		gen = -1
	}
	if code := c.checkMember(req.Group, id, gen, req.InstanceID); code != 0 {
		return code
	}
	g := c.groupOf(req.Group)
	if id != "" && g.state == groupCompletingRebalance {
		return kerr.RebalanceInProgress.Code
	}
	for _, qt := range req.Topics {
		for _, qp := range qt.Partitions {
			g.committed[topicPart{qt.Topic, qp.Partition}] = offsetEntry{qp.Offset, qp.LeaderEpoch, qp.Metadata}
		}
	}
	return 0
}
