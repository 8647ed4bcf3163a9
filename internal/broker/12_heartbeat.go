package broker

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Heartbeat: v0-4
//
// Behavior, at the group's coordinator only (NOT_COORDINATOR elsewhere):
// an unknown group or member is UNKNOWN_MEMBER_ID, a group instance id
// held by another member FENCED_INSTANCE_ID, another generation
// ILLEGAL_GENERATION, a group collecting joins REBALANCE_IN_PROGRESS (the
// member must join again); otherwise the member's session is renewed.

func init() { regKey(12, 0, 4, handleHeartbeat) }

func handleHeartbeat(c *Cluster, r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.HeartbeatRequest)
	resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
	resp.ErrorCode = c.heartbeat(r, req)
	return resp, nil
}

func (c *Cluster) heartbeat(r *request, req *kmsg.HeartbeatRequest) int16 {
	if code := c.coordCheck(r.n, 12, coordGroup, req.Group); code != 0 {
		return code
	}
	g := c.groups[req.Group]
	if g == nil || g.members[req.MemberID] == nil {
		return kerr.UnknownMemberID.Code
	}
	if req.InstanceID != nil {
		if id, ok := g.instances[*req.InstanceID]; ok && id != req.MemberID {
			return kerr.FencedInstanceID.Code
		}
	}
	m := g.members[req.MemberID]
	m.lastSeen = time.Now()
	c.watchSession(g, m)
	switch {
	case req.Generation != g.generation:
		return kerr.IllegalGeneration.Code
	case g.state == groupPreparingRebalance:
		return kerr.RebalanceInProgress.Code
	}
	return 0
}
