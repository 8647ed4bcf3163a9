package broker

import (
	"crypto/rand"
	"fmt"
	"strconv"
	"time"

	"github.com/longhaul-kafka/longhaul/protocol"
)

// uuid is a Kafka topic id (KIP-516).
type uuid = [16]byte

// topic is one topic; the cluster mutex guards it.
type topic struct {
	name    string
	id      uuid
	window  int    // producer.state.batches.to.retain; 0 = server default
	cleanup string // cleanup.policy as configured; "" = delete
	maxMsg  int    // max.message.bytes; 0 = DefaultMaxMessageBytes
	parts   []*partition
}

// partition is one partition: its leader, its log and the producer state
// of the ids that wrote to it. The cluster mutex guards it.
type partition struct {
	t      *topic
	index  int32
	leader int32 // node id
	epoch  int32 // leader epoch, +1 per MoveLeader

	batches []storedBatch // the log, in offset order; records decoded on demand (logRecords)
	next    int64         // log end offset = high watermark (no replication)
	// logStart is the log start offset (DeleteRecords): Fetch and
	// ListOffsets serve nothing below it; the batches stay stored.
	logStart int64

	pids map[int64]*producerState

	stats    PartitionStats
	inflight []pidCount // batches read, response not yet written, per producer id (addInflight)

	injected []injectedErr // InjectError, oldest first
}

// pidCount is one producer id's count of batches in flight on a partition.
type pidCount struct {
	pid int64
	n   int
}

// storedBatch is one appended batch as served by Fetch: the client's bytes
// with base offset and partition leader epoch set (neither is covered by the
// CRC).
type storedBatch struct {
	base, last int64
	maxTS      int64
	raw        []byte
}

// injectedErr answers the next n produce partition responses with code,
// as mode says (see Answer).
type injectedErr struct {
	code int16
	mode AnswerMode
	n    int
	hint *LeaderHint // Answer.Hint
}

// LogRecord is one record of a partition's log, as returned by
// [Cluster.Records].
type LogRecord struct {
	// Offset is the record's offset in the partition.
	Offset int64
	// ProducerID and ProducerEpoch come from the record's batch; -1 for
	// a non-idempotent batch.
	ProducerID    int64
	ProducerEpoch int16
	// Sequence is the record's own sequence number (batch first sequence
	// plus offset delta, wrapping at 2^31), -1 for non-idempotent batches.
	Sequence int32
	// Timestamp is the record's timestamp in Unix milliseconds.
	Timestamp int64
	// Key and Value are the record's key and value; nil when null.
	Key, Value []byte
	// Headers are the record's headers, in order.
	Headers []protocol.Header
}

// newTopicID returns a random non-zero topic id.
func newTopicID() uuid {
	var id uuid
	for id == (uuid{}) {
		_, _ = rand.Read(id[:])
	}
	return id
}

// windowOf is the window t's partitions retain: the topic's own value or
// the server default. c.mu must be held.
func (c *Cluster) windowOf(t *topic) int {
	if t.window != 0 {
		return t.window
	}
	return c.defaultWindow
}

// effectiveWindow is the window p's leader applies: 1 on a node capped at
// Produce v3 (Kafka 0.11 retains only the last batch per producer), 5 on
// an old-mode, Kafka 2.4 or other capped node, the topic window otherwise.
// c.mu must be held.
func (c *Cluster) effectiveWindow(p *partition) int {
	n := c.nodes[p.leader]
	v, capped := n.produceCap()
	switch {
	case capped && v < 4:
		return 1
	case n.old || n.kafka24 || capped && v < produceMaxVersion:
		return DefaultWindow
	}
	return c.windowOf(p.t)
}

// createTopic adds a topic after checking it. c.mu must be held.
func (c *Cluster) createTopic(tc TopicConfig) (*topic, error) {
	if err := checkTopic(tc); err != nil {
		return nil, err
	}
	if _, ok := c.topics[tc.Name]; ok {
		return nil, ErrTopicExists
	}
	if c.partitions+int(tc.Partitions) > MaxClusterPartitions {
		return nil, &ConfigError{"Partitions", strconv.Itoa(int(tc.Partitions)), fmt.Sprintf("the cluster holds at most %d partitions", MaxClusterPartitions)}
	}
	t := &topic{name: tc.Name, id: newTopicID(), window: tc.Window, cleanup: tc.CleanupPolicy, maxMsg: tc.MaxMessageBytes}
	c.growTopic(t, tc.Partitions)
	c.topics[t.name] = t
	c.topicIDs[t.id] = t
	return t, nil
}

// maxMessageBytes is t's max.message.bytes.
func (t *topic) maxMessageBytes() int {
	if t.maxMsg > 0 {
		return t.maxMsg
	}
	return DefaultMaxMessageBytes
}

// requestTopic returns the topic a Produce or Fetch request names: by id
// from version 13 on (KIP-516), by name before; nil when unknown. c.mu must
// be held.
func (c *Cluster) requestTopic(version int16, name string, id uuid) *topic {
	if version >= 13 {
		return c.topicIDs[id]
	}
	return c.topics[name]
}

// growTopic adds partitions to t up to count, leaders continuing the
// round-robin. The caller checked count (checkTopic, checkGrow). c.mu must
// be held.
func (c *Cluster) growTopic(t *topic, count int32) {
	for i := int32(len(t.parts)); i < count; i++ {
		t.parts = append(t.parts, &partition{
			t:      t,
			index:  i,
			leader: i % int32(len(c.nodes)),
			pids:   make(map[int64]*producerState),
		})
		c.partitions++
	}
}

// deleteTopic removes t, its logs and producer state. Requests already
// reading t finish on the detached partitions; later ones find neither its
// name nor its id. c.mu must be held.
func (c *Cluster) deleteTopic(t *topic) {
	delete(c.topics, t.name)
	delete(c.topicIDs, t.id)
	c.partitions -= len(t.parts)
	c.signalData() // Fetch waiting on it answers now
}

// partition returns the partition or nil. c.mu must be held.
func (c *Cluster) partition(topicName string, p int32) *partition {
	t := c.topics[topicName]
	if t == nil || p < 0 || int(p) >= len(t.parts) {
		return nil
	}
	return t.parts[p]
}

// producer returns pid's state on p, dropping it first if it expired
// (producer.id.expiration.ms, KIP-854); nil means no state. c.mu must be
// held.
func (c *Cluster) producer(p *partition, pid int64, now time.Time) *producerState {
	s := p.pids[pid]
	if s != nil && now.Sub(s.lastWrite) >= c.expiration {
		delete(p.pids, pid)
		return nil
	}
	return s
}

// appendBatch stores an accepted batch at the end of p's log and returns
// its base offset. b must be the broker's own bytes (they are kept, served
// by Fetch and decoded by logRecords), already checked to decode. c.mu
// must be held.
func (c *Cluster) appendBatch(p *partition, b []byte, info protocol.BatchInfo) int64 {
	base := p.next
	protocol.SetBaseOffset(b, base)
	setLeaderEpoch(b, p.epoch)
	last := base + int64(info.LastOffsetDelta)
	p.batches = append(p.batches, storedBatch{base: base, last: last, maxTS: info.MaxTimestamp, raw: b})
	p.next = last + 1
	p.stats.Appended++
	c.signalData()
	return base
}

// logRecords decodes p's log, in offset order. The log keeps only the
// batches' bytes: decoding every record as it is appended (and keeping
// the decoded form) cost the produce path more than everything else it
// does. c.mu must be held.
func (p *partition) logRecords() []LogRecord {
	var out []LogRecord
	for _, sb := range p.batches {
		info, err := protocol.ParseBatchHeader(sb.raw)
		if err == nil {
			err = protocol.ForEachRecord(sb.raw, info, maxDecompressed, func(_ int, r protocol.Record) error {
				delta := r.Offset - info.BaseOffset
				seq := int32(-1)
				if info.ProducerID >= 0 && info.BaseSequence >= 0 {
					seq = addSeq(info.BaseSequence, int32(delta))
				}
				out = append(out, LogRecord{
					Offset:        info.BaseOffset + delta,
					ProducerID:    info.ProducerID,
					ProducerEpoch: info.ProducerEpoch,
					Sequence:      seq,
					Timestamp:     r.Timestamp,
					Key:           r.Key,
					Value:         r.Value,
					Headers:       r.Headers,
				})
				return nil
			})
		}
		if err != nil {
			// Every stored batch decoded when it was appended, and
			// nothing writes to the log's bytes but appendBatch.
			panic(fmt.Sprintf("broker: %s[%d]: stored batch at offset %d no longer decodes: %v", p.t.name, p.index, sb.base, err))
		}
	}
	return out
}

// addSeq is seq+delta with the 2^31 wrap of Kafka sequence numbers.
func addSeq(seq int32, delta int32) int32 {
	return int32((int64(seq) + int64(delta)) % (1 << 31))
}

// setLeaderEpoch writes the partition leader epoch into a stored batch
// (bytes 12..15, outside the CRC), as a real leader does.
func setLeaderEpoch(b []byte, epoch int32) {
	if len(b) >= 16 {
		b[12], b[13], b[14], b[15] = byte(epoch>>24), byte(epoch>>16), byte(epoch>>8), byte(epoch)
	}
}

// signalData wakes Fetch requests waiting for new data. c.mu must be held.
// The channel is made only when a Fetch waits (dataWait), so an append
// that nobody waits for costs no allocation.
func (c *Cluster) signalData() {
	if c.dataCh != nil {
		close(c.dataCh)
		c.dataCh = nil
	}
}

// dataWait returns the channel the next signalData closes. c.mu must be
// held.
func (c *Cluster) dataWait() <-chan struct{} {
	if c.dataCh == nil {
		c.dataCh = make(chan struct{})
	}
	return c.dataCh
}

// maxTopicName is the longest topic name Kafka accepts.
const maxTopicName = 249

// checkTopicName applies Kafka's rules for a topic name
// (org.apache.kafka.common.internals.Topic.validate): 1 to 249 characters
// of [a-zA-Z0-9._-], and not "." or "..". Metadata answers a name that
// breaks them with INVALID_TOPIC_EXCEPTION, with or without auto-creation,
// and CreateTopics refuses it with the same code.
func checkTopicName(name string) error {
	switch {
	case name == "" || len(name) > maxTopicName:
		return &ConfigError{"Name", strconv.Quote(name), fmt.Sprintf("must be 1..%d characters", maxTopicName)}
	case name == "." || name == "..":
		return &ConfigError{"Name", strconv.Quote(name), `"." and ".." are not allowed`}
	}
	for i := 0; i < len(name); i++ {
		switch b := name[i]; {
		case 'a' <= b && b <= 'z', 'A' <= b && b <= 'Z', '0' <= b && b <= '9', b == '.', b == '_', b == '-':
		default:
			return &ConfigError{"Name", strconv.Quote(name), "may contain only ASCII letters, digits, '.', '_' and '-'"}
		}
	}
	return nil
}
