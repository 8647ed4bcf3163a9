package protocol

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"net"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// This file holds thin typed helpers over kmsg for the few requests other
// packages need. Like Conn they return error codes as numbers without
// interpreting them; err is only for transport and decoding failures.

// MetadataResult is the decoded answer to [Metadata].
type MetadataResult struct {
	// Brokers maps node id to "host:port".
	Brokers map[int32]string
	// Racks maps node id to the broker's rack (broker.rack), for the
	// brokers that have one.
	Racks map[int32]string
	// ControllerID is the controller's node id, -1 if unknown.
	ControllerID int32
	// ErrorCode is the top-level error code (Metadata v13+, KIP-1102), 0
	// for none: 129, REBOOTSTRAP_REQUIRED, asks the client to resolve its
	// bootstrap servers again.
	ErrorCode int16
	// Topics maps topic name to its metadata.
	Topics map[string]TopicMetadata
}

// TopicMetadata describes one topic of a [MetadataResult].
type TopicMetadata struct {
	// ID is the topic id (Metadata v10+; zero from older brokers). Produce
	// v13+ names topics by it.
	ID [16]byte
	// ErrorCode is the topic-level error code, 0 for none.
	ErrorCode int16
	// Partitions are in the order the broker sent them.
	Partitions []PartitionMetadata
}

// PartitionMetadata describes one partition of a [TopicMetadata].
type PartitionMetadata struct {
	Partition int32
	// ErrorCode is the partition-level error code, 0 for none (for example
	// LEADER_NOT_AVAILABLE while an election runs).
	ErrorCode int16
	// Leader is the leader's node id, -1 if none.
	Leader int32
	// LeaderEpoch is the leader epoch (Metadata v7+), -1 if unknown.
	LeaderEpoch int32
}

// Metadata asks c for cluster metadata at the negotiated version. topics
// nil asks for every topic; a non-nil empty slice asks for none (brokers and
// controller only). Topics are never auto-created (on Metadata v4+; v0-3
// brokers create them when auto.create.topics.enable is on, whatever the
// client asks). ctx bounds the request.
func Metadata(ctx context.Context, c *Conn, topics []string) (*MetadataResult, error) {
	return metadata(ctx, c, topics, false)
}

// MetadataAutoCreate is [Metadata] with AllowAutoTopicCreation set, as the
// Java producer asks: a broker whose auto.create.topics.enable is on creates
// a missing topic, with its default partition count, and answers for it
// (often LEADER_NOT_AVAILABLE on the first answer, while it elects
// leaders).
func MetadataAutoCreate(ctx context.Context, c *Conn, topics []string) (*MetadataResult, error) {
	return metadata(ctx, c, topics, true)
}

func metadata(ctx context.Context, c *Conn, topics []string, autoCreate bool) (*MetadataResult, error) {
	req := kmsg.NewPtrMetadataRequest()
	req.AllowAutoTopicCreation = autoCreate
	if topics != nil {
		req.Topics = make([]kmsg.MetadataRequestTopic, 0, len(topics))
		for _, t := range topics {
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = &t
			req.Topics = append(req.Topics, rt)
		}
	}
	r, err := c.Do(ctx, req)
	if err != nil {
		return nil, err
	}
	resp := r.(*kmsg.MetadataResponse)
	out := &MetadataResult{
		Brokers:      make(map[int32]string, len(resp.Brokers)),
		ControllerID: resp.ControllerID,
		ErrorCode:    resp.ErrorCode,
		Topics:       make(map[string]TopicMetadata, len(resp.Topics)),
	}
	for _, b := range resp.Brokers {
		out.Brokers[b.NodeID] = net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
		if b.Rack != nil && *b.Rack != "" {
			if out.Racks == nil {
				out.Racks = make(map[int32]string)
			}
			out.Racks[b.NodeID] = *b.Rack
		}
	}
	for _, t := range resp.Topics {
		name := ""
		if t.Topic != nil {
			name = *t.Topic
		}
		tm := TopicMetadata{ID: t.TopicID, ErrorCode: t.ErrorCode, Partitions: make([]PartitionMetadata, 0, len(t.Partitions))}
		for _, p := range t.Partitions {
			tm.Partitions = append(tm.Partitions, PartitionMetadata{
				Partition:   p.Partition,
				ErrorCode:   p.ErrorCode,
				Leader:      p.Leader,
				LeaderEpoch: p.LeaderEpoch,
			})
		}
		out.Topics[name] = tm
	}
	return out, nil
}

// InitProducerID asks c (any broker, for a non-transactional producer) for
// a producer id and epoch. Pass -1, -1 for a new id; pass the current id and
// epoch to bump the epoch (KIP-360, needs InitProducerId v3+, otherwise an
// error wrapping [ErrUnsupportedVersion]). timeout is sent as the
// transaction timeout; 0 sends math.MaxInt32 ms as the Java idempotent
// producer does. A non-zero errorCode comes with id -1. An answer without
// an error code whose id or epoch is negative (no identity: id -1 marks
// batches without idempotence) is an error wrapping
// [ErrMalformedResponse]; the connection stays usable. A broker without
// InitProducerId (before Kafka 0.11) gives an error wrapping both
// [ErrIdempotenceUnsupported] and [ErrUnsupportedVersion].
func InitProducerID(ctx context.Context, c *Conn, producerID int64, epoch int16, timeout time.Duration) (id int64, newEpoch int16, errorCode int16, err error) {
	if _, ok := c.Version(22); !ok {
		return -1, -1, 0, fmt.Errorf("%w: broker %s has no InitProducerId (Kafka before 0.11) (%w)", ErrIdempotenceUnsupported, c.Addr(), ErrUnsupportedVersion)
	}
	if v, ok := c.Version(22); ok && v < 3 && producerID >= 0 {
		return -1, -1, 0, fmt.Errorf("%w: epoch bump needs InitProducerId v3+, broker %s has v%d", ErrUnsupportedVersion, c.Addr(), v)
	}
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionTimeoutMillis = math.MaxInt32
	if timeout > 0 {
		req.TransactionTimeoutMillis = int32(min(timeout.Milliseconds(), math.MaxInt32))
	}
	req.ProducerID = producerID
	req.ProducerEpoch = epoch
	r, err := c.Do(ctx, req)
	if err != nil {
		return -1, -1, 0, err
	}
	resp := r.(*kmsg.InitProducerIDResponse)
	if resp.ErrorCode != 0 {
		return -1, -1, resp.ErrorCode, nil
	}
	if resp.ProducerID < 0 || resp.ProducerEpoch < 0 {
		// Id -1 is what batches without idempotence carry: taken as an
		// identity, it would have the broker write retries again.
		return -1, -1, 0, fmt.Errorf("%w: InitProducerId from %s gave producer id %d epoch %d without an error code",
			ErrMalformedResponse, c.Addr(), resp.ProducerID, resp.ProducerEpoch)
	}
	return resp.ProducerID, resp.ProducerEpoch, 0, nil
}

// Special timestamps for [ListOffsets].
const (
	OffsetLatest   int64 = -1 // the log end offset (next offset to be written)
	OffsetEarliest int64 = -2 // the log start offset
)

// ListOffsets asks the leader c for the offset of topic/partition at
// timestamp ([OffsetLatest], [OffsetEarliest] or milliseconds), reading
// uncommitted data.
func ListOffsets(ctx context.Context, c *Conn, topic string, partition int32, timestamp int64) (offset int64, errorCode int16, err error) {
	req := kmsg.NewPtrListOffsetsRequest()
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition = partition
	rp.Timestamp = timestamp
	rp.MaxNumOffsets = 1 // v0 only
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	r, err := c.Do(ctx, req)
	if err != nil {
		return -1, 0, err
	}
	resp := r.(*kmsg.ListOffsetsResponse)
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if t.Topic != topic || p.Partition != partition {
				continue
			}
			if p.ErrorCode != 0 {
				return -1, p.ErrorCode, nil
			}
			if resp.Version == 0 {
				if len(p.OldStyleOffsets) == 0 {
					return -1, 0, nil
				}
				return p.OldStyleOffsets[0], 0, nil
			}
			return p.Offset, 0, nil
		}
	}
	return -1, 0, fmt.Errorf("%w: ListOffsets answer lacks %s/%d", ErrMalformedResponse, topic, partition)
}

// FetchResult is the decoded answer to [Fetch] for one partition.
type FetchResult struct {
	// ErrorCode is the partition's error code, 0 for none.
	ErrorCode        int16
	HighWatermark    int64
	LastStableOffset int64
	LogStartOffset   int64
	// Batches are the headers of the complete batches returned, in order;
	// a batch cut short by the size limit is dropped.
	Batches []BatchInfo
	// Records are the records of non-control batches at or after the
	// requested offset, with their absolute offsets.
	Records []Record
}

// Fetch reads topic/partition from offset on the leader c, returning what
// is there now (MaxWait 0, read uncommitted) up to maxBytes (<= 0: 1 MiB).
// Fetch v13+ names topics by id: pass topicID, or zero to have it looked up
// with [Metadata] first. Every returned batch is CRC-checked and decoded
// with [ParseRecordBatch]; a corrupt one is an error wrapping
// [ErrCorruptBatch]. Meant for tests reading back what was produced.
func Fetch(ctx context.Context, c *Conn, topic string, topicID [16]byte, partition int32, offset int64, maxBytes int32) (*FetchResult, error) {
	if maxBytes <= 0 {
		maxBytes = 1 << 20
	}
	if v, ok := c.Version(1); ok && v >= 13 && topicID == [16]byte{} {
		md, err := Metadata(ctx, c, []string{topic})
		if err != nil {
			return nil, err
		}
		t, ok := md.Topics[topic]
		if !ok || t.ErrorCode != 0 {
			return &FetchResult{ErrorCode: t.ErrorCode}, nil
		}
		topicID = t.ID
	}
	req := kmsg.NewPtrFetchRequest()
	req.MaxWaitMillis = 0
	req.MinBytes = 0
	req.MaxBytes = maxBytes
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rt.TopicID = topicID
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition = partition
	rp.FetchOffset = offset
	rp.CurrentLeaderEpoch = -1
	rp.LastFetchedEpoch = -1
	rp.LogStartOffset = -1
	rp.PartitionMaxBytes = maxBytes
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	r, err := c.Do(ctx, req)
	if err != nil {
		return nil, err
	}
	resp := r.(*kmsg.FetchResponse)
	if resp.ErrorCode != 0 {
		return &FetchResult{ErrorCode: resp.ErrorCode}, nil
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.Partition != partition || (t.Topic != topic && t.TopicID != topicID) {
				continue
			}
			out := &FetchResult{
				ErrorCode:        p.ErrorCode,
				HighWatermark:    p.HighWatermark,
				LastStableOffset: p.LastStableOffset,
				LogStartOffset:   p.LogStartOffset,
			}
			if err := out.decode(p.RecordBatches, offset); err != nil {
				return nil, err
			}
			return out, nil
		}
	}
	return nil, fmt.Errorf("%w: Fetch answer lacks %s/%d", ErrMalformedResponse, topic, partition)
}

func (f *FetchResult) decode(data []byte, from int64) error {
	for len(data) >= RecordBatchOverhead {
		length := int64(int32(binary.BigEndian.Uint32(data[offLength:])))
		if length+lengthBase > int64(len(data)) {
			break // cut short by the size limit
		}
		info, recs, err := ParseRecordBatch(data, 0)
		if err != nil {
			return err
		}
		f.Batches = append(f.Batches, info)
		if !info.Control() {
			for _, r := range recs {
				if r.Offset >= from {
					f.Records = append(f.Records, r)
				}
			}
		}
		data = data[info.TotalLen():]
	}
	return nil
}
