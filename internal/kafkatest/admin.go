package kafkatest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// adminTimeout bounds one admin helper call, including waiting for
// metadata to settle.
const adminTimeout = 90 * time.Second

// Client returns a franz-go client seeded with [Cluster.Bootstrap] (direct
// listeners) plus opts, closed in t.Cleanup. Pass
// kgo.SeedBrokers(strings.Split(c.ProxiedBootstrap(), ",")...) in opts to
// go through the proxies: later options override earlier ones.
func (c *Cluster) Client(t testing.TB, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	all := append([]kgo.Opt{kgo.SeedBrokers(strings.Split(c.Bootstrap(), ",")...)}, opts...)
	cl, err := kgo.NewClient(all...)
	if err != nil {
		t.Fatalf("kafkatest: kgo client: %v", err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// running returns the nodes whose JVM is up.
func (c *Cluster) running() []*node {
	var up []*node
	for _, n := range c.nodes {
		select {
		case <-n.exitedCh():
		default:
			up = append(up, n)
		}
	}
	return up
}

// request sends req to a running node (trying each in turn on connection
// errors), at the highest version both kmsg and that broker support.
// Brokers forward admin requests to the active controller themselves.
func (c *Cluster) request(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	var lastErr error = errors.New("kafkatest: no node running")
	for _, n := range c.running() {
		resp, err := requestNode(ctx, n.directAddr, req)
		if err == nil {
			return resp, nil
		}
		lastErr = err
	}
	return nil, lastErr
}

// controllerRequest sends an admin request that only the active controller
// serves: in ZooKeeper mode a broker that is not the controller answers
// NOT_CONTROLLER instead of forwarding, so the request goes to the node
// that Metadata names as controller, asked anew for each request (the
// controller may have moved). KRaft brokers forward such requests
// themselves: there it is [Cluster.request].
func (c *Cluster) controllerRequest(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	if c.rel.KRaft() {
		return c.request(ctx, req)
	}
	var lastErr error = errors.New("kafkatest: no node running")
	for _, n := range c.running() {
		mreq := kmsg.NewPtrMetadataRequest()
		mreq.Topics = []kmsg.MetadataRequestTopic{} // none: brokers and controller only
		resp, err := requestNode(ctx, n.directAddr, mreq)
		if err != nil {
			lastErr = err
			continue
		}
		id := resp.(*kmsg.MetadataResponse).ControllerID
		for _, cn := range c.running() {
			if cn.id == id {
				return requestNode(ctx, cn.directAddr, req)
			}
		}
		lastErr = fmt.Errorf("kafkatest: controller %d (per node %d) is not running", id, n.id)
	}
	return nil, lastErr
}

func requestNode(ctx context.Context, addr string, req kmsg.Request) (kmsg.Response, error) {
	av, err := APIVersions(ctx, addr)
	if err != nil {
		return nil, err
	}
	_, maxV, ok := VersionRange(av, req.Key())
	if !ok {
		return nil, fmt.Errorf("kafkatest: broker %s does not support %s", addr, kmsg.NameForKey(req.Key()))
	}
	req.SetVersion(min(maxV, req.MaxVersion()))
	conn, err := Dial(ctx, addr)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return conn.Request(ctx, req)
}

// CreateTopic creates a topic and waits until every running broker knows a
// leader for each partition. configs are topic configs (nil for none). It
// fails the test on error, including TOPIC_ALREADY_EXISTS.
func (c *Cluster) CreateTopic(t testing.TB, name string, partitions int32, replicas int16, configs map[string]string) {
	t.Helper()
	if err := c.createTopic(name, partitions, replicas, configs); err != nil {
		t.Fatalf("kafkatest: %v", err)
	}
}

func (c *Cluster) createTopic(name string, partitions int32, replicas int16, configs map[string]string) error {
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 30000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, partitions, replicas
	for _, k := range slices.Sorted(maps.Keys(configs)) {
		cfg := kmsg.NewCreateTopicsRequestTopicConfig()
		v := configs[k]
		cfg.Name, cfg.Value = k, &v
		rt.Configs = append(rt.Configs, cfg)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := c.request(ctx, req)
	if err != nil {
		return fmt.Errorf("CreateTopics %s: %w", name, err)
	}
	for _, tr := range resp.(*kmsg.CreateTopicsResponse).Topics {
		if tr.ErrorCode != 0 {
			return &ResponseError{Op: "CreateTopics", Resource: name, Err: kerr.ErrorForCode(tr.ErrorCode), Message: deref(tr.ErrorMessage)}
		}
	}
	return c.waitMetadata(ctx, name, func(p []kmsg.MetadataResponseTopicPartition) bool {
		if int32(len(p)) != partitions {
			return false
		}
		for _, pp := range p {
			if pp.Leader < 0 || len(pp.ISR) != int(replicas) {
				return false
			}
		}
		return true
	})
}

// PartitionInfo is what metadata says about one partition.
type PartitionInfo struct {
	Leader      int32
	LeaderEpoch int32
	Replicas    []int32
	ISR         []int32
}

// TopicID returns the topic's id (KIP-516), needed by Produce v13+ and
// Fetch v13+. It fails the test if the topic is unknown.
func (c *Cluster) TopicID(t testing.TB, topic string) [16]byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	mt, err := c.topicMetadata(ctx, c.running()[0].directAddr, topic)
	if err != nil {
		t.Fatalf("kafkatest: %v", err)
	}
	return mt.TopicID
}

// Partition returns the current metadata of one partition, as seen by the
// first running node. It fails the test on error.
func (c *Cluster) Partition(t testing.TB, topic string, partition int32) PartitionInfo {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	var last error
	for _, n := range c.running() {
		mt, err := c.topicMetadata(ctx, n.directAddr, topic)
		if err != nil {
			last = err
			continue
		}
		for _, p := range mt.Partitions {
			if p.Partition == partition {
				return PartitionInfo{Leader: p.Leader, LeaderEpoch: p.LeaderEpoch, Replicas: p.Replicas, ISR: p.ISR}
			}
		}
		last = fmt.Errorf("partition %s/%d not in metadata", topic, partition)
	}
	t.Fatalf("kafkatest: %v", last)
	return PartitionInfo{}
}

// Leader returns the leader id and leader epoch of a partition.
func (c *Cluster) Leader(t testing.TB, topic string, partition int32) (leader, epoch int32) {
	t.Helper()
	p := c.Partition(t, topic, partition)
	return p.Leader, p.LeaderEpoch
}

// MoveLeader makes node `to` the leader of topic/partition and returns the
// new leader epoch, once every running broker's metadata shows it. `to`
// must be a replica of the partition. It makes `to` the preferred replica
// (an AlterPartitionReassignments that only reorders the replica list, so
// no data moves) and runs a preferred leader election, retrying while `to`
// is not yet in the ISR. The replica order stays changed afterwards. In
// ZooKeeper mode (Kafka 2.4+, KIP-455 and KIP-460) both requests go to the
// controller. It fails the test on error or after 90 s.
func (c *Cluster) MoveLeader(t testing.TB, topic string, partition int32, to int32) (epoch int32) {
	t.Helper()
	epoch, err := c.moveLeader(topic, partition, to)
	if err != nil {
		t.Fatalf("kafkatest: move leader of %s/%d to %d: %v", topic, partition, to, err)
	}
	return epoch
}

func (c *Cluster) moveLeader(topic string, partition, to int32) (int32, error) {
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	cur, err := c.partitionInfo(ctx, topic, partition)
	if err != nil {
		return 0, err
	}
	if cur.Leader == to {
		return cur.LeaderEpoch, nil
	}
	if !slices.Contains(cur.Replicas, to) {
		return 0, fmt.Errorf("node %d is not a replica (replicas %v)", to, cur.Replicas)
	}
	if cur.Replicas[0] != to {
		order := []int32{to}
		for _, r := range cur.Replicas {
			if r != to {
				order = append(order, r)
			}
		}
		req := kmsg.NewPtrAlterPartitionAssignmentsRequest()
		req.TimeoutMillis = 30000
		rt := kmsg.NewAlterPartitionAssignmentsRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewAlterPartitionAssignmentsRequestTopicPartition()
		rp.Partition, rp.Replicas = partition, order
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := c.controllerRequest(ctx, req)
		if err != nil {
			return 0, err
		}
		r := resp.(*kmsg.AlterPartitionAssignmentsResponse)
		if r.ErrorCode != 0 {
			return 0, &ResponseError{Op: "AlterPartitionReassignments", Resource: topic, Err: kerr.ErrorForCode(r.ErrorCode), Message: deref(r.ErrorMessage)}
		}
		for _, tr := range r.Topics {
			for _, pr := range tr.Partitions {
				if pr.ErrorCode != 0 {
					return 0, &ResponseError{Op: "AlterPartitionReassignments", Resource: fmt.Sprintf("%s/%d", topic, partition), Err: kerr.ErrorForCode(pr.ErrorCode), Message: deref(pr.ErrorMessage)}
				}
			}
		}
		if err := c.waitMetadata(ctx, topic, func(ps []kmsg.MetadataResponseTopicPartition) bool {
			for _, p := range ps {
				if p.Partition == partition {
					return len(p.Replicas) > 0 && p.Replicas[0] == to
				}
			}
			return false
		}); err != nil {
			return 0, err
		}
	}
	for {
		req := kmsg.NewPtrElectLeadersRequest()
		req.ElectionType = 0 // preferred
		req.TimeoutMillis = 30000
		rt := kmsg.NewElectLeadersRequestTopic()
		rt.Topic, rt.Partitions = topic, []int32{partition}
		req.Topics = append(req.Topics, rt)
		resp, err := c.controllerRequest(ctx, req)
		if err != nil {
			return 0, err
		}
		r := resp.(*kmsg.ElectLeadersResponse)
		code, msg := r.ErrorCode, (*string)(nil)
		for _, tr := range r.Topics {
			for _, pr := range tr.Partitions {
				if code == 0 {
					code, msg = pr.ErrorCode, pr.ErrorMessage
				}
			}
		}
		err = kerr.ErrorForCode(code)
		if code == 0 || errors.Is(err, kerr.ElectionNotNeeded) {
			break
		}
		// The preferred replica may still be catching up into the ISR.
		if !errors.Is(err, kerr.PreferredLeaderNotAvailable) && !kerr.IsRetriable(err) {
			return 0, &ResponseError{Op: "ElectLeaders", Resource: fmt.Sprintf("%s/%d", topic, partition), Err: err, Message: deref(msg)}
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("ElectLeaders: %w (last %v)", ctx.Err(), err)
		case <-time.After(200 * time.Millisecond):
		}
	}
	var epoch int32
	err = c.waitMetadata(ctx, topic, func(ps []kmsg.MetadataResponseTopicPartition) bool {
		for _, p := range ps {
			if p.Partition == partition {
				epoch = p.LeaderEpoch
				return p.Leader == to
			}
		}
		return false
	})
	return epoch, err
}

func (c *Cluster) partitionInfo(ctx context.Context, topic string, partition int32) (PartitionInfo, error) {
	var last error = errors.New("no node running")
	for _, n := range c.running() {
		mt, err := c.topicMetadata(ctx, n.directAddr, topic)
		if err != nil {
			last = err
			continue
		}
		for _, p := range mt.Partitions {
			if p.Partition == partition {
				return PartitionInfo{Leader: p.Leader, LeaderEpoch: p.LeaderEpoch, Replicas: p.Replicas, ISR: p.ISR}, nil
			}
		}
		return PartitionInfo{}, fmt.Errorf("partition %s/%d not in metadata", topic, partition)
	}
	return PartitionInfo{}, last
}

// topicMetadata asks the broker at addr for one topic's metadata.
func (c *Cluster) topicMetadata(ctx context.Context, addr, topic string) (*kmsg.MetadataResponseTopic, error) {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = &topic
	req.Topics = append(req.Topics, rt)
	resp, err := requestNode(ctx, addr, req)
	if err != nil {
		return nil, err
	}
	for i := range resp.(*kmsg.MetadataResponse).Topics {
		mt := &resp.(*kmsg.MetadataResponse).Topics[i]
		if deref(mt.Topic) != topic {
			continue
		}
		if mt.ErrorCode != 0 {
			return nil, &ResponseError{Op: "Metadata", Resource: topic, Err: kerr.ErrorForCode(mt.ErrorCode)}
		}
		return mt, nil
	}
	return nil, fmt.Errorf("topic %s missing from metadata", topic)
}

// waitMetadata polls every running node until ok holds for the topic's
// partitions on all of them.
func (c *Cluster) waitMetadata(ctx context.Context, topic string, ok func([]kmsg.MetadataResponseTopicPartition) bool) error {
	for _, n := range c.running() {
		for {
			mt, err := c.topicMetadata(ctx, n.directAddr, topic)
			if err == nil && ok(mt.Partitions) {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("metadata of %s on node %d did not settle: %w (last error %v)", topic, n.id, ctx.Err(), err)
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	return nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// AlterTopicConfig sets topic configs with IncrementalAlterConfigs (SET
// per key). It returns once the controller accepted the change; brokers
// apply it moments later, so a caller that needs it in effect checks for
// it (for example in Produce responses). It fails the test on error,
// including INVALID_CONFIG.
func (c *Cluster) AlterTopicConfig(t testing.TB, topic string, configs map[string]string) {
	t.Helper()
	if err := c.alterTopicConfig(topic, configs); err != nil {
		t.Fatalf("kafkatest: %v", err)
	}
}

func (c *Cluster) alterTopicConfig(topic string, configs map[string]string) error {
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	r := kmsg.NewIncrementalAlterConfigsRequestResource()
	r.ResourceType = kmsg.ConfigResourceTypeTopic
	r.ResourceName = topic
	for _, k := range slices.Sorted(maps.Keys(configs)) {
		cfg := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		v := configs[k]
		cfg.Name, cfg.Value, cfg.Op = k, &v, kmsg.IncrementalAlterConfigOpSet
		r.Configs = append(r.Configs, cfg)
	}
	req.Resources = append(req.Resources, r)
	resp, err := c.request(ctx, req)
	if err != nil {
		return fmt.Errorf("IncrementalAlterConfigs %s: %w", topic, err)
	}
	for _, rr := range resp.(*kmsg.IncrementalAlterConfigsResponse).Resources {
		if rr.ErrorCode != 0 {
			return &ResponseError{Op: "IncrementalAlterConfigs", Resource: topic, Err: kerr.ErrorForCode(rr.ErrorCode), Message: deref(rr.ErrorMessage)}
		}
	}
	return nil
}

// SetProducerByteRate sets the producer_byte_rate quota (bytes a second,
// per broker) of the default client-id entity, which every client without
// a quota of its own gets, with AlterClientQuotas; rate <= 0 removes it.
// Brokers apply it moments after the controller accepted it, as they do
// topic configs. It fails the test on error.
func (c *Cluster) SetProducerByteRate(t testing.TB, rate int64) {
	t.Helper()
	if err := c.setProducerByteRate(rate); err != nil {
		t.Fatalf("kafkatest: %v", err)
	}
}

func (c *Cluster) setProducerByteRate(rate int64) error {
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	req := kmsg.NewPtrAlterClientQuotasRequest()
	e := kmsg.NewAlterClientQuotasRequestEntry()
	ent := kmsg.NewAlterClientQuotasRequestEntryEntity()
	ent.Type = "client-id" // Name nil: the default entity
	e.Entity = append(e.Entity, ent)
	op := kmsg.NewAlterClientQuotasRequestEntryOp()
	op.Key, op.Value, op.Remove = "producer_byte_rate", float64(rate), rate <= 0
	e.Ops = append(e.Ops, op)
	req.Entries = append(req.Entries, e)
	resp, err := c.request(ctx, req)
	if err != nil {
		return fmt.Errorf("AlterClientQuotas: %w", err)
	}
	for _, re := range resp.(*kmsg.AlterClientQuotasResponse).Entries {
		if re.ErrorCode != 0 {
			return &ResponseError{Op: "AlterClientQuotas", Resource: "client-id default", Err: kerr.ErrorForCode(re.ErrorCode), Message: deref(re.ErrorMessage)}
		}
	}
	return nil
}
