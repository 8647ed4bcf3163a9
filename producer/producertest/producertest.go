package producertest

import (
	"testing"
	"time"

	"github.com/longhaul-kafka/longhaul/internal/broker"
)

// Topic describes a topic to create.
type Topic struct {
	// Name is the topic name; required.
	Name string
	// Partitions is the partition count; 0 means 1. Partition p is led by
	// node p % nodes.
	Partitions int32
	// Window is producer.state.batches.to.retain (KIP-1269): how many
	// batches per producer the broker deduplicates, announced to producers
	// in every ProduceResponse v14. 0 means 5, the value of brokers without
	// KIP-1269; 1 to 4 are invalid.
	Window int
	// MaxMessageBytes is the topic's max.message.bytes, the largest record
	// batch it takes (larger is MESSAGE_TOO_LARGE); 0 means 1 MiB.
	MaxMessageBytes int
}

// Record is one record of a partition's log, from [Cluster.Records].
type Record struct {
	Offset int64
	// ProducerID, ProducerEpoch and Sequence identify the idempotent
	// write; -1 for records of non-idempotent producers.
	ProducerID    int64
	ProducerEpoch int16
	Sequence      int32
	// Timestamp is the record's timestamp.
	Timestamp time.Time
	// Key and Value are nil when null.
	Key, Value []byte
	Headers    []Header
}

// Header is a record header.
type Header struct {
	Key   string
	Value []byte
}

// Cluster is a running fake cluster. Close it when done.
type Cluster struct {
	c *broker.Cluster
}

// Start starts a cluster of nodes nodes (ids 0 to nodes-1; 0 means 1), each
// listening on its own port of 127.0.0.1, with the given topics.
func Start(nodes int, topics ...Topic) (*Cluster, error) {
	cfg := broker.Config{Nodes: nodes}
	for _, t := range topics {
		cfg.Topics = append(cfg.Topics, topicConfig(t))
	}
	c, err := broker.Start(cfg)
	if err != nil {
		return nil, err
	}
	return &Cluster{c: c}, nil
}

// NewCluster is [Start] for a test: it fails t on error and closes the
// cluster when t ends.
func NewCluster(t testing.TB, nodes int, topics ...Topic) *Cluster {
	t.Helper()
	c, err := Start(nodes, topics...)
	if err != nil {
		t.Fatalf("producertest: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func topicConfig(t Topic) broker.TopicConfig {
	if t.Partitions == 0 {
		t.Partitions = 1
	}
	return broker.TopicConfig{Name: t.Name, Partitions: t.Partitions, Window: t.Window, MaxMessageBytes: t.MaxMessageBytes}
}

// Close stops every node and closes every connection. Later calls return
// nil.
func (c *Cluster) Close() error { return c.c.Close() }

// Addr is node 0's host:port, enough as bootstrap.servers.
func (c *Cluster) Addr() string { return c.c.Addr() }

// Addrs are every node's host:port, by node id.
func (c *Cluster) Addrs() []string { return c.c.Addrs() }

// CreateTopic creates a topic; it fails if the topic exists or t is invalid.
func (c *Cluster) CreateTopic(t Topic) error { return c.c.CreateTopic(topicConfig(t)) }

// SetWindow changes a topic's window (producer.state.batches.to.retain);
// producers learn it from their next ProduceResponse.
func (c *Cluster) SetWindow(topic string, n int) error { return c.c.SetWindow(topic, n) }

// Window returns a topic's window, 0 for an unknown topic.
func (c *Cluster) Window(topic string) int { return c.c.Window(topic) }

// Records returns a copy of a partition's log in offset order, nil for an
// unknown partition. Records of aborted and open transactions are in it
// ([Cluster.CommittedRecords] leaves them out); transaction markers are
// not records, so their offsets are missing.
func (c *Cluster) Records(topic string, partition int32) []Record {
	return records(c.c.Records(topic, partition))
}

func records(log []broker.LogRecord) []Record {
	if log == nil {
		return nil
	}
	out := make([]Record, len(log))
	for i, r := range log {
		out[i] = Record{
			Offset: r.Offset, ProducerID: r.ProducerID, ProducerEpoch: r.ProducerEpoch, Sequence: r.Sequence,
			Timestamp: time.UnixMilli(r.Timestamp),
			Key:       clone(r.Key), Value: clone(r.Value),
		}
		for _, h := range r.Headers {
			out[i].Headers = append(out[i].Headers, Header{Key: h.Key, Value: clone(h.Value)})
		}
	}
	return out
}

func clone(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte{}, b...)
}

// Leader returns the node leading a partition, -1 if unknown.
func (c *Cluster) Leader(topic string, partition int32) int32 {
	n, _ := c.c.Leader(topic, partition)
	return n
}

// InjectError makes the next n produce answers for a partition carry the
// Kafka error code (kerr's codes, for example kerr.NotEnoughReplicas.Code)
// without appending anything. n <= 0 clears what is left.
func (c *Cluster) InjectError(topic string, partition int32, code int16, n int) {
	c.c.InjectError(topic, partition, code, n)
}

// DropProduceResponses makes node lose its next n produce responses: the
// records are appended but the producer never hears so, and must time out
// (request.timeout.ms) and retry; idempotence keeps the retry from writing
// them twice.
func (c *Cluster) DropProduceResponses(node int32, n int) { c.c.DropProduceResponses(node, n) }

// DropConnections closes every connection of node; clients may reconnect
// at once. Answers not yet written are lost.
func (c *Cluster) DropConnections(node int32) { c.c.DropConnections(node) }

// MoveLeader makes node lead a partition; the old leader answers
// NOT_LEADER_OR_FOLLOWER from then on. The log stays with the partition.
func (c *Cluster) MoveLeader(topic string, partition int32, node int32) error {
	return c.c.MoveLeader(topic, partition, node)
}

// MoveNode moves node to a new port of 127.0.0.1 and returns the new
// host:port, as when a broker restarts on another machine or its pod is
// rescheduled: another broker process takes over the node id there.
// [Cluster.Addrs] and Metadata give the new address from then on, so a
// producer finds the node again by refreshing its metadata. The old
// address stops accepting, and its connections close at once: answers not
// yet written are lost, appends already made stay. Partitions keep their
// leader, their log and each producer's deduplication state, so a retry of
// a batch appended before the move is not written twice. A fault armed on
// the node by [Cluster.DropProduceResponses] ends with the old process;
// [Cluster.SetRTT]'s delay carries over. It returns an error, and changes
// nothing, for an unknown node or a closed cluster.
func (c *Cluster) MoveNode(node int32) (string, error) {
	return c.c.MoveNode(node, broker.NodeMove{Replace: true})
}

// ExpireProducerIDs forgets every producer's deduplication state, as a
// broker does after producer.id.expiration.ms without writes (KIP-854).
func (c *Cluster) ExpireProducerIDs() { c.c.ExpireProducerIDs() }

// SetRTT delays every answer of node by d, emulating a long link; 0 stops.
func (c *Cluster) SetRTT(node int32, d time.Duration) { c.c.SetRTT(node, d) }
