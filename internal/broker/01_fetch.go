package broker

import (
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Fetch: v4-16
//
// Behavior:
// * Serves the stored batches (the producers' bytes with offsets and
//   leader epoch set) from the batch holding FetchOffset, at least one
//   batch per partition, then up to PartitionMaxBytes and MaxBytes.
// * Topics by name before v13, by id from v13 (UNKNOWN_TOPIC_ID).
// * Only the leader serves a partition (NOT_LEADER_OR_FOLLOWER, with the
//   KIP-951 CurrentLeader at v12+). CurrentLeaderEpoch (v9+) older than
//   ours is FENCED_LEADER_EPOCH, newer UNKNOWN_LEADER_EPOCH. An offset
//   beyond the log end is OFFSET_OUT_OF_RANGE.
// * IsolationLevel 1 (read_committed) serves only batches below the last
//   stable offset (the first offset of the earliest open transaction) and
//   lists the aborted transactions overlapping the data served
//   (AbortedTransactions: producer id, first offset), so the consumer
//   drops their records; control batches (markers) are served as they
//   are in the log. LastStableOffset is always the partition's LSO.
// * RewriteFetch's hook, if set, rewrites each answer before it is sent.
// * With fewer than MinBytes ready, waits for an append up to MaxWait,
//   capped at maxFetchWait so a test never hangs on it.
//
// Simplifications: no fetch sessions (SessionID 0 makes clients send full
// fetches), no follower fetching, high watermark = log end. The log start
// is 0 until [Cluster.DeleteRecords] moves it; below it is
// OFFSET_OUT_OF_RANGE.

func init() { regKey(1, 4, 16, handleFetch) }

// maxFetchWait caps a fetch's MaxWait; a variable so fuzzing can set 0.
var maxFetchWait = time.Second

func handleFetch(c *Cluster, r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.FetchRequest)
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	maxBytes := int(req.MaxBytes)
	if maxBytes <= 0 {
		maxBytes = 1 << 30
	}
	total := 0
	for _, qt := range req.Topics {
		rt := kmsg.NewFetchResponseTopic()
		rt.Topic, rt.TopicID = qt.Topic, qt.TopicID
		t := c.requestTopic(req.Version, qt.Topic, qt.TopicID)
		for _, qp := range qt.Partitions {
			sp := kmsg.NewFetchResponseTopicPartition()
			sp.Partition = qp.Partition
			sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = -1, -1, -1
			switch {
			case t == nil && req.Version >= 13:
				sp.ErrorCode = kerr.UnknownTopicID.Code
			case t == nil || qp.Partition < 0 || int(qp.Partition) >= len(t.parts):
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			default:
				p := t.parts[qp.Partition]
				if code := c.checkLeader(r.n, p, qp.CurrentLeaderEpoch); code != 0 {
					sp.ErrorCode = code
					if code == kerr.NotLeaderForPartition.Code && req.Version >= 12 {
						sp.CurrentLeader.LeaderID, sp.CurrentLeader.LeaderEpoch = p.leader, p.epoch
					}
					break
				}
				lso := c.lso(p)
				sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = p.next, lso, p.logStart
				if qp.FetchOffset < p.logStart || qp.FetchOffset > p.next {
					sp.ErrorCode = kerr.OffsetOutOfRange.Code
					break
				}
				end := p.next // read_uncommitted reads to the high watermark
				if req.IsolationLevel == 1 {
					end = lso
				}
				partMax := int(qp.PartitionMaxBytes)
				i := sort.Search(len(p.batches), func(i int) bool { return p.batches[i].last >= qp.FetchOffset })
				n := 0
				upper := qp.FetchOffset // end of the data served
				for ; i < len(p.batches); i++ {
					sb := p.batches[i]
					b := sb.raw
					if sb.base >= end || (n > 0 && n+len(b) > partMax) || (total > 0 && total+len(b) > maxBytes) {
						break
					}
					sp.RecordBatches = append(sp.RecordBatches, b...)
					n += len(b)
					total += len(b)
					upper = sb.last + 1
				}
				if req.IsolationLevel == 1 {
					sp.AbortedTransactions = c.abortedIn(p, qp.FetchOffset, upper)
				}
			}
			rt.Partitions = append(rt.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	if total < int(req.MinBytes) && req.MaxWaitMillis > 0 && !r.final {
		r.waitCh = c.dataWait()
		if r.waitUntil.IsZero() {
			r.waitUntil = r.readAt.Add(min(time.Duration(req.MaxWaitMillis)*time.Millisecond, maxFetchWait))
		}
		return nil, errWaitData
	}
	if c.fetchRewrite != nil {
		c.fetchRewrite(r.n.id, resp)
	}
	return resp, nil
}

// checkLeader answers whether node n may serve p to a client that believes
// the leader epoch is epoch (-1 = unknown): 0 or the error code. c.mu is
// held.
func (c *Cluster) checkLeader(n *node, p *partition, epoch int32) int16 {
	switch {
	case p.leader != n.id:
		return kerr.NotLeaderForPartition.Code
	case epoch >= 0 && epoch < p.epoch:
		return kerr.FencedLeaderEpoch.Code
	case epoch > p.epoch:
		return kerr.UnknownLeaderEpoch.Code
	}
	return 0
}

// abortedIn lists p's aborted transactions overlapping offsets
// [from, upper). c.mu is held.
func (c *Cluster) abortedIn(p *partition, from, upper int64) []kmsg.FetchResponseTopicPartitionAbortedTransaction {
	pt := c.ptxn[p]
	if pt == nil {
		return nil
	}
	var out []kmsg.FetchResponseTopicPartitionAbortedTransaction
	for _, a := range pt.aborted {
		if a.last >= from && a.first < upper {
			at := kmsg.NewFetchResponseTopicPartitionAbortedTransaction()
			at.ProducerID, at.FirstOffset = a.pid, a.first
			out = append(out, at)
		}
	}
	return out
}
