package protocol

import (
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// MinLatestOffsetsVersion is the lowest ListOffsets version
// [SendLatestOffsets] sends: v4 (Kafka 2.1, KIP-320) carries
// CurrentLeaderEpoch, so a replica that no longer leads, or leads under
// another epoch, answers an error instead of an offset.
const MinLatestOffsetsVersion = 4

// OffsetQuery is one partition [SendLatestOffsets] asks about.
type OffsetQuery struct {
	Topic     string
	Partition int32
	// LeaderEpoch is sent as CurrentLeaderEpoch; -1 skips the check.
	LeaderEpoch int32
}

// OffsetAnswer is the answer for one [OffsetQuery].
type OffsetAnswer struct {
	// Answered is false when the response left the partition out.
	Answered  bool
	ErrorCode int16
	// Offset is the partition's latest offset, -1 with an error code.
	Offset int64
}

// SendLatestOffsets queues a ListOffsets request asking each of qs for its
// latest offset under read_uncommitted isolation (Kafka answers the high
// watermark) and returns without waiting, like [Conn.Send]: it goes on
// the wire after every request queued on c before it and before every
// request queued after it. done is called exactly once, never from inside
// SendLatestOffsets, on a goroutine of the connection, with the answers
// aligned with qs, or with an error as [Conn.Send] describes; c having no
// ListOffsets v4 or later is an error wrapping [ErrUnsupportedVersion].
func SendLatestOffsets(c *Conn, qs []OffsetQuery, timeout time.Duration, done func([]OffsetAnswer, error)) {
	if v, ok := c.Version(2); !ok || v < MinLatestOffsetsVersion {
		err := fmt.Errorf("%w: broker %s lacks ListOffsets v%d (negotiated v%d)", ErrUnsupportedVersion, c.addr, MinLatestOffsetsVersion, v)
		if !ok {
			err = fmt.Errorf("%w: broker %s lacks ListOffsets", ErrUnsupportedVersion, c.addr)
		}
		go done(nil, err)
		return
	}
	req := kmsg.NewPtrListOffsetsRequest()
	req.IsolationLevel = 0 // read_uncommitted: the high watermark
	for _, q := range qs {
		var rt *kmsg.ListOffsetsRequestTopic
		for i := range req.Topics {
			if req.Topics[i].Topic == q.Topic {
				rt = &req.Topics[i]
			}
		}
		if rt == nil {
			req.Topics = append(req.Topics, kmsg.NewListOffsetsRequestTopic())
			rt = &req.Topics[len(req.Topics)-1]
			rt.Topic = q.Topic
		}
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.CurrentLeaderEpoch, rp.Timestamp = q.Partition, q.LeaderEpoch, OffsetLatest
		rt.Partitions = append(rt.Partitions, rp)
	}
	qs = append([]OffsetQuery(nil), qs...)
	c.Send(req, timeout, func(r kmsg.Response, err error) {
		if err != nil {
			done(nil, err)
			return
		}
		done(latestAnswers(qs, r.(*kmsg.ListOffsetsResponse)), nil)
	})
}

// latestAnswers aligns resp's partitions with qs. A partition answered
// twice takes the first answer; an answer without an error code but with
// a negative offset is kept as it is (the caller decides).
func latestAnswers(qs []OffsetQuery, resp *kmsg.ListOffsetsResponse) []OffsetAnswer {
	out := make([]OffsetAnswer, len(qs))
	for i, q := range qs {
		out[i].Offset = -1
	found:
		for _, t := range resp.Topics {
			if t.Topic != q.Topic {
				continue
			}
			for _, p := range t.Partitions {
				if p.Partition == q.Partition {
					out[i] = OffsetAnswer{Answered: true, ErrorCode: p.ErrorCode, Offset: p.Offset}
					if p.ErrorCode != 0 {
						out[i].Offset = -1
					}
					break found
				}
			}
		}
	}
	return out
}
