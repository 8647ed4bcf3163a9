package broker

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Topology changes an operator makes (issue 20): DeleteTopics and
// CreatePartitions on the wire and as Cluster methods.

func deleteTopicsReq(version int16, names ...string) *kmsg.DeleteTopicsRequest {
	req := kmsg.NewPtrDeleteTopicsRequest()
	req.Version = version
	for _, n := range names {
		if version < 6 {
			req.TopicNames = append(req.TopicNames, n)
			continue
		}
		rt := kmsg.NewDeleteTopicsRequestTopic()
		rt.Topic = kmsg.StringPtr(n)
		req.Topics = append(req.Topics, rt)
	}
	return req
}

func TestDeleteTopicsRemovesTopicAndRecreationGetsNewID(t *testing.T) {
	for _, version := range []int16{0, 4, 5, 6} {
		t.Run(fmt.Sprintf("v%d", version), func(t *testing.T) {
			c := startCluster(t, Config{Topics: []TopicConfig{{Name: "t", Partitions: 2}}})
			w := dialWire(t, c.Addr())
			oldID := c.topicID("t")
			require.Zero(t, produceOne(t, c, w, 13, "t", 0, batch(t, 7, 0, 0, 3)).ErrorCode)
			oldReq := produceReq(c, 13, "t", 0, batch(t, 7, 0, 3, 1)) // names the old id

			resp := w.do(deleteTopicsReq(version, "t", "nope")).(*kmsg.DeleteTopicsResponse)
			require.Len(t, resp.Topics, 2)
			require.Zero(t, resp.Topics[0].ErrorCode)
			require.Equal(t, kerr.UnknownTopicOrPartition.Code, resp.Topics[1].ErrorCode)
			if version >= 6 {
				require.Equal(t, oldID, resp.Topics[0].TopicID)
			}
			if version >= 5 {
				require.NotNil(t, resp.Topics[1].ErrorMessage)
			}
			_, ok := c.TopicID("t")
			require.False(t, ok, "deleted topic still listed")
			require.Equal(t, kerr.UnknownTopicID.Code, partResp(t, w.do(oldReq)).ErrorCode, "produce to the deleted id")

			require.NoError(t, c.CreateTopic(TopicConfig{Name: "t", Partitions: 1}))
			newID, ok := c.TopicID("t")
			require.True(t, ok)
			require.NotEqual(t, oldID, newID, "a re-created topic gets a new id")
			require.Equal(t, kerr.UnknownTopicID.Code, partResp(t, w.do(oldReq)).ErrorCode, "the old id stays unknown")
			// A new log: no producer state, any first sequence accepted.
			sp := produceOne(t, c, w, 13, "t", 0, batch(t, 7, 0, 3, 1))
			require.Zero(t, sp.ErrorCode)
			require.Zero(t, sp.BaseOffset)
			require.Len(t, c.Records("t", 0), 1)
		})
	}
}

func TestDeleteTopicsByID(t *testing.T) {
	c := startCluster(t, Config{Topics: []TopicConfig{{Name: "t", Partitions: 1}}})
	w := dialWire(t, c.Addr())
	id := c.topicID("t")
	req := kmsg.NewPtrDeleteTopicsRequest()
	req.Version = 6
	both := kmsg.NewDeleteTopicsRequestTopic()
	both.Topic, both.TopicID = kmsg.StringPtr("t"), id
	unknown := kmsg.NewDeleteTopicsRequestTopic()
	unknown.TopicID = uuid{1}
	byID := kmsg.NewDeleteTopicsRequestTopic()
	byID.TopicID = id
	req.Topics = append(req.Topics, both, unknown, byID)
	resp := w.do(req).(*kmsg.DeleteTopicsResponse)
	require.Len(t, resp.Topics, 3)
	require.Equal(t, kerr.InvalidRequest.Code, resp.Topics[0].ErrorCode, "name and id together")
	require.Equal(t, kerr.UnknownTopicID.Code, resp.Topics[1].ErrorCode)
	require.Zero(t, resp.Topics[2].ErrorCode)
	require.Equal(t, "t", *resp.Topics[2].Topic)
	require.Zero(t, c.Partitions("t"))
}

func TestDeleteTopicReturnsTheLostRecords(t *testing.T) {
	c := startCluster(t, Config{Topics: []TopicConfig{{Name: "t", Partitions: 2}}})
	w := dialWire(t, c.Addr())
	require.Zero(t, produceOne(t, c, w, 13, "t", 1, batch(t, 7, 0, 0, 4)).ErrorCode)
	logs, err := c.DeleteTopic("t")
	require.NoError(t, err)
	require.Len(t, logs, 2)
	require.Empty(t, logs[0])
	require.Len(t, logs[1], 4)
	_, err = c.DeleteTopic("t")
	require.True(t, errors.Is(err, ErrUnknownTopic))
	require.Nil(t, c.Records("t", 1))
}

func TestCreatePartitionsGrowsTopic(t *testing.T) {
	c := startCluster(t, Config{Nodes: 3, Topics: []TopicConfig{{Name: "t", Partitions: 2}, {Name: "u", Partitions: 1}}})
	w := dialWire(t, c.Addr())
	grow := func(validate bool, topics ...kmsg.CreatePartitionsRequestTopic) *kmsg.CreatePartitionsResponse {
		req := kmsg.NewPtrCreatePartitionsRequest()
		req.Version = 3
		req.ValidateOnly = validate
		req.Topics = topics
		return w.do(req).(*kmsg.CreatePartitionsResponse)
	}
	topic := func(name string, count int32) kmsg.CreatePartitionsRequestTopic {
		rt := kmsg.NewCreatePartitionsRequestTopic()
		rt.Topic, rt.Count = name, count
		return rt
	}
	resp := grow(true, topic("t", 5))
	require.Zero(t, resp.Topics[0].ErrorCode)
	require.Equal(t, int32(2), c.Partitions("t"), "ValidateOnly changes nothing")

	resp = grow(false, topic("t", 5), topic("u", 1), topic("nope", 3), topic("t", 6))
	require.Len(t, resp.Topics, 4)
	require.Equal(t, kerr.InvalidRequest.Code, resp.Topics[0].ErrorCode, "t named twice")
	require.Equal(t, kerr.InvalidPartitions.Code, resp.Topics[1].ErrorCode, "not above the current count")
	require.Equal(t, kerr.UnknownTopicOrPartition.Code, resp.Topics[2].ErrorCode)
	require.Equal(t, int32(2), c.Partitions("t"))

	resp = grow(false, topic("t", 5))
	require.Zero(t, resp.Topics[0].ErrorCode)
	require.Equal(t, int32(5), c.Partitions("t"))
	for p := int32(0); p < 5; p++ {
		leader, _ := c.Leader("t", p)
		require.Equal(t, p%3, leader, "round-robin leaders")
	}
	// The new partitions take records at their leader.
	wl := dialWire(t, c.Addrs()[1])
	require.Zero(t, produceOne(t, c, wl, 13, "t", 4, batch(t, 7, 0, 0, 2)).ErrorCode)

	require.ErrorIs(t, c.CreatePartitions("t", 5), ErrInvalidConfig)
	require.ErrorIs(t, c.CreatePartitions("nope", 5), ErrUnknownTopic)
	require.ErrorIs(t, c.CreatePartitions("t", MaxPartitions+1), ErrInvalidConfig)
	require.NoError(t, c.CreatePartitions("u", 3))
	require.Equal(t, int32(3), c.Partitions("u"))
}

func TestTenThousandPartitionTopic(t *testing.T) {
	c := startCluster(t, Config{Nodes: 3, Topics: []TopicConfig{{Name: "big", Partitions: 10000}}})
	require.Equal(t, int32(10000), c.Partitions("big"))
	require.NoError(t, c.CreatePartitions("big", 20000))
}

func TestMetadataRequestsCounted(t *testing.T) {
	c := startCluster(t, Config{Topics: []TopicConfig{{Name: "t", Partitions: 1}}})
	w := dialWire(t, c.Addr())
	before := c.MetadataRequests()
	for range 3 {
		req := kmsg.NewPtrMetadataRequest()
		req.Version = 12
		w.do(req)
	}
	require.Equal(t, before+3, c.MetadataRequests())
}
