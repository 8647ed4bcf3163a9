package linkproxy

import (
	"encoding/binary"
	"sync"
	"sync/atomic"
)

// Kafka framing: every request and every response is a frame, a 4-byte
// big-endian size followed by that many bytes. A request's header begins
// with its api key (int16), api version (int16) and correlation id
// (int32); a response's with the correlation id of its request.
const (
	requestHeader  = 12 // size, api key, api version, correlation id
	responseHeader = 8  // size, correlation id
)

// DropRequests makes the proxy swallow the next n requests with api key
// key (0 is Produce) that clients send on any of its connections. Each
// is read whole from the client and never forwarded, not one byte of it:
// the bytes before it are delivered (after the delay), then its
// connection is cut and the bytes after it are discarded. The target
// never sees the request, and the client, which wrote all of it, cannot
// tell whether it was handled. n <= 0 turns it off; a call replaces the
// previous setting. [Stats].DroppedRequests counts the requests dropped.
//
// The proxy reads Kafka's framing from each connection's first byte, so
// it applies to links that carry Kafka in the clear (PLAINTEXT, or
// SASL_PLAINTEXT with SaslAuthenticate). A request read by the proxy
// before the call may escape it.
func (p *Proxy) DropRequests(key int16, n int) { p.dropReq.set(key, n) }

// DropResponses makes the proxy forward the next n requests with api key
// key that clients send, and swallow their responses: the response's
// bytes are never delivered, its connection is cut just before the
// first of them, after everything the target sent before it. The target
// handles the request; its client never hears of it. n <= 0 turns it off
// for the requests forwarded from then on; a call replaces the previous
// setting.
// [Stats].DroppedResponses counts the responses dropped. Framing as for
// [Proxy.DropRequests].
func (p *Proxy) DropResponses(key int16, n int) { p.dropResp.set(key, n) }

// dropRule is the setting of DropRequests or DropResponses.
type dropRule struct {
	mu   sync.Mutex
	key  int16
	left int
}

func (r *dropRule) set(key int16, n int) {
	r.mu.Lock()
	r.key, r.left = key, max(n, 0)
	r.mu.Unlock()
}

func (r *dropRule) armed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.left > 0
}

// take reports whether a request with api key key is one of the rule's,
// and counts it.
func (r *dropRule) take(key int16) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.left <= 0 || r.key != key {
		return false
	}
	r.left--
	return true
}

// marks are the correlation ids of one connection's requests whose
// responses are to be dropped.
type marks struct {
	mu  sync.Mutex
	ids map[int32]struct{}
}

func (m *marks) add(id int32) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ids == nil {
		m.ids = make(map[int32]struct{})
	}
	m.ids[id] = struct{}{}
}

func (m *marks) any() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.ids) > 0
}

// take reports whether id was marked, and unmarks it.
func (m *marks) take(id int32) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.ids[id]
	delete(m.ids, id)
	return ok
}

// framer follows the Kafka frames of one direction of a link and decides
// what of each read is forwarded. It is used by that direction's reader
// goroutine only.
type framer struct {
	responses bool // target to client
	req, resp *dropRule
	marks     *marks
	dropped   *atomic.Int64 // the proxy's count of this direction's drops

	off      bool // the bytes are not Kafka frames: forward them untouched
	rest     int  // bytes of the current frame still to pass
	part     [requestHeader]byte
	partN    int  // bytes of a header split across reads, already forwarded
	dropping bool // a dropped request is being read
	swallow  int  // bytes of it still to read
}

func newFramer(responses bool, req, resp *dropRule, m *marks, dropped *atomic.Int64) *framer {
	return &framer{responses: responses, req: req, resp: resp, marks: m, dropped: dropped}
}

func (f *framer) header() int {
	if f.responses {
		return responseHeader
	}
	return requestHeader
}

// armed reports whether a frame of this direction may be dropped: only
// then is a header split across reads held back until it is whole.
func (f *framer) armed() bool {
	if f.responses {
		return f.marks.any()
	}
	return f.req.armed() || f.resp.armed()
}

// scan judges b, the bytes of one read (after the held bytes of the
// previous one), last when no read follows. The first fwd bytes are
// forwarded; the last held bytes are an incomplete header to put in front
// of the next read; with cut, the link is cut once the fwd bytes are
// delivered, and nothing more is read.
func (f *framer) scan(b []byte, last bool) (fwd, held int, cut bool) {
	if f.off {
		return len(b), 0, false
	}
	if f.dropping {
		f.swallow -= min(f.swallow, len(b))
		return 0, 0, f.swallow == 0 || last
	}
	hl := f.header()
	for i := 0; i < len(b); {
		switch {
		case f.rest > 0:
			k := min(f.rest, len(b)-i)
			f.rest -= k
			i += k
		case f.partN > 0:
			// A header whose first bytes went out with an earlier read:
			// the frame passes unjudged.
			k := copy(f.part[f.partN:hl], b[i:])
			f.partN += k
			i += k
			if f.partN == hl {
				f.partN = 0
				if !f.frame(f.part[:hl]) {
					return len(b), 0, false
				}
			}
		case len(b)-i < hl:
			if !last && f.armed() {
				return i, len(b) - i, false
			}
			f.partN = copy(f.part[:], b[i:])
			i = len(b)
		default:
			h := b[i : i+hl]
			if !f.frame(h) {
				return len(b), 0, false
			}
			if f.responses {
				if f.marks.take(int32(binary.BigEndian.Uint32(h[4:]))) {
					f.dropped.Add(1)
					return i, 0, true
				}
			} else {
				key := int16(binary.BigEndian.Uint16(h[4:]))
				if f.req.take(key) {
					f.dropped.Add(1)
					f.dropping = true
					f.swallow = 4 + int(int32(binary.BigEndian.Uint32(h))) - (len(b) - i)
					f.swallow = max(f.swallow, 0)
					return i, 0, f.swallow == 0 || last
				}
				if f.resp.take(key) {
					f.marks.add(int32(binary.BigEndian.Uint32(h[8:])))
				}
			}
			i += hl
		}
	}
	return len(b), 0, false
}

// frame starts the frame whose header is h and reports whether it is one:
// a size too small to hold the header means the stream is not Kafka, and
// it is no longer parsed.
func (f *framer) frame(h []byte) bool {
	size := int(int32(binary.BigEndian.Uint32(h)))
	if size < len(h)-4 {
		f.off = true
		return false
	}
	f.rest = size - (len(h) - 4)
	return true
}
