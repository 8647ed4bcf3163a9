package broker

import (
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/longhaul-kafka/longhaul/protocol"
)

// handlerFunc answers one decoded request. It runs with c.mu held and must
// not block. A nil response with a nil error writes nothing (acks=0); an
// error closes the connection; errWaitData asks to be called again, without
// the lock, once data arrives or r.waitUntil passes.
type handlerFunc func(c *Cluster, r *request) (kmsg.Response, error)

// apiSpec is one API key the broker serves: its version range and handler.
type apiSpec struct {
	min, max int16
	fn       handlerFunc
}

// apis is filled by each NN_name.go file's init.
var apis = map[int16]apiSpec{}

// regKey registers the handler of an API key for versions min..max.
func regKey(key, min, max int16, fn handlerFunc) {
	if _, ok := apis[key]; ok {
		panic(fmt.Sprintf("broker: api key %d registered twice", key))
	}
	apis[key] = apiSpec{min, max, fn}
}

// errWaitData is returned by a handler (Fetch) that wants to wait for new
// data before answering.
var errWaitData = errors.New("broker: wait for data")

// request is one request being handled.
type request struct {
	cc       *conn
	n        *node
	key      int16
	version  int16
	clientID string
	kreq     kmsg.Request
	readAt   time.Time
	p        *pending // the handler may set drop, close and inflight

	// For handlers returning errWaitData: the channel that signals new
	// data and the time the wait ends; final is set on the last call.
	waitCh    <-chan struct{}
	waitUntil time.Time
	final     bool
	// wait is what a waiting handler (JoinGroup, SyncGroup) keeps from one
	// call to the next.
	wait any
}

// handle decodes and answers one request frame, returning its pending
// response, or an error if the connection must be closed instead.
func (cc *conn) handle(frame []byte, readAt time.Time) (*pending, error) {
	c := cc.n.c
	hdr, kreq, err := protocol.ParseRequest(frame)
	isAV := hdr.Key == 18 && (err == nil || errors.Is(err, protocol.ErrUnsupportedVersion))
	if err != nil && !isAV {
		return nil, fmt.Errorf("%w: %w", errConnClose, err)
	}
	if err := cc.checkSASL(hdr.Key, readAt); err != nil {
		return nil, err
	}
	spec, ok := apis[hdr.Key]
	if !ok {
		return nil, fmt.Errorf("%w: api key %d not served", errConnClose, hdr.Key)
	}
	r := &request{cc: cc, n: cc.n, key: hdr.Key, version: hdr.Version, kreq: kreq, readAt: readAt}
	if hdr.ClientID != nil {
		r.clientID = *hdr.ClientID
	}
	r.p = &pending{corr: hdr.CorrelationID}

	c.mu.Lock()
	// A Kafka 2.4 node, or one with a Produce cap, refuses versions it
	// does not offer; an old-mode node still reads Produce v14 and
	// answers UNSUPPORTED_VERSION.
	nodeMax := spec.max
	if _, capped := cc.n.produceCap(); cc.n.kafka24 || capped {
		nodeMax = cc.n.maxVersion(hdr.Key, spec.max)
	}
	r.p.due = cc.n.paceIn(len(frame)+4, readAt).Add(cc.n.rtt)
	if cc.n.closeAfter > 0 {
		cc.n.closeAfter--
		r.p.close = cc.n.closeAfter == 0
	}
	c.mu.Unlock()

	if isAV && (err != nil || hdr.Version > spec.max) {
		// KIP-511: a version we do not serve is answered with a v0
		// response carrying UNSUPPORTED_VERSION and our range, so the
		// client can retry at a version we serve.
		r.p.resp = apiVersionsUnsupported()
		return r.p, nil
	}
	if hdr.Version < spec.min || hdr.Version > nodeMax && !isAV {
		return nil, fmt.Errorf("%w: api key %d version %d outside %d..%d", errConnClose, hdr.Key, hdr.Version, spec.min, nodeMax)
	}

	for {
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return nil, ErrClosed
		}
		resp, err := spec.fn(c, r)
		c.mu.Unlock()
		if errors.Is(err, errWaitData) && !r.final {
			if !cc.waitData(r) {
				return nil, ErrClosed
			}
			continue
		}
		if err != nil {
			c.release(r.p)
			return nil, err
		}
		r.p.resp = resp
		return r.p, nil
	}
}

// waitData waits for r.waitCh or r.waitUntil, marking r final once the
// deadline passed. It returns false if the connection or cluster closed.
func (cc *conn) waitData(r *request) bool {
	d := time.Until(r.waitUntil)
	if d <= 0 {
		r.final = true
		return true
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-r.waitCh:
	case <-tm.C:
		r.final = true
	case <-cc.done:
		return false
	case <-cc.n.c.die:
		return false
	}
	return true
}
