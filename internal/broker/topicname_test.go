package broker

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Topic names as Kafka judges them (Topic.validate): Metadata answers a
// name that breaks the rules with INVALID_TOPIC_EXCEPTION, with or without
// auto-creation, and never creates it; a legal unknown name stays
// UNKNOWN_TOPIC_OR_PARTITION (or is created); CreateTopics refuses an
// illegal one with INVALID_TOPIC_EXCEPTION; Start refuses one in Config.

var illegalTopicNames = []string{"", ".", "..", "has space", "bang!", "slash/t", "colon:t", "ümlaut", strings.Repeat("x", 250)}

var legalTopicNames = []string{"a", "...", "a.b_c-D9", strings.Repeat("x", 249)}

func TestCheckTopicName(t *testing.T) {
	for _, name := range illegalTopicNames {
		assert.Error(t, checkTopicName(name), "%q", name)
	}
	for _, name := range legalTopicNames {
		assert.NoError(t, checkTopicName(name), "%q", name)
	}
}

func metadataNames(names ...string) *kmsg.MetadataRequest {
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 12
	req.AllowAutoTopicCreation = true
	for _, n := range names {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(n)
		req.Topics = append(req.Topics, rt)
	}
	return req
}

func TestMetadataInvalidTopicName(t *testing.T) {
	for _, auto := range []bool{false, true} {
		c := startCluster(t, Config{AutoCreateTopics: auto})
		w := dialWire(t, c.Addr())
		names := append(append([]string(nil), illegalTopicNames...), "legal")
		resp := w.do(metadataNames(names...)).(*kmsg.MetadataResponse)
		require.Len(t, resp.Topics, len(names))
		for i, rt := range resp.Topics {
			require.NotNil(t, rt.Topic)
			if *rt.Topic == "legal" {
				if auto {
					assert.Zero(t, rt.ErrorCode, "auto=%v: a legal name is created", auto)
				} else {
					assert.Equal(t, kerr.UnknownTopicOrPartition.Code, rt.ErrorCode)
				}
				continue
			}
			assert.Equal(t, kerr.InvalidTopicException.Code, rt.ErrorCode, "auto=%v %q", auto, names[i])
			assert.Empty(t, rt.Partitions)
			assert.Zero(t, c.Partitions(*rt.Topic), "never created")
		}
	}
}

func TestCreateTopicsInvalidTopicName(t *testing.T) {
	c := startCluster(t, Config{})
	w := dialWire(t, c.Addr())
	req := kmsg.NewPtrCreateTopicsRequest()
	req.Version = 7
	for _, n := range []string{"bang!", ".", "fine"} {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = n, 1, 1
		req.Topics = append(req.Topics, rt)
	}
	resp := w.do(req).(*kmsg.CreateTopicsResponse)
	require.Len(t, resp.Topics, 3)
	assert.Equal(t, kerr.InvalidTopicException.Code, resp.Topics[0].ErrorCode)
	assert.Equal(t, kerr.InvalidTopicException.Code, resp.Topics[1].ErrorCode)
	assert.Zero(t, resp.Topics[2].ErrorCode)
}

func TestStartRefusesInvalidTopicName(t *testing.T) {
	_, err := Start(Config{Topics: []TopicConfig{{Name: "has space", Partitions: 1}}})
	var ce *ConfigError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, "Name", ce.Name)
}
