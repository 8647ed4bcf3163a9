package protocol

import (
	"encoding/binary"
	"fmt"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// MaxProduceVersion is the highest Produce version this package speaks.
// kmsg's ProduceRequest stops at 13; v14 (KIP-1269) has the same request
// body and adds one tagged field to each partition response, which kmsg
// decodes into UnknownTags. kmsg's encoders and decoders compare versions
// with >=, so they handle v14 once the version is set.
const MaxProduceVersion = 14

// DefaultBatchesToRetain is the broker's dedup window when a response does
// not carry ProducerStateBatchesToRetain (versions before 14, or the tag
// omitted): Kafka's historical hard-coded 5.
const DefaultBatchesToRetain = 5

// tagBatchesToRetain is KIP-1269's tag for ProducerStateBatchesToRetain in a
// PartitionProduceResponse. Tag 0 is KIP-951's CurrentLeader. This is the
// only place in the repository that knows the number.
const tagBatchesToRetain = 1

// BatchesToRetain returns KIP-1269's ProducerStateBatchesToRetain (tag 1,
// int32, Produce v14+) from a kmsg partition response decoded at version
// (the server side, tests and tools: [Conn.Produce] hands the window over
// in [ProducePartitionResult]). For version < 14 or when the tag is absent
// it returns ([DefaultBatchesToRetain], false, nil). A tag whose value is
// not exactly 4 bytes returns (DefaultBatchesToRetain, false, err) with err
// wrapping [ErrMalformedResponse]. A present value is returned as sent,
// including 0 and negatives: the caller applies the "<= 0 means 5" policy
// and decides whether to log. It does not modify p and is safe to call
// concurrently on the same p.
func BatchesToRetain(version int16, p *kmsg.ProduceResponseTopicPartition) (n int32, present bool, err error) {
	n = DefaultBatchesToRetain
	if version < 14 || p.UnknownTags.Len() == 0 {
		return n, false, nil
	}
	var raw []byte
	p.UnknownTags.Each(func(key uint32, val []byte) {
		if key == tagBatchesToRetain {
			raw, present = val, true
		}
	})
	if !present {
		return n, false, nil
	}
	return windowValue(raw)
}

// windowValue reads a ProducerStateBatchesToRetain tag's value: an int32,
// or an error wrapping [ErrMalformedResponse] (and the default) for any
// other size.
func windowValue(raw []byte) (n int32, present bool, err error) {
	if len(raw) != 4 {
		return DefaultBatchesToRetain, false, fmt.Errorf("%w: ProducerStateBatchesToRetain (tag %d) is %d bytes, want 4", ErrMalformedResponse, tagBatchesToRetain, len(raw))
	}
	return int32(binary.BigEndian.Uint32(raw)), true, nil
}

// SetBatchesToRetain stores n as ProducerStateBatchesToRetain (tag 1) in p,
// replacing any previous value. [AppendResponse] encodes it only when the
// response's version is 14 or later (kmsg alone would write unknown tags at
// every flexible version, v9+). Not safe for concurrent use on the same p;
// p must not hold tags shared with another partition
// ([BatchesToRetainTags]).
func SetBatchesToRetain(p *kmsg.ProduceResponseTopicPartition, n int32) {
	p.UnknownTags.Set(tagBatchesToRetain, kbin.AppendInt32(nil, n))
}

// BatchesToRetainTags returns tagged fields holding only
// ProducerStateBatchesToRetain (tag 1) = n, to be assigned to the
// UnknownTags of partition responses: a server answering many partitions
// with the same window builds it once and shares it, where
// [SetBatchesToRetain] allocates for every partition. [AppendResponse]
// treats it as it treats SetBatchesToRetain's. Copies of the returned Tags
// share one map: none may be modified (Set) while another is in use.
func BatchesToRetainTags(n int32) kmsg.Tags {
	var t kmsg.Tags
	t.Set(tagBatchesToRetain, kbin.AppendInt32(nil, n))
	return t
}

// CurrentLeader returns KIP-951's CurrentLeader hint (tag 0, Produce v10+)
// from a partition response decoded at version: ok is false for older
// versions or when the broker left it at its default (-1, -1).
func CurrentLeader(version int16, p *kmsg.ProduceResponseTopicPartition) (leaderID, leaderEpoch int32, ok bool) {
	if version < 10 {
		return -1, -1, false
	}
	l := p.CurrentLeader
	if l.LeaderID < 0 && l.LeaderEpoch < 0 {
		return -1, -1, false
	}
	return l.LeaderID, l.LeaderEpoch, true
}

// maxVersion returns the highest version this package can encode and decode
// for key: MaxProduceVersion for Produce, kmsg's maximum otherwise, -1 for
// an unknown key.
func maxVersion(key int16) int16 {
	if key == 0 {
		return MaxProduceVersion
	}
	r := kmsg.RequestForKey(key)
	if r == nil {
		return -1
	}
	return r.MaxVersion()
}

// hasTag reports whether t holds key.
func hasTag(t *kmsg.Tags, key uint32) (found bool) {
	if t.Len() == 0 {
		return false
	}
	t.Each(func(k uint32, _ []byte) { found = found || k == key })
	return found
}

// withoutBatchesToRetain returns r, or when some partition carries tag 1, a
// copy of r whose partitions do not (sharing everything else), so that a
// response below v14 never puts the field on the wire.
func withoutBatchesToRetain(r *kmsg.ProduceResponse) *kmsg.ProduceResponse {
	found := false
	for i := range r.Topics {
		for j := range r.Topics[i].Partitions {
			found = found || hasTag(&r.Topics[i].Partitions[j].UnknownTags, tagBatchesToRetain)
		}
	}
	if !found {
		return r
	}
	c := *r
	c.Topics = append([]kmsg.ProduceResponseTopic(nil), r.Topics...)
	for i := range c.Topics {
		t := &c.Topics[i]
		t.Partitions = append([]kmsg.ProduceResponseTopicPartition(nil), t.Partitions...)
		for j := range t.Partitions {
			p := &t.Partitions[j]
			if !hasTag(&p.UnknownTags, tagBatchesToRetain) {
				continue
			}
			var kept kmsg.Tags
			p.UnknownTags.Each(func(k uint32, v []byte) {
				if k != tagBatchesToRetain {
					kept.Set(k, v)
				}
			})
			p.UnknownTags = kept
		}
	}
	return &c
}
