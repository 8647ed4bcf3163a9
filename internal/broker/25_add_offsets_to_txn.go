package broker

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// AddOffsetsToTxn: v0-4
//
// Behavior: at the transactional id's coordinator (NOT_COORDINATOR
// elsewhere), with AddPartitionsToTxn's producer checks (PRODUCER_FENCED
// from v2), adds the group's __consumer_offsets partition to the
// transaction, which becomes ongoing: offsets the group coordinator then
// takes by TxnOffsetCommit are committed or discarded with it. An empty
// group id is INVALID_GROUP_ID.

func init() { regKey(25, 0, 4, handleAddOffsetsToTxn) }

func handleAddOffsetsToTxn(c *Cluster, r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.AddOffsetsToTxnRequest)
	resp := req.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
	if code := c.coordCheck(r.n, 25, coordTxn, req.TransactionalID); code != 0 {
		resp.ErrorCode = code
		return resp, nil
	}
	if req.Group == "" {
		resp.ErrorCode = kerr.InvalidGroupID.Code
		return resp, nil
	}
	m, code := c.txnCheck(req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Version, 2)
	if code != 0 {
		resp.ErrorCode = code
		return resp, nil
	}
	c.beginTxn(m, time.Now())
	if !m.hasGroup(req.Group) {
		m.groups = append(m.groups, req.Group)
	}
	return resp, nil
}
