package protocol

import (
	"encoding/binary"
	"net"
	"slices"
	"sync"

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

// encode fills f with req's frame. A ProduceRequest at v3+ is encoded by
// encodeProduce, referencing its record sets; everything else goes through
// [AppendRequest].
func (f *wireFrame) encode(req kmsg.Request, correlationID int32, clientID *string) {
	f.buf, f.refs = f.buf[:0], f.refs[:0]
	if pr, ok := req.(*kmsg.ProduceRequest); ok && pr.Version >= 3 && pr.Version <= MaxProduceVersion {
		f.buf = slices.Grow(f.buf, produceFrameHint(pr))
		f.encodeProduce(pr, correlationID, clientID)
		return
	}
	f.buf = AppendRequest(f.buf, req, correlationID, clientID)
}

// encodeProduce is [AppendRequest] for a ProduceRequest v3..v14 (the
// layout of kmsg's ProduceRequest.AppendTo, which v14 shares with v13),
// except that each partition's Records of at least minRefRecords bytes is
// referenced in f.refs instead of copied. Only the slice headers are kept,
// so req may be reused once encodeProduce returns.
func (f *wireFrame) encodeProduce(req *kmsg.ProduceRequest, correlationID int32, clientID *string) {
	v := req.Version
	flex := v >= 9
	dst := f.buf
	dst = append(dst, 0, 0, 0, 0) // size, set below
	dst = kbin.AppendInt16(dst, req.Key())
	dst = kbin.AppendInt16(dst, v)
	dst = kbin.AppendInt32(dst, correlationID)
	dst = kbin.AppendNullableString(dst, clientID)
	if flex {
		dst = append(dst, 0) // no header tags
		dst = kbin.AppendCompactNullableString(dst, req.TransactionID)
	} else {
		dst = kbin.AppendNullableString(dst, req.TransactionID)
	}
	dst = kbin.AppendInt16(dst, req.Acks)
	dst = kbin.AppendInt32(dst, req.TimeoutMillis)
	dst = appendArrayLen(dst, len(req.Topics), flex)
	referenced := 0
	for i := range req.Topics {
		t := &req.Topics[i]
		switch {
		case v >= 13:
			dst = kbin.AppendUuid(dst, t.TopicID)
		case flex:
			dst = kbin.AppendCompactString(dst, t.Topic)
		default:
			dst = kbin.AppendString(dst, t.Topic)
		}
		dst = appendArrayLen(dst, len(t.Partitions), flex)
		for j := range t.Partitions {
			p := &t.Partitions[j]
			dst = kbin.AppendInt32(dst, p.Partition)
			switch {
			case len(p.Records) < minRefRecords:
				if flex {
					dst = kbin.AppendCompactNullableBytes(dst, p.Records)
				} else {
					dst = kbin.AppendNullableBytes(dst, p.Records)
				}
			default:
				if flex {
					dst = kbin.AppendUvarint(dst, 1+uint32(len(p.Records)))
				} else {
					dst = kbin.AppendInt32(dst, int32(len(p.Records)))
				}
				f.refs = append(f.refs, wireRef{at: len(dst), b: p.Records})
				referenced += len(p.Records)
			}
			if flex {
				dst = appendTags(dst, &p.UnknownTags)
			}
		}
		if flex {
			dst = appendTags(dst, &t.UnknownTags)
		}
	}
	if flex {
		dst = appendTags(dst, &req.UnknownTags)
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

// appendTags appends a tag section as kmsg does for a struct with no known
// tags: the count, then each tag in key order.
func appendTags(dst []byte, t *kmsg.Tags) []byte {
	if t.Len() == 0 {
		return append(dst, 0)
	}
	dst = kbin.AppendUvarint(dst, uint32(t.Len()))
	return t.AppendEach(dst)
}

// produceFrameHint is how many bytes encodeProduce writes into buf for
// req, give or take the tags: the record sets it copies plus a prefix per
// partition and topic, so buf is grown once.
func produceFrameHint(req *kmsg.ProduceRequest) int {
	n := 64
	if req.TransactionID != nil {
		n += len(*req.TransactionID)
	}
	for i := range req.Topics {
		n += 32 + len(req.Topics[i].Topic)
		for j := range req.Topics[i].Partitions {
			n += 16
			if r := req.Topics[i].Partitions[j].Records; len(r) < minRefRecords {
				n += len(r)
			}
		}
	}
	return n
}
