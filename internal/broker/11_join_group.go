package broker

import (
	"bytes"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// JoinGroup: v0-9
//
// Behavior (the classic group protocol), at the group's coordinator only
// (NOT_COORDINATOR elsewhere):
// * An empty group id is INVALID_GROUP_ID; no protocols, or a protocol
//   type other than the group's, INCONSISTENT_GROUP_PROTOCOL; a session
//   or rebalance timeout outside 1 ms..30 min INVALID_SESSION_TIMEOUT.
// * v4+ without a member id (and without a group instance id) answers
//   MEMBER_ID_REQUIRED with the id to join with; an unknown member id is
//   UNKNOWN_MEMBER_ID. A group instance id (v5+, KIP-345) joining again
//   takes over its old member.
// * A join starts a rebalance: the answer waits until every member joined
//   again or the largest rebalance timeout passed (members that did not
//   join are removed); a group's first rebalance waits 50 ms
//   (group.initial.rebalance.delay.ms) for more members. The generation
//   then grows, the leader (the old one if it joined, else the smallest
//   member id) gets every member's metadata, and the protocol is the
//   leader's first one every member supports.
// * A member not heard from (JoinGroup, SyncGroup, Heartbeat, a commit)
//   for its session timeout is removed and the group rebalances.
//
// Simplifications: a known member joining with unchanged metadata still
// rebalances the group; KIP-848 consumer groups are not served.

func init() { regKey(11, 0, 9, handleJoinGroup) }

// maxGroupWait caps how long JoinGroup and SyncGroup wait; a variable so
// fuzzing can set 0.
var maxGroupWait = 30 * time.Minute

// joinWait is a JoinGroup waiting for its rebalance.
type joinWait struct {
	g   *group
	id  string
	gen int32 // the generation when it joined
}

func handleJoinGroup(c *Cluster, r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.JoinGroupRequest)
	resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
	resp.Generation = -1
	if jw, ok := r.wait.(*joinWait); ok {
		return c.joinAnswer(r, jw, resp)
	}
	fail := func(code int16) (kmsg.Response, error) {
		resp.ErrorCode = code
		return resp, nil
	}
	if code := c.coordCheck(r.n, 11, coordGroup, req.Group); code != 0 {
		return fail(code)
	}
	if req.Group == "" {
		return fail(kerr.InvalidGroupID.Code)
	}
	session := time.Duration(req.SessionTimeoutMillis) * time.Millisecond
	rebalance := session
	if req.Version >= 1 {
		rebalance = time.Duration(req.RebalanceTimeoutMillis) * time.Millisecond
	}
	if session <= 0 || session > 30*time.Minute || rebalance <= 0 || rebalance > 30*time.Minute {
		return fail(kerr.InvalidSessionTimeout.Code)
	}
	g := c.groupOf(req.Group)
	if len(req.Protocols) == 0 || req.ProtocolType == "" || len(g.members) > 0 && g.protocolType != req.ProtocolType {
		return fail(kerr.InconsistentGroupProtocol.Code)
	}
	id := req.MemberID
	if req.InstanceID != nil {
		if old, ok := g.instances[*req.InstanceID]; ok && id != "" && id != old {
			return fail(kerr.FencedInstanceID.Code)
		}
	}
	if id == "" {
		id = g.newMemberID(r.clientID)
		if req.InstanceID != nil {
			if old, ok := g.instances[*req.InstanceID]; ok {
				c.removeMember(g, old) // the new instance takes over
			}
		} else if req.Version >= 4 {
			g.pendingIDs[id] = struct{}{}
			resp.MemberID = id
			return fail(kerr.MemberIDRequired.Code)
		}
	} else if _, pending := g.pendingIDs[id]; !pending && g.members[id] == nil {
		return fail(kerr.UnknownMemberID.Code)
	}
	delete(g.pendingIDs, id)
	now := time.Now()
	c.rebalance(g, now)
	m := g.members[id]
	if m == nil {
		m = &member{id: id}
		g.members[id] = m
	}
	m.instanceID, m.clientID = req.InstanceID, r.clientID
	m.sessionTimeout, m.rebalanceTimeout = session, rebalance
	m.protocols = m.protocols[:0]
	for _, p := range req.Protocols {
		// A copy: the request frame is read over by the connection's next request.
		m.protocols = append(m.protocols, memberProtocol{p.Name, bytes.Clone(p.Metadata)})
	}
	m.joined, m.lastSeen = true, now
	if req.InstanceID != nil {
		g.instances[*req.InstanceID] = id
	}
	g.protocolType = req.ProtocolType
	c.watchSession(g, m)
	jw := &joinWait{g: g, id: id, gen: g.generation}
	c.maybeCompleteJoin(g, now)
	r.wait = jw
	r.waitUntil = now.Add(min(rebalance+time.Second, maxGroupWait))
	return c.joinAnswer(r, jw, resp)
}

// joinAnswer answers a JoinGroup whose member joined, or asks to wait for
// the end of its rebalance. c.mu is held.
func (c *Cluster) joinAnswer(r *request, jw *joinWait, resp *kmsg.JoinGroupResponse) (kmsg.Response, error) {
	g := jw.g
	m := g.members[jw.id]
	resp.MemberID = jw.id
	switch {
	case m == nil:
		resp.ErrorCode = kerr.UnknownMemberID.Code
		return resp, nil
	case g.generation == jw.gen:
		if r.final {
			resp.ErrorCode = kerr.RebalanceInProgress.Code
			return resp, nil
		}
		r.waitCh = g.changed
		return nil, errWaitData
	}
	m.lastSeen = time.Now()
	resp.Generation = g.generation
	resp.Protocol = kmsg.StringPtr(g.protocol)
	resp.ProtocolType = kmsg.StringPtr(g.protocolType)
	resp.LeaderID = g.leader
	if jw.id == g.leader {
		for _, mm := range g.members {
			rm := kmsg.NewJoinGroupResponseMember()
			rm.MemberID, rm.InstanceID = mm.id, mm.instanceID
			for _, p := range mm.protocols {
				if p.name == g.protocol {
					rm.ProtocolMetadata = p.metadata
				}
			}
			resp.Members = append(resp.Members, rm)
		}
	}
	return resp, nil
}
