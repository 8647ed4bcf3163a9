package broker

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// CreateTopics: v0-7
//
// Behavior:
// * Creates topics with NumPartitions partitions (-1 = 1), leaders spread
//   round-robin; ValidateOnly (v1+) checks without creating.
// * Config producer.state.batches.to.retain must be an integer >= 5, else
//   INVALID_CONFIG; other configs are accepted and ignored.
// * v5+ answers the partition count, replication factor 1 and the
//   configs; v7+ the topic id.
//
// Simplifications: replication factor and replica assignments are ignored
// (no replication); the request timeout is ignored.

func init() { regKey(19, 0, 7, handleCreateTopics) }

func handleCreateTopics(c *Cluster, r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.CreateTopicsRequest)
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
	for _, qt := range req.Topics {
		st := kmsg.NewCreateTopicsResponseTopic()
		st.Topic = qt.Topic
		fail := func(code int16, msg string) {
			st.ErrorCode = code
			if req.Version >= 1 {
				st.ErrorMessage = &msg
			}
			resp.Topics = append(resp.Topics, st)
		}
		tc := TopicConfig{Name: qt.Topic, Partitions: qt.NumPartitions}
		if tc.Partitions == -1 {
			tc.Partitions = 1
		}
		var bad error
		for _, cfg := range qt.Configs {
			if cfg.Name == propWindow {
				if tc.Window, bad = parseWindow(propWindow, cfg.Value); bad != nil {
					break
				}
			}
		}
		if bad != nil {
			fail(kerr.InvalidConfig.Code, bad.Error())
			continue
		}
		if c.topics[tc.Name] != nil {
			fail(kerr.TopicAlreadyExists.Code, "topic already exists")
			continue
		}
		if err := checkTopic(tc); err != nil {
			code := kerr.InvalidTopicException.Code
			var ce *ConfigError
			if errors.As(err, &ce) && ce.Name == "Partitions" {
				code = kerr.InvalidPartitions.Code
			}
			fail(code, err.Error())
			continue
		}
		t := &topic{name: tc.Name, window: tc.Window}
		if !req.ValidateOnly {
			var err error
			if t, err = c.createTopic(tc); err != nil {
				fail(kerr.InvalidPartitions.Code, err.Error()) // the cluster-wide cap
				continue
			}
		}
		st.TopicID = t.id
		st.NumPartitions = tc.Partitions
		st.ReplicationFactor = 1
		for _, cv := range c.topicConfigs(t) {
			rc := kmsg.NewCreateTopicsResponseTopicConfig()
			rc.Name = cv.name
			v := cv.value
			rc.Value = &v
			rc.Source = int8(cv.source)
			st.Configs = append(st.Configs, rc)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}
