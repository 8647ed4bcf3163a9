package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DeleteTopics: v0-6
//
// Behavior:
// * v0-5 name topics; v6 names each by name or by id (KIP-516), not both
//   (INVALID_REQUEST).
// * An unknown name is UNKNOWN_TOPIC_OR_PARTITION, an unknown id
//   UNKNOWN_TOPIC_ID. A deleted topic is gone at once: its log and
//   producer state with it, later Produce requests naming its id answer
//   UNKNOWN_TOPIC_ID and a topic created again under its name gets a new id.
// * v5+ carries an error message with each error; v6 answers the id.
//
// Simplifications: deletion is immediate (no "marked for deletion" phase,
// so no TOPIC_DELETION_DISABLED or timeout); the request timeout is
// ignored.

func init() { regKey(20, 0, 6, handleDeleteTopics) }

func handleDeleteTopics(c *Cluster, r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.DeleteTopicsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
	answer := func(name *string, id uuid, code int16, msg string) {
		st := kmsg.NewDeleteTopicsResponseTopic()
		st.Topic, st.TopicID, st.ErrorCode = name, id, code
		if code != 0 && req.Version >= 5 {
			st.ErrorMessage = &msg
		}
		resp.Topics = append(resp.Topics, st)
	}
	if req.Version < 6 {
		for _, name := range req.TopicNames {
			t := c.topics[name]
			if t == nil {
				answer(&name, uuid{}, kerr.UnknownTopicOrPartition.Code, "unknown topic")
				continue
			}
			c.deleteTopic(t)
			answer(&name, uuid{}, 0, "")
		}
		return resp, nil
	}
	for _, qt := range req.Topics {
		var t *topic
		switch {
		case qt.Topic != nil && qt.TopicID != (uuid{}):
			answer(qt.Topic, qt.TopicID, kerr.InvalidRequest.Code, "name a topic by name or by id, not both")
			continue
		case qt.Topic != nil:
			if t = c.topics[*qt.Topic]; t == nil {
				answer(qt.Topic, uuid{}, kerr.UnknownTopicOrPartition.Code, "unknown topic")
				continue
			}
		default:
			if t = c.topicIDs[qt.TopicID]; t == nil {
				answer(nil, qt.TopicID, kerr.UnknownTopicID.Code, "unknown topic id")
				continue
			}
		}
		name, id := t.name, t.id
		c.deleteTopic(t)
		answer(&name, id, 0, "")
	}
	return resp, nil
}
