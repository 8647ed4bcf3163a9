package broker

import (
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Metadata: v0-13 (v13: a top-level error code, 0 unless RewriteMetadata sets one)
//
// Behavior:
// * Brokers are all nodes; each partition names its leader and leader
//   epoch (v7+), and topics carry their ids (v10+).
// * Null topics (v1+) lists every topic; v0's empty list does too.
// * Unknown topics are UNKNOWN_TOPIC_OR_PARTITION unless
//   Config.AutoCreateTopics and AllowAutoTopicCreation (v4+; always on v0-3)
//   ask to create them (one partition, default window). A name Kafka
//   refuses (not 1..249 characters of [a-zA-Z0-9._-], or "." or "..") is
//   INVALID_TOPIC_EXCEPTION, with or without auto-creation, as Kafka's
//   KafkaApis and auto-creation manager answer. Unknown ids are
//   UNKNOWN_TOPIC_ID.
//
// * Fault hook: RewriteMetadata rewrites every response just before it is
//   sent. Cluster.MetadataRequests counts the requests answered.
//
// Simplifications: replicas and ISR are the leader alone, a rack only where
// Config.Racks gives one, no
// authorized operations, the controller is node 0.

func init() { regKey(3, 0, 13, handleMetadata) }

func handleMetadata(c *Cluster, r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.MetadataRequest)
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	c.metaRequests++
	for _, n := range c.nodes {
		b := kmsg.NewMetadataResponseBroker()
		b.NodeID = n.id
		b.Host, b.Port = n.hostPort()
		if rack, ok := c.cfg.Racks[n.id]; ok {
			b.Rack = &rack
		}
		resp.Brokers = append(resp.Brokers, b)
	}
	clusterID := "longhaul-broker"
	resp.ClusterID = &clusterID
	resp.ControllerID = 0

	addTopic := func(t *topic) {
		st := kmsg.NewMetadataResponseTopic()
		name := t.name
		st.Topic = &name
		st.TopicID = t.id
		for _, p := range t.parts {
			sp := kmsg.NewMetadataResponseTopicPartition()
			sp.Partition = p.index
			sp.Leader = p.leader
			sp.LeaderEpoch = p.epoch
			sp.Replicas = []int32{p.leader}
			sp.ISR = []int32{p.leader}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	addErr := func(name *string, id uuid, code int16) {
		st := kmsg.NewMetadataResponseTopic()
		st.Topic = name
		st.TopicID = id
		st.ErrorCode = code
		resp.Topics = append(resp.Topics, st)
	}

	all := req.Topics == nil || (req.Version == 0 && len(req.Topics) == 0)
	if all {
		names := make([]string, 0, len(c.topics))
		for name := range c.topics {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			addTopic(c.topics[name])
		}
		c.rewriteMetadata(resp)
		return resp, nil
	}
	autoCreate := c.cfg.AutoCreateTopics && (req.Version < 4 || req.AllowAutoTopicCreation)
	seen := make(map[string]bool)
	for _, rt := range req.Topics {
		var t *topic
		switch {
		case rt.TopicID != (uuid{}):
			if t = c.topicIDs[rt.TopicID]; t == nil {
				addErr(nil, rt.TopicID, kerr.UnknownTopicID.Code)
				continue
			}
		case rt.Topic != nil:
			if t = c.topics[*rt.Topic]; t == nil && autoCreate {
				t, _ = c.createTopic(TopicConfig{Name: *rt.Topic, Partitions: 1})
			}
			if t == nil {
				code := kerr.UnknownTopicOrPartition.Code
				if checkTopicName(*rt.Topic) != nil {
					code = kerr.InvalidTopicException.Code
				}
				addErr(rt.Topic, uuid{}, code)
				continue
			}
		default:
			continue
		}
		if !seen[t.name] {
			seen[t.name] = true
			addTopic(t)
		}
	}
	c.rewriteMetadata(resp)
	return resp, nil
}

// rewriteMetadata applies the RewriteMetadata hook, if any. c.mu is held.
func (c *Cluster) rewriteMetadata(resp *kmsg.MetadataResponse) {
	if c.metaRewrite != nil {
		c.metaRewrite(resp)
	}
}
