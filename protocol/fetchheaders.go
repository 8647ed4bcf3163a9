package protocol

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// HeaderFetch is one partition read by [FetchHeaders].
type HeaderFetch struct {
	Topic     string
	TopicID   [16]byte // sent from Fetch v13, which names topics by id; must be set for such brokers
	Partition int32
	Offset    int64 // the first offset wanted
	// LeaderEpoch is sent as CurrentLeaderEpoch (Fetch v9+, KIP-320): a
	// replica with another epoch answers FENCED_LEADER_EPOCH or
	// UNKNOWN_LEADER_EPOCH instead of serving. -1 sends none.
	LeaderEpoch int32
	MaxBytes    int32 // the most record bytes wanted (<= 0: 1 MiB)
}

// HeaderFetchResult is the answer of [FetchHeaders].
type HeaderFetchResult struct {
	// ErrorCode is the partition's error code (or the whole response's,
	// when it has one), 0 for none; the other fields are then unset.
	ErrorCode      int16
	HighWatermark  int64
	LogStartOffset int64 // -1 from brokers before Fetch v5
	// Batches are the headers of the complete v2 batches served, in the
	// order of the log; older message-format entries are skipped.
	Batches []BatchInfo
	// Next is the offset after the last complete entry served (v2 batch or
	// older message), where the next read continues; the asked offset when
	// nothing complete was served.
	Next int64
	// Bytes is the size of the record data the broker sent.
	Bytes int
}

// FetchHeaders reads q's partition from q.Offset on the replica c as a
// consumer would, without a fetch session (a full fetch that takes no
// slot in the broker's session cache), read uncommitted and MaxWait 0, so
// it answers with what is below the high watermark now. It decodes only
// the batch headers ([BatchHeaders]): records are never decompressed.
// Brokers before Fetch v4 (which may down-convert batches and lose their
// producer fields) give an error wrapping [ErrUnsupportedVersion].
func FetchHeaders(ctx context.Context, c *Conn, q HeaderFetch) (*HeaderFetchResult, error) {
	if v, ok := c.Version(1); !ok || v < 4 {
		return nil, fmt.Errorf("%w: reading batch headers needs Fetch v4+, broker %s has v%d", ErrUnsupportedVersion, c.Addr(), v)
	}
	maxBytes := q.MaxBytes
	if maxBytes <= 0 {
		maxBytes = 1 << 20
	}
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MaxWaitMillis = 0
	req.MinBytes = 1
	req.MaxBytes = maxBytes
	req.IsolationLevel = 0
	req.SessionID = 0
	req.SessionEpoch = -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = q.Topic
	rt.TopicID = q.TopicID
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition = q.Partition
	rp.FetchOffset = q.Offset
	rp.CurrentLeaderEpoch = q.LeaderEpoch
	rp.LastFetchedEpoch = -1
	rp.LogStartOffset = -1
	rp.PartitionMaxBytes = maxBytes
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	r, err := c.Do(ctx, req)
	if err != nil {
		return nil, err
	}
	return headerFetchResult(r.(*kmsg.FetchResponse), q)
}

// headerFetchResult picks q's partition out of resp and decodes it.
func headerFetchResult(resp *kmsg.FetchResponse, q HeaderFetch) (*HeaderFetchResult, error) {
	if resp.ErrorCode != 0 {
		return &HeaderFetchResult{ErrorCode: resp.ErrorCode, Next: q.Offset}, nil
	}
	for _, t := range resp.Topics {
		if t.Topic != q.Topic && (t.TopicID != q.TopicID || q.TopicID == [16]byte{}) {
			continue
		}
		for _, p := range t.Partitions {
			if p.Partition != q.Partition {
				continue
			}
			out := &HeaderFetchResult{ErrorCode: p.ErrorCode, Next: q.Offset}
			if p.ErrorCode != 0 {
				return out, nil
			}
			out.HighWatermark, out.LogStartOffset = p.HighWatermark, p.LogStartOffset
			out.Bytes = len(p.RecordBatches)
			headers, next, err := BatchHeaders(p.RecordBatches)
			if err != nil {
				return nil, err
			}
			out.Batches = headers
			if next >= 0 {
				out.Next = max(next, q.Offset)
			}
			return out, nil
		}
	}
	return nil, fmt.Errorf("%w: Fetch answer lacks %s/%d", ErrMalformedResponse, q.Topic, q.Partition)
}

// TopicConfigValue asks c for the value of topic's config name with
// DescribeConfigs: found is false when the broker did not list it; a
// non-zero errorCode (TOPIC_AUTHORIZATION_FAILED without
// DESCRIBE_CONFIGS on the topic, for example) comes with nothing else.
func TopicConfigValue(ctx context.Context, c *Conn, topic, name string) (value string, found bool, errorCode int16, err error) {
	req := kmsg.NewPtrDescribeConfigsRequest()
	rr := kmsg.NewDescribeConfigsRequestResource()
	rr.ResourceType = kmsg.ConfigResourceTypeTopic
	rr.ResourceName = topic
	rr.ConfigNames = []string{name}
	req.Resources = append(req.Resources, rr)
	r, err := c.Do(ctx, req)
	if err != nil {
		return "", false, 0, err
	}
	for _, res := range r.(*kmsg.DescribeConfigsResponse).Resources {
		if res.ResourceName != topic {
			continue
		}
		if res.ErrorCode != 0 {
			return "", false, res.ErrorCode, nil
		}
		for _, cv := range res.Configs {
			if cv.Name == name && cv.Value != nil {
				return *cv.Value, true, 0, nil
			}
		}
		return "", false, 0, nil
	}
	return "", false, 0, fmt.Errorf("%w: DescribeConfigs answer lacks topic %s", ErrMalformedResponse, topic)
}

// oldMessageMin is the shortest message of the formats before v2
// (magic 0 and 1): offset, size, crc, magic, attributes, key and value
// lengths.
const oldMessageMin = 8 + 4 + 4 + 1 + 1 + 4 + 4

// BatchHeaders decodes the headers of the complete entries at the start of
// data, the record data of a Fetch answer: v2 batches are returned with
// their CRC verified (an error wrapping [ErrCorruptBatch] when it does not
// match, or when an entry's header cannot be read); messages of the older
// formats are skipped; an entry cut short by the size limit, and what
// follows it, is left out. next is the offset after the last complete
// entry, -1 when there is none. Nothing is decompressed.
func BatchHeaders(data []byte) (headers []BatchInfo, next int64, err error) {
	next = -1
	for len(data) >= lengthBase {
		length := int64(int32(binary.BigEndian.Uint32(data[offLength:])))
		if length < 0 {
			return headers, next, fmt.Errorf("%w: negative entry length %d", ErrCorruptBatch, length)
		}
		if length+lengthBase > int64(len(data)) {
			break // cut short by the size limit
		}
		entry := data[:length+lengthBase]
		if len(entry) <= offMagic {
			return headers, next, fmt.Errorf("%w: entry of %d bytes has no magic byte", ErrCorruptBatch, len(entry))
		}
		if magic := int8(entry[offMagic]); magic < 2 {
			if len(entry) < oldMessageMin {
				return headers, next, fmt.Errorf("%w: message of %d bytes, need at least %d", ErrCorruptBatch, len(entry), oldMessageMin)
			}
			// An old-format entry's offset is its last (inner) offset.
			if off := int64(binary.BigEndian.Uint64(entry[offBaseOffset:])); off >= next && off < math.MaxInt64 {
				next = off + 1
			}
			data = data[len(entry):]
			continue
		}
		info, err := ParseBatchHeader(entry)
		if err != nil {
			return headers, next, err
		}
		if info.LastOffsetDelta < 0 {
			return headers, next, fmt.Errorf("%w: negative last offset delta %d", ErrCorruptBatch, info.LastOffsetDelta)
		}
		headers = append(headers, info)
		if last := info.BaseOffset + int64(info.LastOffsetDelta); last >= next && last < math.MaxInt64 {
			next = last + 1
		}
		data = data[len(entry):]
	}
	return headers, next, nil
}
