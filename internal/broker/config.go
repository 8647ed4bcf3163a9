package broker

import (
	"fmt"
	"log/slog"
	"maps"
	"net"
	"strconv"
	"time"
)

// Defaults and limits of the broker configuration.
const (
	// MinWindow is the smallest producer.state.batches.to.retain a
	// topic may have; smaller values are INVALID_CONFIG (KIP-1269).
	MinWindow = 5
	// DefaultWindow is log.producer.state.batches.to.retain when
	// [Config.DefaultWindow] is 0, and the window of an old-mode node.
	DefaultWindow = 5
	// DefaultProducerIDExpiration is producer.id.expiration.ms when
	// [Config.ProducerIDExpiration] is 0 (KIP-854: 24 hours).
	DefaultProducerIDExpiration = 24 * time.Hour
	// DefaultMaxMessageBytes is the largest record batch a partition
	// accepts (max.message.bytes); larger is MESSAGE_TOO_LARGE.
	DefaultMaxMessageBytes = 1 << 20
	// DefaultMaxRequestBytes is the largest request frame a node reads
	// (socket.request.max.bytes is 100 MiB in Kafka; we keep it smaller
	// so a hostile length cannot make us allocate much). A larger frame
	// closes the connection.
	DefaultMaxRequestBytes = 8 << 20
	// MaxPartitions bounds a topic's partition count (CreateTopics and
	// CreatePartitions answer INVALID_PARTITIONS beyond it). Kafka sets
	// no such limit; ours is the cluster-wide cap, so tests can run
	// topics of 10 000 partitions and more.
	MaxPartitions = MaxClusterPartitions
	// MaxClusterPartitions bounds the partitions of all topics together,
	// so a hostile CreateTopics cannot exhaust memory; beyond it
	// CreateTopics answers INVALID_PARTITIONS.
	MaxClusterPartitions = 100000
)

// Kafka property names the broker understands in CreateTopics,
// DescribeConfigs and IncrementalAlterConfigs.
const (
	propWindow        = "producer.state.batches.to.retain"     // topic
	propBrokerWindow  = "log.producer.state.batches.to.retain" // broker
	propExpiration    = "producer.id.expiration.ms"            // broker
	propMaxMessageLen = "max.message.bytes"                    // topic, read only here
)

// Config configures a cluster for [Start]. The zero value is valid: one
// node on 127.0.0.1:0, no topics, window 5, no link emulation.
type Config struct {
	// Nodes is the number of broker nodes, ids 0..Nodes-1, each with its
	// own loopback listener. Default 1.
	Nodes int
	// Addr is node 0's listen address. Default "127.0.0.1:0"; the other
	// nodes always listen on 127.0.0.1:0.
	Addr string
	// Topics are created at start.
	Topics []TopicConfig
	// DefaultWindow is log.producer.state.batches.to.retain, the window
	// of a topic whose own Window is 0. Default 5, at least 5.
	DefaultWindow int
	// ProducerIDExpiration is producer.id.expiration.ms: the state of a
	// producer id that has not appended to a partition for this long is
	// dropped (lazily, at its next write). Default 24h.
	ProducerIDExpiration time.Duration
	// OldNodes are node ids in old-broker mode: their ApiVersions offers
	// Produce up to v13 only, they never send ProducerStateBatchesToRetain,
	// and they retain 5 batches whatever the topic says.
	OldNodes []int32
	// Kafka24Nodes are node ids in Kafka 2.4 mode (see
	// [Cluster.SetKafka24]): InitProducerId up to v2, Produce up to v8,
	// 5 batches retained.
	Kafka24Nodes []int32
	// ProduceMaxVersions caps, by node id, the highest Produce version a
	// node offers in ApiVersions, to stand for older Kafka releases; a
	// Produce request above its cap closes the connection, as Kafka does.
	// Below 14 the node never sends ProducerStateBatchesToRetain and
	// retains 5 batches per producer (Kafka 1.0 to 3.x); at 3 (Kafka
	// 0.11) it retains only the last batch; below 3 (Kafka 0.10 and
	// before) it offers Produce from v0 and no InitProducerId, so an
	// idempotent producer cannot use it; below 7 (Kafka 2.0 and before)
	// it offers ListOffsets up to v3. Caps are 0..14.
	ProduceMaxVersions map[int32]int16
	// Racks gives nodes a rack (broker.rack), by node id, which Metadata
	// answers name; a node not in it has none.
	Racks map[int32]string
	// Listen opens each node's listener, with the signature of
	// net.Listen; nil uses net.Listen. A test passes an in-memory
	// network's Listen (internal/memnet) to run the cluster inside a
	// testing/synctest bubble; addresses are then that network's.
	Listen func(network, addr string) (net.Listener, error)
	// RTT is the emulated round trip of every node: each response is
	// written RTT after its request was read. 0 = none.
	RTT time.Duration
	// Bandwidth caps each node's link, in bytes per second per direction.
	// 0 = no cap.
	Bandwidth int64
	// AutoCreateTopics creates an unknown topic (one partition, default
	// window) when Metadata asks for it. Default false: unknown topics
	// answer UNKNOWN_TOPIC_OR_PARTITION.
	AutoCreateTopics bool
	// Logger receives debug logs of connections and rejected requests.
	// nil = discard.
	Logger *slog.Logger
	// SASL, when non-nil, makes every listener a SASL listener: a
	// connection must authenticate (SaslHandshake, SaslAuthenticate)
	// before any request but ApiVersions, or it is closed.
	SASL *SASLConfig
	// OnProduce, when set, sees every Produce request a node reads,
	// before any check: node is the node's id and records holds each
	// partition's records field (one RecordBatch each, from a correct
	// client), in request order. Tests use it to check what a client
	// sends, such as batch and request sizes. It runs with the cluster
	// lock held: it must not block or call the Cluster, and must not keep
	// the slices, which are the request frame's bytes.
	OnProduce func(node int32, records [][]byte)

	// reuseKeptFrames reads every request into the previous request's
	// buffer even when a handler kept it (keepFrame): the bug the
	// keepFrame rule prevents, for log_test.go's negative control.
	reuseKeptFrames bool
}

// SASLConfig configures the SASL listeners of [Config.SASL].
type SASLConfig struct {
	// Mechanisms are the mechanism names SaslHandshake accepts, for
	// example "PLAIN" or "AWS_MSK_IAM".
	Mechanisms []string
	// Authenticate checks the client's one SaslAuthenticate message for
	// mech and returns the reply to send back, or an error (the client
	// gets SASL_AUTHENTICATION_FAILED with its text). It runs on the
	// connection's reader goroutine with the cluster lock held: it must
	// not block or call the Cluster. Required.
	Authenticate func(mech string, msg []byte) (reply []byte, err error)
	// SessionLifetime is connections.max.reauth.ms (KIP-368): announced to
	// clients in SaslAuthenticate v1+, it closes a connection on the first
	// request read that long after authenticating, unless the client
	// re-authenticated. 0 = sessions do not expire.
	SessionLifetime time.Duration
}

// TopicConfig describes a topic for [Config.Topics] and
// [Cluster.CreateTopic].
type TopicConfig struct {
	// Name is the topic name; it must be non-empty.
	Name string
	// Partitions is the partition count, at least 1. Leaders are spread
	// round-robin over the nodes, partition p led by node p % Nodes.
	Partitions int32
	// Window is producer.state.batches.to.retain; 0 = the server default
	// ([Config.DefaultWindow]). Values 1..4 are INVALID_CONFIG.
	Window int
	// CleanupPolicy is the cleanup.policy DescribeConfigs shows ("" shows
	// the default, delete); the log is never compacted.
	CleanupPolicy string
	// MaxMessageBytes is the topic's max.message.bytes: the largest
	// record batch it takes, larger is MESSAGE_TOO_LARGE; 0 =
	// [DefaultMaxMessageBytes].
	MaxMessageBytes int
}

// withDefaults returns cfg with defaults filled in, or the first invalid
// field as a *ConfigError.
func (cfg Config) withDefaults() (Config, error) {
	if cfg.SASL != nil && (cfg.SASL.Authenticate == nil || len(cfg.SASL.Mechanisms) == 0) {
		return cfg, &ConfigError{"SASL", "", "Mechanisms and Authenticate required"}
	}
	if cfg.Nodes == 0 {
		cfg.Nodes = 1
	}
	if cfg.Nodes < 0 || cfg.Nodes > 64 {
		return cfg, &ConfigError{"Nodes", strconv.Itoa(cfg.Nodes), "must be 1..64"}
	}
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:0"
	}
	if cfg.DefaultWindow == 0 {
		cfg.DefaultWindow = DefaultWindow
	}
	if err := checkWindow(propBrokerWindow, cfg.DefaultWindow); err != nil {
		return cfg, err
	}
	if cfg.ProducerIDExpiration == 0 {
		cfg.ProducerIDExpiration = DefaultProducerIDExpiration
	}
	if cfg.ProducerIDExpiration < 0 {
		return cfg, &ConfigError{propExpiration, cfg.ProducerIDExpiration.String(), "must be positive"}
	}
	for _, n := range cfg.OldNodes {
		if n < 0 || int(n) >= cfg.Nodes {
			return cfg, &ConfigError{"OldNodes", strconv.Itoa(int(n)), fmt.Sprintf("node ids are 0..%d", cfg.Nodes-1)}
		}
	}
	for _, n := range cfg.Kafka24Nodes {
		if n < 0 || int(n) >= cfg.Nodes {
			return cfg, &ConfigError{"Kafka24Nodes", strconv.Itoa(int(n)), fmt.Sprintf("node ids are 0..%d", cfg.Nodes-1)}
		}
	}
	for n, v := range cfg.ProduceMaxVersions {
		if n < 0 || int(n) >= cfg.Nodes {
			return cfg, &ConfigError{"ProduceMaxVersions", strconv.Itoa(int(n)), fmt.Sprintf("node ids are 0..%d", cfg.Nodes-1)}
		}
		if v < 0 || v > produceMaxVersion {
			return cfg, &ConfigError{"ProduceMaxVersions", strconv.Itoa(int(v)), fmt.Sprintf("Produce versions are 0..%d", produceMaxVersion)}
		}
	}
	cfg.ProduceMaxVersions = maps.Clone(cfg.ProduceMaxVersions) // the caller's map may change after Start
	if cfg.Listen == nil {
		cfg.Listen = net.Listen
	}
	if cfg.RTT < 0 {
		return cfg, &ConfigError{"RTT", cfg.RTT.String(), "must be >= 0"}
	}
	if cfg.Bandwidth < 0 {
		return cfg, &ConfigError{"Bandwidth", strconv.FormatInt(cfg.Bandwidth, 10), "must be >= 0 bytes/s"}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return cfg, nil
}

// checkWindow validates a producer.state.batches.to.retain value.
func checkWindow(name string, n int) error {
	if n < MinWindow {
		return &ConfigError{name, strconv.Itoa(n), fmt.Sprintf("must be at least %d", MinWindow)}
	}
	return nil
}

// checkTopic validates t, window 0 allowed (server default).
func checkTopic(t TopicConfig) error {
	if err := checkTopicName(t.Name); err != nil {
		return err
	}
	if t.Partitions < 1 || t.Partitions > MaxPartitions {
		return &ConfigError{"Partitions", strconv.Itoa(int(t.Partitions)), fmt.Sprintf("must be 1..%d", MaxPartitions)}
	}
	if t.MaxMessageBytes < 0 {
		return &ConfigError{propMaxMessageLen, strconv.Itoa(t.MaxMessageBytes), "must be at least 0"}
	}
	if t.Window != 0 {
		return checkWindow(propWindow, t.Window)
	}
	return nil
}
