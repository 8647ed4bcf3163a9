package broker

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// CreatePartitions: v0-3
//
// Behavior:
// * Grows a topic to Count partitions; the new partitions' leaders
//   continue the round-robin (partition p led by node p % Nodes).
//   ValidateOnly checks without growing.
// * A count not above the current one, or beyond MaxPartitions or the
//   cluster-wide cap, is INVALID_PARTITIONS; an unknown topic
//   UNKNOWN_TOPIC_OR_PARTITION; a topic named twice INVALID_REQUEST.
//
// Simplifications: replica assignments are ignored (no replication); the
// request timeout is ignored.

func init() { regKey(37, 0, 3, handleCreatePartitions) }

func handleCreatePartitions(c *Cluster, r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.CreatePartitionsRequest)
	resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
	count := make(map[string]int)
	for _, qt := range req.Topics {
		count[qt.Topic]++
	}
	for _, qt := range req.Topics {
		st := kmsg.NewCreatePartitionsResponseTopic()
		st.Topic = qt.Topic
		fail := func(code int16, msg string) {
			st.ErrorCode = code
			st.ErrorMessage = &msg
		}
		t := c.topics[qt.Topic]
		switch {
		case count[qt.Topic] > 1:
			fail(kerr.InvalidRequest.Code, "topic named more than once")
		case t == nil:
			fail(kerr.UnknownTopicOrPartition.Code, "unknown topic")
		default:
			if err := c.checkGrow(t, qt.Count); err != nil {
				fail(kerr.InvalidPartitions.Code, err.Error())
			} else if !req.ValidateOnly {
				c.growTopic(t, qt.Count)
			}
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}

// checkGrow reports why t cannot grow to count partitions, or nil. c.mu
// must be held.
func (c *Cluster) checkGrow(t *topic, count int32) error {
	cur := int32(len(t.parts))
	switch {
	case count <= cur:
		return fmt.Errorf("topic %s has %d partitions, which is not fewer than the requested %d", t.name, cur, count)
	case count > MaxPartitions:
		return fmt.Errorf("a topic holds at most %d partitions", MaxPartitions)
	case c.partitions+int(count-cur) > MaxClusterPartitions:
		return fmt.Errorf("the cluster holds at most %d partitions", MaxClusterPartitions)
	}
	return nil
}
