package broker

import (
	"bytes"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// SyncGroup: v0-5
//
// Behavior, at the group's coordinator only (NOT_COORDINATOR elsewhere):
// an unknown group or member is UNKNOWN_MEMBER_ID, another generation
// ILLEGAL_GENERATION, a group rebalancing REBALANCE_IN_PROGRESS. The
// leader's request hands out the assignments; every member's answer
// (waiting for the leader's, up to its rebalance timeout) carries its
// own, and from v5 the protocol type and name.

func init() { regKey(14, 0, 5, handleSyncGroup) }

type syncWait struct {
	g   *group
	id  string
	gen int32
}

func handleSyncGroup(c *Cluster, r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.SyncGroupRequest)
	resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
	if sw, ok := r.wait.(*syncWait); ok {
		return c.syncAnswer(r, sw, resp)
	}
	fail := func(code int16) (kmsg.Response, error) {
		resp.ErrorCode = code
		return resp, nil
	}
	if code := c.coordCheck(r.n, 14, coordGroup, req.Group); code != 0 {
		return fail(code)
	}
	g := c.groups[req.Group]
	if g == nil || g.members[req.MemberID] == nil {
		return fail(kerr.UnknownMemberID.Code)
	}
	m := g.members[req.MemberID]
	switch {
	case req.Generation != g.generation:
		return fail(kerr.IllegalGeneration.Code)
	case g.state == groupPreparingRebalance:
		return fail(kerr.RebalanceInProgress.Code)
	}
	m.lastSeen = time.Now()
	if g.state == groupCompletingRebalance && req.MemberID == g.leader {
		for _, a := range req.GroupAssignment {
			if mm := g.members[a.MemberID]; mm != nil {
				// A copy: the request frame is read over by the connection's next request.
				mm.assignment = bytes.Clone(a.MemberAssignment)
			}
		}
		for _, mm := range g.members {
			if mm.assignment == nil {
				mm.assignment = []byte{}
			}
		}
		g.setState(groupStable)
	}
	sw := &syncWait{g: g, id: req.MemberID, gen: g.generation}
	r.wait = sw
	r.waitUntil = time.Now().Add(min(m.rebalanceTimeout+time.Second, maxGroupWait))
	return c.syncAnswer(r, sw, resp)
}

// syncAnswer answers a SyncGroup once the leader's assignment is in.
// c.mu is held.
func (c *Cluster) syncAnswer(r *request, sw *syncWait, resp *kmsg.SyncGroupResponse) (kmsg.Response, error) {
	g := sw.g
	m := g.members[sw.id]
	switch {
	case m == nil:
		resp.ErrorCode = kerr.UnknownMemberID.Code
	case g.generation != sw.gen || g.state == groupPreparingRebalance:
		resp.ErrorCode = kerr.RebalanceInProgress.Code
	case g.state == groupCompletingRebalance:
		if r.final {
			resp.ErrorCode = kerr.RebalanceInProgress.Code
			break
		}
		r.waitCh = g.changed
		return nil, errWaitData
	default:
		resp.MemberAssignment = m.assignment
		resp.ProtocolType, resp.Protocol = kmsg.StringPtr(g.protocolType), kmsg.StringPtr(g.protocol)
	}
	return resp, nil
}
