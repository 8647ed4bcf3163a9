package protocol

import (
	"encoding/binary"
	"math"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// wireFrame is one request as [Conn.Send] encodes it: buf holds every byte
// Send encoded, and refs the byte slices (produce record sets) that go on
// the wire between them without being copied into buf. Written in order,
// the segments are exactly [AppendRequest]'s frame.
type wireFrame struct {
	buf  []byte
	refs []wireRef
}

// wireRef is a slice written right after buf[:at] (and any earlier refs).
type wireRef struct {
	at int
	b  []byte
}

// minRefRecords is the smallest record set referenced rather than copied:
// below it, copying costs less than one more iovec (and, on TLS, one more
// buffered write).
const minRefRecords = 1024

// maxPooledFrame is the largest buf kept by framePool. Produce frames hold
// no record bytes above minRefRecords, so only large non-produce requests
// (or many small batches) come near it.
const maxPooledFrame = 16 << 20

// framePool recycles wireFrames once written.
var framePool = sync.Pool{New: func() any { return &wireFrame{buf: make([]byte, 0, 4096)} }}

func getFrame() *wireFrame { return framePool.Get().(*wireFrame) }

// putFrame drops f's references to the caller's bytes and pools it.
func putFrame(f *wireFrame) {
	if f == nil {
		return
	}
	clear(f.refs)
	f.refs = f.refs[:0]
	f.buf = f.buf[:0]
	if cap(f.buf) <= maxPooledFrame {
		framePool.Put(f)
	}
}

// appendBuffers appends f's segments to bufs, in wire order.
func (f *wireFrame) appendBuffers(bufs net.Buffers) net.Buffers {
	prev := 0
	for _, r := range f.refs {
		if r.at > prev {
			bufs = append(bufs, f.buf[prev:r.at])
		}
		bufs = append(bufs, r.b)
		prev = r.at
	}
	if prev < len(f.buf) {
		bufs = append(bufs, f.buf[prev:])
	}
	return bufs
}

// encode fills f with req's frame, every byte copied ([AppendRequest]).
// Produce requests that reference their record sets are [ProduceRequest]s
// ([wireFrame.encodeProduce]).
func (f *wireFrame) encode(req kmsg.Request, correlationID int32, clientID *string) {
	f.buf, f.refs = f.buf[:0], f.refs[:0]
	f.buf = AppendRequest(f.buf, req, correlationID, clientID)
}

// ProduceRequest is a produce request being built for [Conn.Produce]: its
// settings, then one record batch per [ProduceRequest.Add]. Reused after
// [ProduceRequest.Reset], it allocates nothing once its slices have grown.
// The zero value is an empty request with Acks 0.
type ProduceRequest struct {
	// TransactionalID is the transactional id the batches are written
	// under; nil for an idempotent producer without one.
	TransactionalID *string
	// Acks is how many replicas must have a batch before the broker
	// answers: -1 (every in-sync replica), 1 (the leader), or 0 (the
	// broker sends no response at all).
	Acks int16
	// Timeout is how long the broker may wait for the replicas, sent in
	// whole milliseconds (at most 2^31-1).
	Timeout time.Duration
	// MaxVersion, when positive, caps the Produce version the request is
	// sent at below the connection's negotiated one (a transaction of
	// version 1 sends at most [MaxTV1ProduceVersion]); it must be 3 or
	// more.
	MaxVersion int16

	topics []produceTopic
	n      int32 // batches added
}

// produceTopic is one topic of a ProduceRequest and its batches, in the
// order they were added.
type produceTopic struct {
	name string
	id   [16]byte
	adds []produceAdd
}

// produceAdd is one batch: index is its Add's position among all Adds.
type produceAdd struct {
	index     int32
	partition int32
	records   []byte
}

// Add appends a batch for partition of the topic named topic with id
// topicID (Produce v13+ names topics by id, earlier versions by name).
// Batches of the same topic name and id go in one topic of the request, in
// the order they were added. records is a RecordBatch, referenced, not
// copied: it must stay unchanged until the request's completion has run
// (see [Conn.Produce]).
func (r *ProduceRequest) Add(topic string, topicID [16]byte, partition int32, records []byte) {
	i := len(r.topics) - 1
	for i >= 0 && (r.topics[i].name != topic || r.topics[i].id != topicID) {
		i--
	}
	if i < 0 {
		i = len(r.topics)
		if i < cap(r.topics) {
			r.topics = r.topics[:i+1] // keeps the old topic's adds array
		} else {
			r.topics = append(r.topics, produceTopic{})
		}
		t := &r.topics[i]
		t.name, t.id, t.adds = topic, topicID, t.adds[:0]
	}
	t := &r.topics[i]
	t.adds = append(t.adds, produceAdd{index: r.n, partition: partition, records: records})
	r.n++
}

// Len returns the number of batches added since the last Reset.
func (r *ProduceRequest) Len() int { return int(r.n) }

// Reset removes every batch, and the request's references to their bytes,
// keeping the settings and the memory for the next request.
func (r *ProduceRequest) Reset() {
	for i := range r.topics {
		clear(r.topics[i].adds)
		r.topics[i].adds = r.topics[i].adds[:0]
	}
	r.topics = r.topics[:0]
	r.n = 0
}

// encodeProduce fills f with req's frame at version (3 to
// [MaxProduceVersion]): the bytes [AppendRequest] would write for the
// equivalent kmsg.ProduceRequest, except that each batch of at least
// minRefRecords bytes is referenced in f.refs instead of copied. Only the
// slice headers are kept, so req may be reused once encodeProduce returns.
func (f *wireFrame) encodeProduce(req *ProduceRequest, version int16, correlationID int32, clientID *string) {
	flex := version >= 9
	dst := slices.Grow(f.buf[:0], req.frameHint())
	f.refs = f.refs[:0]
	dst = append(dst, 0, 0, 0, 0)  // size, set below
	dst = kbin.AppendInt16(dst, 0) // Produce
	dst = kbin.AppendInt16(dst, version)
	dst = kbin.AppendInt32(dst, correlationID)
	dst = kbin.AppendNullableString(dst, clientID)
	if flex {
		dst = append(dst, 0) // no header tags
		dst = kbin.AppendCompactNullableString(dst, req.TransactionalID)
	} else {
		dst = kbin.AppendNullableString(dst, req.TransactionalID)
	}
	dst = kbin.AppendInt16(dst, req.Acks)
	dst = kbin.AppendInt32(dst, int32(min(req.Timeout.Milliseconds(), math.MaxInt32)))
	dst = appendArrayLen(dst, len(req.topics), flex)
	referenced := 0
	for i := range req.topics {
		t := &req.topics[i]
		switch {
		case version >= 13:
			dst = kbin.AppendUuid(dst, t.id)
		case flex:
			dst = kbin.AppendCompactString(dst, t.name)
		default:
			dst = kbin.AppendString(dst, t.name)
		}
		dst = appendArrayLen(dst, len(t.adds), flex)
		for _, a := range t.adds {
			dst = kbin.AppendInt32(dst, a.partition)
			switch {
			case len(a.records) < minRefRecords:
				if flex {
					dst = kbin.AppendCompactNullableBytes(dst, a.records)
				} else {
					dst = kbin.AppendNullableBytes(dst, a.records)
				}
			default:
				if flex {
					dst = kbin.AppendUvarint(dst, 1+uint32(len(a.records)))
				} else {
					dst = kbin.AppendInt32(dst, int32(len(a.records)))
				}
				f.refs = append(f.refs, wireRef{at: len(dst), b: a.records})
				referenced += len(a.records)
			}
			if flex {
				dst = append(dst, 0) // no partition tags
			}
		}
		if flex {
			dst = append(dst, 0) // no topic tags
		}
	}
	if flex {
		dst = append(dst, 0) // no request tags
	}
	binary.BigEndian.PutUint32(dst, uint32(len(dst)-4+referenced))
	f.buf = dst
}

func appendArrayLen(dst []byte, n int, flex bool) []byte {
	if flex {
		return kbin.AppendCompactArrayLen(dst, n)
	}
	return kbin.AppendArrayLen(dst, n)
}

// frameHint is how many bytes encodeProduce writes into buf for r: the
// record sets it copies plus a prefix per partition and topic, so buf is
// grown once.
func (r *ProduceRequest) frameHint() int {
	n := 64
	if r.TransactionalID != nil {
		n += len(*r.TransactionalID)
	}
	for i := range r.topics {
		n += 32 + len(r.topics[i].name)
		for _, a := range r.topics[i].adds {
			n += 16
			if len(a.records) < minRefRecords {
				n += len(a.records)
			}
		}
	}
	return n
}
