package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// FindCoordinator: v0-6
//
// Behavior:
// * Key type 0 finds a group's coordinator, 1 a transactional id's: the
//   leader of partition abs(hashCode(key)) % 50 of __consumer_offsets or
//   __transaction_state, as Kafka computes it (Java's String.hashCode).
//   Those partitions are led round-robin by the nodes until
//   [Cluster.MoveCoordinator] moves one.
// * v4+ answers a batch of keys (KIP-699), each with its own error.
// * An empty key is INVALID_REQUEST, another key type INVALID_REQUEST.
// * [Cluster.InjectCoordinatorError] with API key 10 answers its code
//   (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE,
//   COORDINATOR_LOAD_IN_PROGRESS, ...) for the next keys looked up.
//
// Simplifications: the internal topics do not exist as topics; share
// groups (key type 2) are not served.

func init() { regKey(10, 0, 6, handleFindCoordinator) }

func handleFindCoordinator(c *Cluster, r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.FindCoordinatorRequest)
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	find := func(key string) kmsg.FindCoordinatorResponseCoordinator {
		co := kmsg.NewFindCoordinatorResponseCoordinator()
		co.Key = key
		co.NodeID, co.Port = -1, -1
		switch {
		case req.CoordinatorType != coordGroup && req.CoordinatorType != coordTxn:
			co.ErrorCode = kerr.InvalidRequest.Code
		case key == "":
			co.ErrorCode = kerr.InvalidRequest.Code
		default:
			if code := c.takeCoordFault(10); code != 0 {
				co.ErrorCode = code
				break
			}
			n := c.nodes[c.coordinator(req.CoordinatorType, key)]
			co.NodeID = n.id
			co.Host, co.Port = n.hostPort()
		}
		return co
	}
	if req.Version >= 4 {
		for _, k := range req.CoordinatorKeys {
			resp.Coordinators = append(resp.Coordinators, find(k))
		}
		return resp, nil
	}
	co := find(req.CoordinatorKey)
	resp.ErrorCode, resp.NodeID, resp.Host, resp.Port = co.ErrorCode, co.NodeID, co.Host, co.Port
	return resp, nil
}
