package broker

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// listOffset asks w for partition 0 of t at timestamp ts.
func listOffset(t *testing.T, w *wireClient, ts int64) kmsg.ListOffsetsResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	req.Version = 4
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = "t"
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Timestamp, rp.CurrentLeaderEpoch = ts, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return w.do(req).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
}

// fetchAt fetches partition 0 of t from offset on w (v12).
func fetchAt(w *wireClient, offset int64) kmsg.FetchResponseTopicPartition {
	f := kmsg.NewPtrFetchRequest()
	f.Version = 12
	f.MaxBytes = 1 << 20
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = "t"
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.FetchOffset, fp.PartitionMaxBytes = offset, 1<<20
	ft.Partitions = append(ft.Partitions, fp)
	f.Topics = append(f.Topics, ft)
	return w.do(f).(*kmsg.FetchResponse).Topics[0].Partitions[0]
}

// TestDeleteRecords: DeleteRecords moves the log start up, at most to the
// log end, never down, and returns it (-1 for an unknown partition);
// Fetch below it is OFFSET_OUT_OF_RANGE and every Fetch answer carries
// it; ListOffsets earliest answers it and a timestamp finds no record
// below it; Records still lists every record.
func TestDeleteRecords(t *testing.T) {
	c := startCluster(t, Config{Topics: []TopicConfig{{Name: "t", Partitions: 1}}})
	w := dialWire(t, c.Addr())
	for i := range 3 {
		require.Zero(t, produceOne(t, c, w, 9, "t", 0, batch(t, 1, 0, int32(2*i), 2)).ErrorCode)
	}
	require.Equal(t, int64(0), listOffset(t, w, -2).Offset)
	require.Equal(t, int64(3), c.DeleteRecords("t", 0, 3))
	require.Equal(t, int64(3), c.DeleteRecords("t", 0, 1), "never down")
	require.Equal(t, int64(-1), c.DeleteRecords("t", 9, 1))
	require.Equal(t, int64(-1), c.DeleteRecords("nope", 0, 1))
	require.Equal(t, int64(3), listOffset(t, w, -2).Offset)
	require.Equal(t, int64(3), listOffset(t, w, 1700000000000).Offset, "the first record at or after the timestamp, at or above the log start")
	require.Equal(t, int64(6), listOffset(t, w, -1).Offset, "latest: the log end")

	below := fetchAt(w, 2)
	require.Equal(t, kerr.OffsetOutOfRange.Code, below.ErrorCode)
	require.Equal(t, int64(3), below.LogStartOffset)
	at := fetchAt(w, 3)
	require.Zero(t, at.ErrorCode)
	require.Equal(t, int64(3), at.LogStartOffset)
	require.NotEmpty(t, at.RecordBatches, "the batch holding the log start is served")

	require.Len(t, c.Records("t", 0), 6, "every record still listed")
	require.Equal(t, int64(6), c.DeleteRecords("t", 0, 100), "at most to the log end")
}

// TestListOffsetsAheadOfProduce: a ListOffsets written on a connection
// ahead of a Produce request is handled first (one connection's requests
// in order): its latest offset does not count the batch; one written
// after does.
func TestListOffsetsAheadOfProduce(t *testing.T) {
	c := startCluster(t, Config{Topics: []TopicConfig{{Name: "t", Partitions: 1}}})
	w := dialWire(t, c.Addr())
	lo := func() *kmsg.ListOffsetsRequest {
		req := kmsg.NewPtrListOffsetsRequest()
		req.Version = 4
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = "t"
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Timestamp, rp.CurrentLeaderEpoch = -1, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return req
	}
	w.send(lo())
	w.send(produceReq(c, 9, "t", 0, batch(t, 1, 0, 0, 2)))
	w.send(lo())
	require.Equal(t, int64(0), w.recv().(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0].Offset)
	require.Zero(t, partResp(t, w.recv()).ErrorCode)
	require.Equal(t, int64(2), w.recv().(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0].Offset)
}

// TestListOffsetsVersionWithProduceCap: a node whose Produce cap is below
// v7 offers ListOffsets up to v3; at v7 the full range. RewriteListOffsets
// rewrites the answers.
func TestListOffsetsVersionWithProduceCap(t *testing.T) {
	c := startCluster(t, Config{Nodes: 2, ProduceMaxVersions: map[int32]int16{0: 6, 1: 7}, Topics: []TopicConfig{{Name: "t", Partitions: 1}}})
	for nd, want := range map[int]int16{0: 3, 1: apis[2].max} {
		w := dialWire(t, c.Addrs()[nd])
		req := kmsg.NewPtrApiVersionsRequest()
		req.Version = 3
		got := int16(-1)
		for _, k := range w.do(req).(*kmsg.ApiVersionsResponse).ApiKeys {
			if k.ApiKey == 2 {
				got = k.MaxVersion
			}
		}
		require.Equal(t, want, got, "node %d", nd)
	}
	c = startCluster(t, Config{Topics: []TopicConfig{{Name: "t", Partitions: 1}}})
	c.RewriteListOffsets(func(_ int32, r *kmsg.ListOffsetsResponse) {
		r.Topics[0].Partitions[0].ErrorCode = kerr.TopicAuthorizationFailed.Code
	})
	require.Equal(t, kerr.TopicAuthorizationFailed.Code, listOffset(t, dialWire(t, c.Addr()), -1).ErrorCode)
}
