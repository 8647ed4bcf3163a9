package topicadmin

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/longhaul-kafka/longhaul/protocol"
)

// Topic is a topic to make sure of.
type Topic struct {
	Name string
	// Partitions for a new topic; -1 (or 0) lets the broker choose
	// (num.partitions), as auto-creation would.
	Partitions int32
	// ReplicationFactor for a new topic; -1 (or 0) is the broker's
	// default.replication.factor.
	ReplicationFactor int16
	// Configs of a new topic, e.g. {"producer.state.batches.to.retain":
	// "50"}. An existing topic keeps its configs.
	Configs map[string]string
}

// Result says what [Ensure] found or did for one topic.
type Result struct {
	Topic      string
	Created    bool  // false: the topic existed
	Partitions int32 // partition count once ready
}

// Config says how [Ensure] connects.
type Config struct {
	// Bootstrap lists host:port addresses, tried in order. Required.
	Bootstrap []string
	// Dial is passed to protocol.Dial (ClientID, TLS, SASL, ...).
	Dial protocol.DialConfig
	// Poll is how often Ensure looks again while a new topic has no
	// leader yet. Default 100ms.
	Poll time.Duration
}

// notReady are Metadata topic errors that go away by themselves after a
// topic is created.
func notReady(code int16) bool {
	return code == kerr.LeaderNotAvailable.Code || code == kerr.UnknownTopicOrPartition.Code ||
		code == kerr.NotLeaderForPartition.Code
}

// Ensure makes sure every topic exists and has a leader for each
// partition, creating the missing ones. It returns one Result per topic,
// in the order given. On error nothing is rolled back: topics created
// before the failure stay.
func Ensure(ctx context.Context, cfg Config, topics []Topic) ([]Result, error) {
	if cfg.Poll <= 0 {
		cfg.Poll = 100 * time.Millisecond
	}
	c, err := dialAny(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer c.Close()

	names := make([]string, len(topics))
	for i, t := range topics {
		names[i] = t.Name
	}
	md, err := protocol.Metadata(ctx, c, names)
	if err != nil {
		return nil, fmt.Errorf("topicadmin: metadata: %w", err)
	}
	created := make(map[string]bool)
	var missing []Topic
	for _, t := range topics {
		tm, ok := md.Topics[t.Name]
		switch {
		case !ok || tm.ErrorCode == kerr.UnknownTopicOrPartition.Code:
			missing = append(missing, t)
		case tm.ErrorCode != 0 && !notReady(tm.ErrorCode):
			return nil, &TopicError{Topic: t.Name, Code: tm.ErrorCode}
		}
	}
	if len(missing) > 0 {
		if err := create(ctx, c, cfg, md, missing); err != nil {
			return nil, err
		}
		for _, t := range missing {
			created[t.Name] = true
		}
	}
	parts, err := waitReady(ctx, c, cfg.Poll, names)
	if err != nil {
		return nil, err
	}
	out := make([]Result, len(topics))
	for i, t := range topics {
		out[i] = Result{Topic: t.Name, Created: created[t.Name], Partitions: parts[t.Name]}
	}
	return out, nil
}

func dialAny(ctx context.Context, cfg Config) (*protocol.Conn, error) {
	if len(cfg.Bootstrap) == 0 {
		return nil, fmt.Errorf("%w: empty bootstrap list", ErrNoBroker)
	}
	var last error
	for _, addr := range cfg.Bootstrap {
		c, err := protocol.Dial(ctx, addr, cfg.Dial)
		if err == nil {
			return c, nil
		}
		last = err
	}
	return nil, fmt.Errorf("%w: %w", ErrNoBroker, last)
}

// create sends CreateTopics to c. Brokers since Kafka 2.8 forward it to
// the controller themselves; an older one answers NOT_CONTROLLER, and then
// the request goes to the controller Metadata named.
func create(ctx context.Context, c *protocol.Conn, cfg Config, md *protocol.MetadataResult, topics []Topic) error {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 30000
	if d, ok := ctx.Deadline(); ok {
		req.TimeoutMillis = int32(max(1, min(time.Until(d).Milliseconds(), 30000)))
	}
	for _, t := range topics {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic = t.Name
		rt.NumPartitions = t.Partitions
		if rt.NumPartitions == 0 {
			rt.NumPartitions = -1
		}
		rt.ReplicationFactor = t.ReplicationFactor
		if rt.ReplicationFactor == 0 {
			rt.ReplicationFactor = -1
		}
		for _, k := range slices.Sorted(maps.Keys(t.Configs)) {
			v := t.Configs[k]
			rc := kmsg.NewCreateTopicsRequestTopicConfig()
			rc.Name, rc.Value = k, &v
			rt.Configs = append(rt.Configs, rc)
		}
		req.Topics = append(req.Topics, rt)
	}
	resp, err := doCreate(ctx, c, req)
	if err != nil {
		return err
	}
	if notController(resp) {
		addr, ok := md.Brokers[md.ControllerID]
		if !ok {
			return fmt.Errorf("topicadmin: create topics: NOT_CONTROLLER and controller %d unknown", md.ControllerID)
		}
		cc, err := protocol.Dial(ctx, addr, cfg.Dial)
		if err != nil {
			return fmt.Errorf("topicadmin: create topics: %w", err)
		}
		defer cc.Close()
		if resp, err = doCreate(ctx, cc, req); err != nil {
			return err
		}
	}
	for _, rt := range resp.Topics {
		if rt.ErrorCode == 0 || rt.ErrorCode == kerr.TopicAlreadyExists.Code {
			continue // created, or by someone else meanwhile
		}
		msg := ""
		if rt.ErrorMessage != nil {
			msg = *rt.ErrorMessage
		}
		return &TopicError{Topic: rt.Topic, Code: rt.ErrorCode, Message: msg}
	}
	return nil
}

func doCreate(ctx context.Context, c *protocol.Conn, req *kmsg.CreateTopicsRequest) (*kmsg.CreateTopicsResponse, error) {
	r, err := c.Do(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("topicadmin: create topics: %w", err)
	}
	return r.(*kmsg.CreateTopicsResponse), nil
}

func notController(resp *kmsg.CreateTopicsResponse) bool {
	for _, rt := range resp.Topics {
		if rt.ErrorCode == kerr.NotController.Code {
			return true
		}
	}
	return false
}

// waitReady polls Metadata until every topic has a leader for each of its
// partitions, and returns the partition counts.
func waitReady(ctx context.Context, c *protocol.Conn, poll time.Duration, names []string) (map[string]int32, error) {
	for {
		md, err := protocol.Metadata(ctx, c, names)
		if err != nil {
			return nil, fmt.Errorf("topicadmin: metadata: %w", err)
		}
		parts, ready, err := readiness(md, names)
		if err != nil || ready {
			return parts, err
		}
		t := time.NewTimer(poll)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("topicadmin: waiting for leaders of %v: %w", names, ctx.Err())
		case <-t.C:
		}
	}
}

func readiness(md *protocol.MetadataResult, names []string) (map[string]int32, bool, error) {
	parts := make(map[string]int32, len(names))
	ready := true
	for _, name := range names {
		tm, ok := md.Topics[name]
		if !ok || notReady(tm.ErrorCode) || len(tm.Partitions) == 0 {
			ready = false
			continue
		}
		if tm.ErrorCode != 0 {
			return nil, false, &TopicError{Topic: name, Code: tm.ErrorCode}
		}
		for _, p := range tm.Partitions {
			if p.ErrorCode != 0 && !notReady(p.ErrorCode) {
				return nil, false, &TopicError{Topic: name, Code: p.ErrorCode}
			}
			if p.Leader < 0 || p.ErrorCode != 0 {
				ready = false
			}
		}
		parts[name] = int32(len(tm.Partitions))
	}
	return parts, ready, nil
}
