package broker

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// latestOffset asks w for the latest offset (timestamp -1) of partition 0
// of t at isolation level iso (0 read_uncommitted, 1 read_committed).
func latestOffset(t *testing.T, w *wireClient, iso int8) int64 {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	req.Version = 4
	req.IsolationLevel = iso
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = "t"
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Timestamp, rp.CurrentLeaderEpoch = -1, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	sp := w.do(req).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
	wantCode(t, "ListOffsets", sp.ErrorCode, nil)
	return sp.Offset
}

// TestTxnListOffsetsReadCommitted: while a transaction is open on a
// partition, ListOffsets' latest offset is the high watermark (the log
// end) under read_uncommitted and the last stable offset (the open
// transaction's first offset) under read_committed; once the transaction
// is committed, or aborted, and its marker written, both are the log end.
func TestTxnListOffsetsReadCommitted(t *testing.T) {
	c := startCluster(t, Config{Topics: []TopicConfig{{Name: "t", Partitions: 1}}})
	c.SetMarkerDelay(0)
	w := dialWire(t, c.Addr())

	// A committed transaction first: records 0-1, its marker at 2.
	a := newTxnWire(t, c, "a")
	pid, epoch := a.mustInit()
	wantCode(t, "produce a", a.produce(12, 0, pid, epoch, 0, 2).ErrorCode, nil)
	wantCode(t, "commit a", a.end(5, pid, epoch, true).ErrorCode, nil)
	waitState(t, c, "a", "CompleteCommit")
	require.Equal(t, int64(3), latestOffset(t, w, 0))
	require.Equal(t, int64(3), latestOffset(t, w, 1), "no transaction open: the last stable offset is the log end")

	for _, commit := range []bool{true, false} {
		b := newTxnWire(t, c, "b")
		pid, epoch := b.mustInit()
		first := c.LogEndOffset("t", 0)
		wantCode(t, "produce b", b.produce(12, 0, pid, epoch, 0, 3).ErrorCode, nil)
		hw := c.LogEndOffset("t", 0)
		require.Equal(t, first+3, hw)
		require.Equal(t, first, c.LastStableOffset("t", 0))
		require.Equal(t, hw, latestOffset(t, w, 0), "read_uncommitted, transaction open: the high watermark")
		require.Equal(t, first, latestOffset(t, w, 1), "read_committed, transaction open: the last stable offset")

		end := b.end(5, pid, epoch, commit)
		wantCode(t, "end b", end.ErrorCode, nil)
		if commit {
			waitState(t, c, "b", "CompleteCommit")
		} else {
			waitState(t, c, "b", "CompleteAbort")
		}
		require.Equal(t, hw+1, c.LogEndOffset("t", 0), "the marker")
		require.Equal(t, hw+1, latestOffset(t, w, 0), "read_uncommitted, commit=%v", commit)
		require.Equal(t, hw+1, latestOffset(t, w, 1), "read_committed once the transaction ended, commit=%v", commit)
	}
}
