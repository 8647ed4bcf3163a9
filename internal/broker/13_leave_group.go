package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// LeaveGroup: v0-5
//
// Behavior, at the group's coordinator only (NOT_COORDINATOR elsewhere):
// removes the member (v0-2) or members (v3+, by member id or group
// instance id; UNKNOWN_MEMBER_ID for one the group does not have), and
// rebalances the members left; a group left without members is empty.

func init() { regKey(13, 0, 5, handleLeaveGroup) }

func handleLeaveGroup(c *Cluster, r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.LeaveGroupRequest)
	resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
	if code := c.coordCheck(r.n, 13, coordGroup, req.Group); code != 0 {
		resp.ErrorCode = code
		return resp, nil
	}
	g := c.groups[req.Group]
	leave := func(id string, instance *string) int16 {
		if g == nil {
			return kerr.UnknownMemberID.Code
		}
		if instance != nil {
			if iid, ok := g.instances[*instance]; ok && (id == "" || id == iid) {
				id = iid
			} else if id == "" || ok {
				return kerr.FencedInstanceID.Code
			}
		}
		if g.members[id] == nil {
			return kerr.UnknownMemberID.Code
		}
		c.removeMember(g, id)
		return 0
	}
	if req.Version <= 2 {
		resp.ErrorCode = leave(req.MemberID, nil)
	} else {
		for _, qm := range req.Members {
			rm := kmsg.NewLeaveGroupResponseMember()
			rm.MemberID, rm.InstanceID = qm.MemberID, qm.InstanceID
			rm.ErrorCode = leave(qm.MemberID, qm.InstanceID)
			resp.Members = append(resp.Members, rm)
		}
	}
	if g != nil {
		c.groupChanged(g)
	}
	return resp, nil
}
