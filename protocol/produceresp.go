package protocol

import (
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
)

// ProduceResult is the broker's answer to one [Conn.Produce], decoded into
// memory the caller owns: Partitions[i] answers the i-th
// [ProduceRequest.Add]. Reused for request after request, it allocates
// nothing once its slices have grown, except for what only an error
// carries (messages, record errors) and NodeEndpoints.
type ProduceResult struct {
	// Version is the Produce version the request was sent at.
	Version int16
	// Throttle is how long the broker throttles the connection for quota
	// (ThrottleTimeMs, v1+).
	Throttle time.Duration
	// Partitions holds one answer per batch, in the order of the Adds.
	Partitions []ProducePartitionResult
	// NodeEndpoints are the brokers the partitions' leader hints name,
	// with their addresses (KIP-951, v10+); nil when the response has none.
	NodeEndpoints []NodeEndpoint

	topics []resultTopic // the request's topics, to match answers to Adds
	order  []int32       // indices into Partitions, in the order they went on the wire
}

// resultTopic is one topic of the request a result answers.
type resultTopic struct {
	name string
	id   [16]byte
}

// ProducePartitionResult is the answer for one batch.
type ProducePartitionResult struct {
	// Topic, TopicID and Partition are the batch's, as added.
	Topic     string
	TopicID   [16]byte
	Partition int32
	// Answered is false when the response left the partition out, or the
	// request was sent with Acks 0 (no response): nothing is known of the
	// batch's fate, and the fields below keep their defaults.
	Answered bool
	// ErrorCode is Kafka's error code for the batch: 0 when it was
	// appended.
	ErrorCode int16
	// ErrorMessage is the broker's text for ErrorCode (v8+), "" if none.
	ErrorMessage string
	// BaseOffset is the offset of the batch's first record (-1 when the
	// batch was not appended).
	BaseOffset int64
	// LogAppendTime is the broker's timestamp for the batch when the topic
	// uses LogAppendTime (v2+); -1 otherwise.
	LogAppendTime int64
	// LogStartOffset is the partition's log start offset (v5+); -1 before.
	LogStartOffset int64
	// RecordErrors name the records that made the batch fail (v8+).
	RecordErrors []RecordError
	// Window is KIP-1269's ProducerStateBatchesToRetain, as sent (0 and
	// negatives included: the caller applies its policy), when
	// WindowPresent (v14+, the tag present and 4 bytes long); otherwise
	// [DefaultBatchesToRetain].
	Window        int32
	WindowPresent bool
	// WindowErr, when non-nil, wraps [ErrMalformedResponse]: the tag was
	// present but not 4 bytes long. The rest of the answer stands.
	WindowErr error
	// LeaderID and LeaderEpoch are KIP-951's CurrentLeader hint (v10+):
	// the partition's leader as the broker knows it, -1 when absent.
	LeaderID, LeaderEpoch int32

	topic int32 // index in ProduceResult.topics
}

// RecordError names one record of a batch that failed (v8+).
type RecordError struct {
	// RelativeOffset is the record's index in its batch.
	RelativeOffset int32
	// Message is the broker's text, "" if none.
	Message string
}

// NodeEndpoint is a broker named in a ProduceResponse (KIP-951).
type NodeEndpoint struct {
	NodeID int32
	Host   string
	Port   int32
	Rack   string // "" if none
}

// unanswered is a partition's result before (or without) its answer.
func (p *ProducePartitionResult) unanswered() {
	*p = ProducePartitionResult{
		Topic: p.Topic, TopicID: p.TopicID, Partition: p.Partition, topic: p.topic,
		BaseOffset: -1, LogAppendTime: -1, LogStartOffset: -1,
		Window: DefaultBatchesToRetain, LeaderID: -1, LeaderEpoch: -1,
	}
}

// reset makes r the result of req sent at version, every partition
// unanswered.
func (r *ProduceResult) reset(req *ProduceRequest, version int16) {
	r.Version, r.Throttle, r.NodeEndpoints = version, 0, nil
	r.topics = r.topics[:0]
	r.order = r.order[:0]
	n := req.Len()
	if cap(r.Partitions) < n {
		r.Partitions = make([]ProducePartitionResult, n)
	}
	r.Partitions = r.Partitions[:n]
	for ti := range req.topics {
		t := &req.topics[ti]
		r.topics = append(r.topics, resultTopic{name: t.name, id: t.id})
		for _, a := range t.adds {
			p := &r.Partitions[a.index]
			p.Topic, p.TopicID, p.Partition, p.topic = t.name, t.id, a.partition, int32(ti)
			p.unanswered()
			r.order = append(r.order, a.index)
		}
	}
}

// decodeProduceFrame decodes a response frame (after its size) answering
// a produce request sent at version with correlationID into r. Errors wrap
// [ErrMalformedResponse]; r is then partly filled and must not be used.
func decodeProduceFrame(frame []byte, version int16, correlationID int32, r *ProduceResult) error {
	id, err := ResponseCorrelationID(frame)
	if err != nil {
		return err
	}
	if id != correlationID {
		return fmt.Errorf("%w: correlation id %d, want %d", ErrMalformedResponse, id, correlationID)
	}
	b := kbin.Reader{Src: frame[4:]}
	if version >= 9 && !skipTags(&b) {
		return fmt.Errorf("%w: bad header tags", ErrMalformedResponse)
	}
	if err := r.decode(b.Src); err != nil {
		return fmt.Errorf("%w: key 0 v%d: %w", ErrMalformedResponse, version, err)
	}
	return nil
}

// Smallest encodings of one array element, in bytes; an array whose length
// times its element's minimum exceeds what is left cannot be complete, so
// it is rejected before anything is allocated for it. They are the minima
// kmsg checks, and hold at every version they are used for: the decoder
// accepts exactly the bodies kmsg's ProduceResponse.ReadFrom accepts
// (FuzzProduceResponseDecoder holds it to that).
const (
	minTopicV0       = 2  // topic name length, at least
	minTopicV13      = 18 // uuid, compact array length, tag count
	minPartitionV0   = 14 // partition, error code, base offset
	minPartitionV8   = 33 // + log append time, log start offset, record errors, error message (+ tags)
	minRecordError   = 6  // relative offset, error message (+ tags)
	minNodeEndpoints = 11 // node id, host, port, rack, tags
)

// produceDecoder reads one ProduceResponse body.
type produceDecoder struct {
	b        kbin.Reader
	version  int16
	flexible bool
}

// decode decodes a ProduceResponse body at r.Version into r, which reset
// prepared: each partition answer fills the result of the Add it answers
// (the first unanswered one with its topic and partition, looked for where
// the previous answer was found first, so an answer in request order is
// matched in O(1)); an answer for a partition not asked for is checked and
// dropped. The error is kbin.ErrNotEnoughData for any malformed body.
func (r *ProduceResult) decode(body []byte) error {
	d := produceDecoder{b: kbin.Reader{Src: body}, version: r.Version, flexible: r.Version >= 9}
	b := &d.b
	minTopic := int64(minTopicV0)
	if d.version >= 13 {
		minTopic = minTopicV13
	}
	n, err := d.arrayLen(minTopic)
	if err != nil {
		return err
	}
	next := 0 // position in r.order where the next answer is expected
	for ti := range n {
		var name []byte
		var id [16]byte
		if d.version <= 12 {
			name = d.stringBytes()
		} else {
			id = b.Uuid()
		}
		topic := r.findTopic(int(ti), name, id)
		minPart := int64(minPartitionV0)
		if d.version >= 8 {
			minPart = minPartitionV8
		}
		np, err := d.arrayLen(minPart)
		if err != nil {
			return err
		}
		for range np {
			var scratch ProducePartitionResult
			partition := b.Int32()
			p := &scratch
			if at := r.match(topic, partition, next); at >= 0 {
				p = &r.Partitions[r.order[at]]
				p.Answered = true
				next = at + 1
			}
			if err := d.partition(p, p != &scratch); err != nil {
				return err
			}
		}
		if d.flexible {
			d.skipTags()
		}
	}
	if d.version >= 1 {
		r.Throttle = time.Duration(b.Int32()) * time.Millisecond
	}
	if d.flexible {
		for n := b.Uvarint(); n > 0 && b.Ok(); n-- {
			key := b.Uvarint()
			val := b.Span(int(b.Uvarint()))
			if key != 0 {
				continue
			}
			if err := d.nodeEndpoints(r, val); err != nil {
				return err
			}
		}
	}
	return b.Complete()
}

// findTopic returns the index in r.topics of the request's topic an answer
// names (by id from v13, by name before), -1 if none; the answer's
// position at is tried first.
func (r *ProduceResult) findTopic(at int, name []byte, id [16]byte) int32 {
	same := func(t *resultTopic) bool {
		if r.Version >= 13 {
			return t.id == id
		}
		return t.name == string(name)
	}
	if at < len(r.topics) && same(&r.topics[at]) {
		return int32(at)
	}
	for i := range r.topics {
		if same(&r.topics[i]) {
			return int32(i)
		}
	}
	return -1
}

// match returns the position in r.order of the first unanswered partition
// of topic with the given number, trying position next first; -1 if none.
func (r *ProduceResult) match(topic, partition int32, next int) int {
	if topic < 0 {
		return -1
	}
	ok := func(at int) bool {
		p := &r.Partitions[r.order[at]]
		return p.topic == topic && p.Partition == partition && !p.Answered
	}
	if next < len(r.order) && ok(next) {
		return next
	}
	for at := range r.order {
		if ok(at) {
			return at
		}
	}
	return -1
}

// arrayLen reads an array length of elements of at least size bytes each;
// a negative length is a null array, read as empty. A length that what is
// left cannot hold is an error, so a hostile length never sizes an
// allocation.
func (d *produceDecoder) arrayLen(size int64) (int32, error) {
	var n int32
	if d.flexible {
		n = d.b.CompactArrayLen()
	} else {
		n = d.b.ArrayLen()
	}
	if !d.b.Ok() || int64(n)*size > int64(len(d.b.Src)) {
		return 0, kbin.ErrNotEnoughData
	}
	return max(n, 0), nil
}

// stringBytes reads a string's bytes without copying them.
func (d *produceDecoder) stringBytes() []byte {
	var l int
	if d.flexible {
		l = int(d.b.Uvarint()) - 1
	} else {
		l = int(d.b.Int16())
	}
	return d.b.Span(l)
}

// nullableString reads a nullable string, copied; null reads as "".
func (d *produceDecoder) nullableString() string {
	var l int
	if d.flexible {
		l = int(d.b.Uvarint()) - 1
	} else {
		l = int(d.b.Int16())
	}
	if l < 0 {
		return ""
	}
	return string(d.b.Span(l))
}

// skipTags reads a tagged-field section whose tags are all unknown.
func (d *produceDecoder) skipTags() {
	b := &d.b
	for n := b.Uvarint(); n > 0 && b.Ok(); n-- {
		b.Uvarint() // key
		b.Span(int(b.Uvarint()))
	}
}

// partition decodes one partition answer after its number into p; keep
// false decodes it only to check it (nothing is allocated for it).
func (d *produceDecoder) partition(p *ProducePartitionResult, keep bool) error {
	b := &d.b
	p.ErrorCode = b.Int16()
	p.BaseOffset = b.Int64()
	if d.version >= 2 {
		p.LogAppendTime = b.Int64()
	}
	if d.version >= 5 {
		p.LogStartOffset = b.Int64()
	}
	if d.version >= 8 {
		n, err := d.arrayLen(minRecordError)
		if err != nil {
			return err
		}
		if n > 0 && keep {
			p.RecordErrors = make([]RecordError, n)
		}
		for i := range int(n) {
			offset := b.Int32()
			msg := d.nullableString()
			if keep {
				p.RecordErrors[i] = RecordError{RelativeOffset: offset, Message: msg}
			}
			if d.flexible {
				d.skipTags()
			}
		}
		p.ErrorMessage = d.nullableString()
	}
	if !d.flexible {
		return nil
	}
	for n := b.Uvarint(); n > 0 && b.Ok(); n-- {
		key := b.Uvarint()
		val := b.Span(int(b.Uvarint()))
		switch {
		case key == 0:
			if err := d.currentLeader(p, val); err != nil {
				return err
			}
		case key == tagBatchesToRetain && d.version >= 14:
			// A repeated tag replaces the earlier one, as in kmsg.
			p.Window, p.WindowPresent, p.WindowErr = windowValue(val)
		}
	}
	return nil
}

// currentLeader decodes CurrentLeader (partition tag 0, v10+; read at
// every flexible version, as kmsg does) from its tag value.
func (d *produceDecoder) currentLeader(p *ProducePartitionResult, val []byte) error {
	inner := produceDecoder{b: kbin.Reader{Src: val}, version: d.version, flexible: true}
	p.LeaderID = inner.b.Int32()
	p.LeaderEpoch = inner.b.Int32()
	inner.skipTags()
	return inner.b.Complete()
}

// nodeEndpoints decodes NodeEndpoints (top-level tag 0, v10+; read at every
// flexible version, as kmsg does) from its tag value; a repeated tag
// replaces the earlier one.
func (d *produceDecoder) nodeEndpoints(r *ProduceResult, val []byte) error {
	inner := produceDecoder{b: kbin.Reader{Src: val}, version: d.version, flexible: true}
	b := &inner.b
	n, err := inner.arrayLen(minNodeEndpoints)
	if err != nil {
		return err
	}
	r.NodeEndpoints = nil
	if n > 0 {
		r.NodeEndpoints = make([]NodeEndpoint, n)
	}
	for i := range r.NodeEndpoints {
		e := &r.NodeEndpoints[i]
		e.NodeID = b.Int32()
		e.Host = string(inner.stringBytes())
		e.Port = b.Int32()
		e.Rack = inner.nullableString()
		inner.skipTags()
	}
	return b.Complete()
}
