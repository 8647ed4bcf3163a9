package broker

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestStartConfigValidation(t *testing.T) {
	for name, cfg := range map[string]Config{
		"window below 5":        {DefaultWindow: 4},
		"topic window below 5":  {Topics: []TopicConfig{{Name: "t", Partitions: 1, Window: 3}}},
		"no partitions":         {Topics: []TopicConfig{{Name: "t"}}},
		"old node out of range": {Nodes: 2, OldNodes: []int32{2}},
		"negative rtt":          {RTT: -1},
	} {
		t.Run(name, func(t *testing.T) {
			c, err := Start(cfg)
			if err == nil {
				c.Close()
				t.Fatal("Start accepted an invalid config")
			}
			if !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("error %v does not wrap ErrInvalidConfig", err)
			}
		})
	}
	c := startCluster(t, Config{Topics: []TopicConfig{{Name: "t", Partitions: 1}}})
	if err := c.SetWindow("t", 4); !errors.Is(err, ErrInvalidConfig) || c.Window("t") != 5 {
		t.Fatalf("SetWindow(4): %v, window %d", err, c.Window("t"))
	}
	if err := c.CreateTopic(TopicConfig{Name: "t", Partitions: 1}); !errors.Is(err, ErrTopicExists) {
		t.Fatalf("CreateTopic twice: %v", err)
	}
}

func TestInitProducerID(t *testing.T) {
	c := startCluster(t, Config{})
	w := dialWire(t, c.Addr())
	init := func(pid int64, epoch int16) (int64, int16) {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.Version = 4
		req.ProducerID, req.ProducerEpoch = pid, epoch
		resp := w.do(req).(*kmsg.InitProducerIDResponse)
		if resp.ErrorCode != 0 {
			t.Fatal(kerr.ErrorForCode(resp.ErrorCode))
		}
		return resp.ProducerID, resp.ProducerEpoch
	}
	a, ea := init(-1, -1)
	b, eb := init(-1, -1)
	if a == b || ea != 0 || eb != 0 {
		t.Fatalf("two new ids: %d/%d %d/%d", a, ea, b, eb)
	}
	if id, e := init(a, 0); id != a || e != 1 {
		t.Fatalf("KIP-360 bump of %d/0: got %d/%d, want %d/1", a, id, e, a)
	}
	if id, _ := init(a, 0); id == a {
		t.Fatal("stale epoch bumped again instead of getting a new id")
	}
}

func TestConfigsOverTheWire(t *testing.T) {
	c := startCluster(t, Config{DefaultWindow: 8})
	w := dialWire(t, c.Addr())
	create := func(name, window string) int16 {
		req := kmsg.NewPtrCreateTopicsRequest()
		req.Version = 7
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, 2, 1
		if window != "" {
			cfg := kmsg.NewCreateTopicsRequestTopicConfig()
			cfg.Name, cfg.Value = "producer.state.batches.to.retain", &window
			rt.Configs = append(rt.Configs, cfg)
		}
		req.Topics = append(req.Topics, rt)
		return w.do(req).(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode
	}
	if code := create("bad", "4"); code != kerr.InvalidConfig.Code {
		t.Fatalf("window 4: %v, want INVALID_CONFIG", kerr.ErrorForCode(code))
	}
	if code := create("a", "50"); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	if code := create("d", ""); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	if code := create("a", ""); code != kerr.TopicAlreadyExists.Code {
		t.Fatalf("duplicate: %v", kerr.ErrorForCode(code))
	}
	if c.Window("a") != 50 || c.Window("d") != 8 {
		t.Fatalf("windows %d %d, want 50 and the server default 8", c.Window("a"), c.Window("d"))
	}
	describe := func(typ kmsg.ConfigResourceType, name, key string) string {
		req := kmsg.NewPtrDescribeConfigsRequest()
		req.Version = 4
		rr := kmsg.NewDescribeConfigsRequestResource()
		rr.ResourceType, rr.ResourceName, rr.ConfigNames = typ, name, []string{key}
		req.Resources = append(req.Resources, rr)
		res := w.do(req).(*kmsg.DescribeConfigsResponse).Resources[0]
		if res.ErrorCode != 0 || len(res.Configs) != 1 {
			t.Fatalf("describe %s %s: %v, %d configs", name, key, kerr.ErrorForCode(res.ErrorCode), len(res.Configs))
		}
		return *res.Configs[0].Value
	}
	if v := describe(kmsg.ConfigResourceTypeTopic, "a", "producer.state.batches.to.retain"); v != "50" {
		t.Fatalf("describe a: %s", v)
	}
	if v := describe(kmsg.ConfigResourceTypeBroker, "0", "log.producer.state.batches.to.retain"); v != "8" {
		t.Fatalf("describe broker: %s", v)
	}
	alter := func(typ kmsg.ConfigResourceType, name, key string, op kmsg.IncrementalAlterConfigOp, value string) int16 {
		req := kmsg.NewPtrIncrementalAlterConfigsRequest()
		rr := kmsg.NewIncrementalAlterConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = typ, name
		cfg := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		cfg.Name, cfg.Op, cfg.Value = key, op, &value
		rr.Configs = append(rr.Configs, cfg)
		req.Resources = append(req.Resources, rr)
		return w.do(req).(*kmsg.IncrementalAlterConfigsResponse).Resources[0].ErrorCode
	}
	set, del := kmsg.IncrementalAlterConfigOpSet, kmsg.IncrementalAlterConfigOpDelete
	if code := alter(kmsg.ConfigResourceTypeTopic, "a", "producer.state.batches.to.retain", set, "2"); code != kerr.InvalidConfig.Code || c.Window("a") != 50 {
		t.Fatalf("alter to 2: %v, window %d", kerr.ErrorForCode(code), c.Window("a"))
	}
	if code := alter(kmsg.ConfigResourceTypeTopic, "a", "producer.state.batches.to.retain", set, "12"); code != 0 || c.Window("a") != 12 {
		t.Fatalf("alter to 12: %v, window %d", kerr.ErrorForCode(code), c.Window("a"))
	}
	if code := alter(kmsg.ConfigResourceTypeTopic, "a", "producer.state.batches.to.retain", del, ""); code != 0 || c.Window("a") != 8 {
		t.Fatalf("delete: %v, window %d", kerr.ErrorForCode(code), c.Window("a"))
	}
	if code := alter(kmsg.ConfigResourceTypeBroker, "", "log.producer.state.batches.to.retain", set, "9"); code != 0 || c.Window("d") != 9 {
		t.Fatalf("broker default: %v, window %d", kerr.ErrorForCode(code), c.Window("d"))
	}
	if code := alter(kmsg.ConfigResourceTypeBroker, "", "producer.id.expiration.ms", set, "1000"); code != 0 {
		t.Fatalf("expiration: %v", kerr.ErrorForCode(code))
	}
	if v := describe(kmsg.ConfigResourceTypeBroker, "", "producer.id.expiration.ms"); v != "1000" {
		t.Fatalf("describe expiration: %s", v)
	}
}
