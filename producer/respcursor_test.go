package producer

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestRespCursorFindsEveryPartition: each batch finds its own partition
// response whether the broker answers in request order (the O(1) path) or
// in any other order, by topic name (v < 13) or topic id (v13+); a
// partition left out is nil.
func TestRespCursorFindsEveryPartition(t *testing.T) {
	ta := &topicState{name: "a", id: [16]byte{1}}
	tb := &topicState{name: "b", id: [16]byte{2}}
	batches := []*batch{
		{part: &partitionState{topic: ta, id: 0}, topicID: ta.id},
		{part: &partitionState{topic: ta, id: 1}, topicID: ta.id},
		{part: &partitionState{topic: tb, id: 0}, topicID: tb.id},
	}
	resp := func(order ...int) *kmsg.ProduceResponse {
		pr := kmsg.NewPtrProduceResponse()
		for _, k := range order {
			b := batches[k]
			rt := kmsg.NewProduceResponseTopic()
			rt.Topic, rt.TopicID = b.part.topic.name, b.part.topic.id
			rp := kmsg.NewProduceResponseTopicPartition()
			rp.Partition, rp.BaseOffset = b.part.id, int64(100*k)
			rt.Partitions = append(rt.Partitions, rp)
			pr.Topics = append(pr.Topics, rt)
		}
		return pr
	}
	for _, tc := range []struct {
		name    string
		version int16
		order   []int
	}{
		{"request order by id", 13, []int{0, 1, 2}},
		{"reversed by id", 13, []int{2, 1, 0}},
		{"shuffled by name", 9, []int{1, 2, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := respCursor{pr: resp(tc.order...), version: tc.version}
			for k, b := range batches {
				rp := c.find(b)
				require.NotNil(t, rp)
				require.Equal(t, int64(100*k), rp.BaseOffset)
			}
		})
	}
	c := respCursor{pr: resp(0, 2), version: 13}
	require.NotNil(t, c.find(batches[0]))
	require.Nil(t, c.find(batches[1]), "left out")
	require.NotNil(t, c.find(batches[2]))
	require.Nil(t, (&respCursor{}).find(batches[0]), "no response")
}
