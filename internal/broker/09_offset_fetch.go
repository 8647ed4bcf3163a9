package broker

import (
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// OffsetFetch: v0-9
//
// Behavior, at the group's coordinator only (NOT_COORDINATOR elsewhere):
// * Answers each asked partition's committed offset, -1 for none; no
//   topics (v2+) asks for every committed offset of the group.
// * RequireStable (v7+, KIP-447): a partition with an offset a
//   transaction committed but whose marker is not written yet answers
//   UNSTABLE_OFFSET_COMMIT. Without it the last settled offset is
//   answered.
// * v8+ answers several groups.
//
// Simplifications: topics are named (v10's topic ids are not served);
// v9's member id and epoch (consumer groups of KIP-848) are not checked.

func init() { regKey(9, 0, 9, handleOffsetFetch) }

func handleOffsetFetch(c *Cluster, r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.OffsetFetchRequest)
	resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
	if req.Version >= 8 {
		for _, qg := range req.Groups {
			rg := kmsg.NewOffsetFetchResponseGroup()
			rg.Group = qg.Group
			var topics []kmsg.OffsetFetchRequestTopic
			for _, t := range qg.Topics {
				topics = append(topics, kmsg.OffsetFetchRequestTopic{Topic: t.Topic, Partitions: t.Partitions})
			}
			code, rts := c.offsetFetch(r, qg.Group, topics, qg.Topics == nil, req.RequireStable)
			rg.ErrorCode = code
			for _, rt := range rts {
				gt := kmsg.NewOffsetFetchResponseGroupTopic()
				gt.Topic = rt.Topic
				for _, p := range rt.Partitions {
					gp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
					gp.Partition, gp.Offset, gp.LeaderEpoch, gp.Metadata, gp.ErrorCode = p.Partition, p.Offset, p.LeaderEpoch, p.Metadata, p.ErrorCode
					gt.Partitions = append(gt.Partitions, gp)
				}
				rg.Topics = append(rg.Topics, gt)
			}
			resp.Groups = append(resp.Groups, rg)
		}
		return resp, nil
	}
	code, rts := c.offsetFetch(r, req.Group, req.Topics, req.Topics == nil && req.Version >= 2, req.RequireStable)
	resp.Topics = rts
	if req.Version >= 2 {
		resp.ErrorCode = code
	} else if code != 0 {
		for i := range resp.Topics {
			for j := range resp.Topics[i].Partitions {
				resp.Topics[i].Partitions[j].ErrorCode = code
			}
		}
	}
	return resp, nil
}

// offsetFetch answers one group's part of an OffsetFetch: a group-level
// code and the topics. c.mu is held.
func (c *Cluster) offsetFetch(r *request, name string, topics []kmsg.OffsetFetchRequestTopic, all, requireStable bool) (int16, []kmsg.OffsetFetchResponseTopic) {
	code := c.coordCheck(r.n, 9, coordGroup, name)
	g := c.groups[name]
	if all && code == 0 && g != nil {
		byTopic := map[string][]int32{}
		for tp := range g.committed {
			byTopic[tp.topic] = append(byTopic[tp.topic], tp.part)
		}
		for t, ps := range byTopic {
			sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
			topics = append(topics, kmsg.OffsetFetchRequestTopic{Topic: t, Partitions: ps})
		}
		sort.Slice(topics, func(i, j int) bool { return topics[i].Topic < topics[j].Topic })
	}
	var out []kmsg.OffsetFetchResponseTopic
	for _, qt := range topics {
		rt := kmsg.NewOffsetFetchResponseTopic()
		rt.Topic = qt.Topic
		for _, p := range qt.Partitions {
			sp := kmsg.NewOffsetFetchResponseTopicPartition()
			sp.Partition, sp.Offset, sp.LeaderEpoch = p, -1, -1
			if code == 0 && g != nil {
				tp := topicPart{qt.Topic, p}
				if requireStable && g.unstable(tp) {
					sp.ErrorCode = kerr.UnstableOffsetCommit.Code
				} else if e, ok := g.committed[tp]; ok {
					sp.Offset, sp.LeaderEpoch, sp.Metadata = e.offset, e.leaderEpoch, e.metadata
				}
			}
			rt.Partitions = append(rt.Partitions, sp)
		}
		out = append(out, rt)
	}
	return code, out
}
