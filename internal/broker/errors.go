package broker

import (
	"errors"
	"fmt"
)

// ErrClosed is returned by control methods called after [Cluster.Close].
var ErrClosed = errors.New("broker: cluster closed")

// ErrUnknownTopic is returned by control methods naming a topic or
// partition the cluster does not have.
var ErrUnknownTopic = errors.New("broker: unknown topic or partition")

// ErrUnknownNode is returned by control methods naming a node id outside
// 0..Nodes-1.
var ErrUnknownNode = errors.New("broker: unknown node")

// ErrTopicExists is returned by [Cluster.CreateTopic] for a name already
// in use; the existing topic is left unchanged.
var ErrTopicExists = errors.New("broker: topic already exists")

// ErrInvalidConfig is wrapped by every [ConfigError].
var ErrInvalidConfig = errors.New("broker: invalid config")

// ConfigError reports an invalid configuration value: a [Config] field at
// [Start], a [TopicConfig] at [Cluster.CreateTopic], or a window passed to
// [Cluster.SetWindow]. It wraps [ErrInvalidConfig].
type ConfigError struct {
	// Name is the Kafka property or Config field at fault.
	Name string
	// Value is the rejected value, formatted.
	Value string
	// Reason says what is allowed.
	Reason string
}

// Error implements error.
func (e *ConfigError) Error() string {
	return fmt.Sprintf("broker: invalid %s=%s: %s", e.Name, e.Value, e.Reason)
}

// Unwrap returns [ErrInvalidConfig].
func (e *ConfigError) Unwrap() error { return ErrInvalidConfig }

// errConnClose is returned by a handler when the request must be answered
// by closing the connection (unknown key, unsupported version, a request
// that cannot be decoded): what a real broker does.
var errConnClose = errors.New("broker: close connection")
