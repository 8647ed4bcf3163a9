package broker

import (
	"math"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// InitProducerId: v0-5
//
// Behavior:
// * Without a producer id (-1) it hands out a new id with epoch 0.
// * With an id and epoch (v3+, KIP-360) that match the latest epoch the
//   cluster handed out for that id, it answers the same id with epoch+1;
//   with a stale or unknown pair, or an exhausted epoch, a new id. Producer
//   state on partitions is untouched: the bumped epoch resets sequences at
//   its first append.
//
// Simplifications: no transactions; a transactional id is answered
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED. Ids are never reused.

func init() { regKey(22, 0, 5, handleInitProducerID) }

func handleInitProducerID(c *Cluster, r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.InitProducerIDRequest)
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	if req.TransactionalID != nil {
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
		resp.ProducerID, resp.ProducerEpoch = -1, -1
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

// newProducerID hands out a fresh producer id at epoch 0. c.mu must be
// held.
func (c *Cluster) newProducerID() int64 {
	id := c.nextPID
	c.nextPID++
	c.pidEpochs[id] = 0
	return id
}
