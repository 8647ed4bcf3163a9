package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ListOffsets: v1-8
//
// Behavior:
// * Timestamp -2 is the earliest offset (the log start, 0 until
//   [Cluster.DeleteRecords] moves it), -1 the latest (log end, which is
//   the high watermark here), -3 (v7+) the record with the largest
//   timestamp; any other timestamp finds the first record at or after it
//   (offset -1 if none), at or above the log start.
// * Leader and CurrentLeaderEpoch (v4+) are checked as in Fetch.
//
// * A node with a Produce cap below v7 (Config.ProduceMaxVersions: Kafka
//   2.0 and before) offers ListOffsets up to v3, without
//   CurrentLeaderEpoch.
// * RewriteListOffsets's hook, if set, rewrites each answer before it is
//   sent.
//
// * IsolationLevel 1 (read_committed, v2+) answers the latest offset (-1)
//   with the last stable offset.
//
// Simplifications: no tiered storage timestamps (-4, -5 answer like -2).

func init() { regKey(2, 1, 8, handleListOffsets) }

func handleListOffsets(c *Cluster, r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.ListOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	for _, qt := range req.Topics {
		rt := kmsg.NewListOffsetsResponseTopic()
		rt.Topic = qt.Topic
		t := c.topics[qt.Topic]
		for _, qp := range qt.Partitions {
			sp := kmsg.NewListOffsetsResponseTopicPartition()
			sp.Partition = qp.Partition
			sp.Offset, sp.Timestamp, sp.LeaderEpoch = -1, -1, -1
			if t == nil || qp.Partition < 0 || int(qp.Partition) >= len(t.parts) {
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				rt.Partitions = append(rt.Partitions, sp)
				continue
			}
			p := t.parts[qp.Partition]
			if code := c.checkLeader(r.n, p, qp.CurrentLeaderEpoch); code != 0 {
				sp.ErrorCode = code
				rt.Partitions = append(rt.Partitions, sp)
				continue
			}
			sp.LeaderEpoch = p.epoch
			switch ts := qp.Timestamp; {
			case ts == -1 && req.IsolationLevel == 1:
				sp.Offset = c.lso(p)
			case ts == -1:
				sp.Offset = p.next
			case ts == -3:
				recs := p.logRecords()
				best := -1
				for i, rec := range recs {
					if best < 0 || rec.Timestamp > recs[best].Timestamp {
						best = i
					}
				}
				if best >= 0 {
					sp.Offset, sp.Timestamp = recs[best].Offset, recs[best].Timestamp
				}
			case ts < 0:
				sp.Offset = p.logStart
			default:
				for _, rec := range p.logRecords() {
					if rec.Offset >= p.logStart && rec.Timestamp >= ts {
						sp.Offset, sp.Timestamp = rec.Offset, rec.Timestamp
						break
					}
				}
			}
			rt.Partitions = append(rt.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	if c.listRewrite != nil {
		c.listRewrite(r.n.id, resp)
	}
	return resp, nil
}
