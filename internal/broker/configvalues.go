package broker

import (
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// configValue is one config as DescribeConfigs shows it.
type configValue struct {
	name   string
	value  string
	source kmsg.ConfigSource
	typ    kmsg.ConfigType
	doc    string
}

// topicConfigs returns t's configs in name order. c.mu must be held.
func (c *Cluster) topicConfigs(t *topic) []configValue {
	src := kmsg.ConfigSourceDynamicTopicConfig
	if t.window == 0 {
		src = c.brokerWindowSource()
	}
	policy, policySrc := "delete", kmsg.ConfigSourceDefaultConfig
	if t.cleanup != "" {
		policy, policySrc = t.cleanup, kmsg.ConfigSourceDynamicTopicConfig
	}
	maxSrc := kmsg.ConfigSourceDefaultConfig
	if t.maxMsg > 0 {
		maxSrc = kmsg.ConfigSourceDynamicTopicConfig
	}
	return []configValue{
		{"cleanup.policy", policy, policySrc, kmsg.ConfigTypeList, "delete or compact (shown only: the log is never compacted)"},
		{propMaxMessageLen, strconv.Itoa(t.maxMessageBytes()), maxSrc, kmsg.ConfigTypeInt, "largest record batch size allowed"},
		{propWindow, strconv.Itoa(c.windowOf(t)), src, kmsg.ConfigTypeInt, "batches retained per idempotent producer for duplicate detection (KIP-1269)"},
	}
}

// brokerConfigs returns the broker configs in name order. c.mu must be
// held.
func (c *Cluster) brokerConfigs() []configValue {
	expSrc := kmsg.ConfigSourceDefaultConfig
	if c.expiration != DefaultProducerIDExpiration {
		expSrc = kmsg.ConfigSourceDynamicDefaultBrokerConfig
	}
	return []configValue{
		{propBrokerWindow, strconv.Itoa(c.defaultWindow), c.brokerWindowSource(), kmsg.ConfigTypeInt, "default producer.state.batches.to.retain (KIP-1269)"},
		{propExpiration, strconv.FormatInt(c.expiration.Milliseconds(), 10), expSrc, kmsg.ConfigTypeInt, "producer id state expiration (KIP-854)"},
	}
}

func (c *Cluster) brokerWindowSource() kmsg.ConfigSource {
	if c.defaultWindow != DefaultWindow {
		return kmsg.ConfigSourceDynamicDefaultBrokerConfig
	}
	return kmsg.ConfigSourceDefaultConfig
}

// parseWindow parses a producer.state.batches.to.retain value (name says
// which property, for the error).
func parseWindow(name string, v *string) (int, error) {
	if v == nil {
		return 0, &ConfigError{name, "null", "must be an integer"}
	}
	n, err := strconv.Atoi(*v)
	if err != nil {
		return 0, &ConfigError{name, strconv.Quote(*v), "must be an integer"}
	}
	if err := checkWindow(name, n); err != nil {
		return 0, err
	}
	return n, nil
}

// parseExpiration parses a producer.id.expiration.ms value.
func parseExpiration(v *string) (time.Duration, error) {
	if v == nil {
		return 0, &ConfigError{propExpiration, "null", "must be an integer"}
	}
	ms, err := strconv.ParseInt(*v, 10, 64)
	if err != nil || ms < 1 || ms > int64(time.Duration(1<<62)/time.Millisecond) {
		return 0, &ConfigError{propExpiration, strconv.Quote(*v), fmt.Sprintf("must be 1..%d ms", int64(time.Duration(1<<62)/time.Millisecond))}
	}
	return time.Duration(ms) * time.Millisecond, nil
}
