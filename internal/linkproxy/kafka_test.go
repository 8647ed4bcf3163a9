package linkproxy

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const (
	produceKey  = 0
	metadataKey = 3
)

// kafkaLike is a target that reads Kafka request frames and answers each
// with a response frame of the same correlation id and a 200-byte body.
// It keeps every request frame it received whole, and counts every byte.
type kafkaLike struct {
	addr  string
	bytes atomic.Int64
	mu    sync.Mutex
	reqs  [][]byte
}

func newKafkaLike(t *testing.T) *kafkaLike {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	k := &kafkaLike{addr: ln.Addr().String()}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				k.serve(c)
			}()
		}
	}()
	return k
}

func (k *kafkaLike) serve(c net.Conn) {
	for {
		var size [4]byte
		n, err := io.ReadFull(c, size[:])
		k.bytes.Add(int64(n))
		if err != nil {
			return
		}
		body := make([]byte, binary.BigEndian.Uint32(size[:]))
		n, err = io.ReadFull(c, body)
		k.bytes.Add(int64(n))
		if err != nil {
			return
		}
		k.mu.Lock()
		k.reqs = append(k.reqs, append(size[:], body...))
		k.mu.Unlock()
		resp := binary.BigEndian.AppendUint32(nil, 4+200)
		resp = append(resp, body[4:8]...)
		resp = append(resp, bytes.Repeat([]byte{'r'}, 200)...)
		if _, err := c.Write(resp); err != nil {
			return
		}
	}
}

// correlations returns the correlation ids of the requests received.
func (k *kafkaLike) correlations() []int32 {
	k.mu.Lock()
	defer k.mu.Unlock()
	var ids []int32
	for _, r := range k.reqs {
		ids = append(ids, int32(binary.BigEndian.Uint32(r[8:])))
	}
	return ids
}

// kafkaRequest is a request frame with key and correlation id corr and a
// body of n bytes.
func kafkaRequest(key int16, corr int32, n int) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(8+n))
	b = binary.BigEndian.AppendUint16(b, uint16(key))
	b = binary.BigEndian.AppendUint16(b, 9)
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	return append(b, bytes.Repeat([]byte{'q'}, n)...)
}

// readResponse reads one response frame and returns its correlation id.
func readResponse(c net.Conn) (int32, error) {
	var size [4]byte
	if _, err := io.ReadFull(c, size[:]); err != nil {
		return 0, err
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(c, body); err != nil {
		return 0, err
	}
	return int32(binary.BigEndian.Uint32(body)), nil
}

// waitFor polls ok for up to 10 s.
func waitFor(t *testing.T, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !ok(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached in 10 s")
		}
	}
}

func write(t *testing.T, c net.Conn, b []byte) {
	t.Helper()
	if _, err := c.Write(b); err != nil {
		t.Fatal(err)
	}
}

// expectCut reads c to its end and fails if any byte arrives.
func expectCut(t *testing.T, c net.Conn) {
	t.Helper()
	n, err := io.Copy(io.Discard, c)
	if n != 0 {
		t.Fatalf("%d bytes arrived after the drop", n)
	}
	if err != nil && !errors.Is(err, net.ErrClosed) && !isReset(err) {
		t.Fatalf("read after the drop: %v", err)
	}
}

func isReset(err error) bool {
	var op *net.OpError
	return errors.As(err, &op)
}

// TestDropRequestsSwallowsWholeRequestThenCuts: a Metadata request, a
// Produce request and another Produce request in one write: the target
// gets the Metadata request only, and the connection is then cut (the
// Metadata answer may be lost with it, as on a cut link); no byte of
// either Produce request reached the target, and no answer to them the
// client. The rule drops one request: the next connection's Produce
// request passes.
func TestDropRequestsSwallowsWholeRequestThenCuts(t *testing.T) {
	k := newKafkaLike(t)
	p := newProxy(t, k.addr)
	p.SetDelay(time.Millisecond)
	p.DropRequests(produceKey, 1)
	c := dial(t, p.Addr())
	c.SetDeadline(time.Now().Add(10 * time.Second))
	meta := kafkaRequest(metadataKey, 1, 30)
	var all []byte
	all = append(all, meta...)
	all = append(all, kafkaRequest(produceKey, 2, 5000)...)
	all = append(all, kafkaRequest(produceKey, 3, 10)...)
	write(t, c, all)
	for {
		id, err := readResponse(c)
		if err != nil {
			if os.IsTimeout(err) {
				t.Fatal("the connection was not cut")
			}
			break
		}
		if id != 1 {
			t.Fatalf("answer %d reached the client", id)
		}
	}
	waitFor(t, func() bool { return len(k.correlations()) == 1 })
	if got := k.correlations(); got[0] != 1 {
		t.Fatalf("target received requests %v, want [1]", got)
	}
	if got := k.bytes.Load(); got != int64(len(meta)) {
		t.Fatalf("target received %d bytes, want the Metadata request's %d", got, len(meta))
	}
	if st := p.Stats(); st.DroppedRequests != 1 || st.Cuts != 0 {
		t.Fatalf("stats: %d requests dropped, %d cuts; want 1, 0", st.DroppedRequests, st.Cuts)
	}

	c2 := dial(t, p.Addr())
	c2.SetDeadline(time.Now().Add(10 * time.Second))
	write(t, c2, kafkaRequest(produceKey, 4, 10))
	if id, err := readResponse(c2); err != nil || id != 4 {
		t.Fatalf("after the rule: id %d, %v; want 4", id, err)
	}
}

// TestDropRequestsHeaderSplitAcrossReads: while the rule is set, a
// Produce request written a byte at a time (its header split over many
// reads) is still recognised and dropped whole, and a Metadata request
// written the same way passes.
func TestDropRequestsHeaderSplitAcrossReads(t *testing.T) {
	k := newKafkaLike(t)
	p := newProxy(t, k.addr)
	p.DropRequests(produceKey, 1)
	c := dial(t, p.Addr())
	c.SetNoDelay(true)
	c.SetDeadline(time.Now().Add(10 * time.Second))
	meta := kafkaRequest(metadataKey, 7, 3)
	for i := range meta {
		write(t, c, meta[i:i+1])
		time.Sleep(time.Millisecond)
	}
	if id, err := readResponse(c); err != nil || id != 7 {
		t.Fatalf("Metadata response: id %d, %v", id, err)
	}
	prod := kafkaRequest(produceKey, 8, 3)
	for i := range prod {
		write(t, c, prod[i:i+1])
		time.Sleep(time.Millisecond)
	}
	expectCut(t, c)
	if got := k.bytes.Load(); got != int64(len(meta)) {
		t.Fatalf("target received %d bytes, want the Metadata request's %d", got, len(meta))
	}
}

// TestDropResponsesForwardsRequestLosesAnswer: the Produce request
// reaches the target, which answers; the client gets the answer to the
// request before it, then the cut, and no byte of the Produce answer.
func TestDropResponsesForwardsRequestLosesAnswer(t *testing.T) {
	k := newKafkaLike(t)
	p := newProxy(t, k.addr)
	p.SetDelay(time.Millisecond)
	p.DropResponses(produceKey, 1)
	c := dial(t, p.Addr())
	c.SetDeadline(time.Now().Add(10 * time.Second))
	write(t, c, kafkaRequest(metadataKey, 1, 30))
	if id, err := readResponse(c); err != nil || id != 1 {
		t.Fatalf("first response: id %d, %v; want 1", id, err)
	}
	write(t, c, kafkaRequest(produceKey, 2, 5000))
	expectCut(t, c)
	got := k.correlations()
	if len(got) != 2 || got[0] != 1 || got[1] != 2 {
		t.Fatalf("target received requests %v, want [1 2]", got)
	}
	if st := p.Stats(); st.DroppedResponses != 1 || st.DroppedRequests != 0 {
		t.Fatalf("stats: %d responses, %d requests dropped; want 1, 0", st.DroppedResponses, st.DroppedRequests)
	}
	// Used up: the next Produce answer arrives.
	c2 := dial(t, p.Addr())
	c2.SetDeadline(time.Now().Add(10 * time.Second))
	write(t, c2, kafkaRequest(produceKey, 9, 10))
	if id, err := readResponse(c2); err != nil || id != 9 {
		t.Fatalf("after the rule: id %d, %v; want 9", id, err)
	}
}

// TestDropOffPassesFramesUntouched: with no rule set, frames split at
// every point pass whole and in order, other api keys than the rule's
// pass while it is set, and turning a rule off (n 0) lets its key pass.
func TestDropOffPassesFramesUntouched(t *testing.T) {
	k := newKafkaLike(t)
	p := newProxy(t, k.addr)
	c := dial(t, p.Addr())
	c.SetNoDelay(true)
	c.SetDeadline(time.Now().Add(10 * time.Second))
	req := kafkaRequest(produceKey, 5, 20)
	for i := 1; i < len(req); i += 3 {
		write(t, c, req[:i])
		time.Sleep(time.Millisecond)
		write(t, c, req[i:])
		if id, err := readResponse(c); err != nil || id != 5 {
			t.Fatalf("split at %d: id %d, %v", i, id, err)
		}
	}
	p.DropRequests(metadataKey, 5)
	p.DropResponses(metadataKey, 5)
	write(t, c, req)
	if id, err := readResponse(c); err != nil || id != 5 {
		t.Fatalf("other key under a rule: id %d, %v", id, err)
	}
	p.DropRequests(metadataKey, 0)
	p.DropResponses(metadataKey, 0)
	write(t, c, kafkaRequest(metadataKey, 6, 1))
	if id, err := readResponse(c); err != nil || id != 6 {
		t.Fatalf("rule off: id %d, %v", id, err)
	}
	if st := p.Stats(); st.DroppedRequests != 0 || st.DroppedResponses != 0 {
		t.Fatalf("stats count drops with no rule: %+v", st)
	}
}

// FuzzFramer feeds a framer a byte stream in reads of the given sizes.
// With no rule, everything is forwarded, in order, and nothing is cut.
// With a Produce rule, what is forwarded is a prefix of the stream, and a
// read's forwarded and held bytes never overlap.
func FuzzFramer(f *testing.F) {
	f.Add(append(kafkaRequest(metadataKey, 1, 3), kafkaRequest(produceKey, 2, 4)...), []byte{5, 1, 200}, true)
	f.Add([]byte{0, 0, 0, 1, 9, 9, 9}, []byte{1}, false)
	f.Fuzz(func(t *testing.T, stream, sizes []byte, armed bool) {
		var req, resp dropRule
		if armed {
			req.set(produceKey, 1)
		}
		fr := newFramer(false, &req, &resp, &marks{}, new(atomic.Int64))
		var out, held []byte
		rest := stream
		cut := false
		for i := 0; len(rest) > 0 && !cut; i++ {
			n := len(rest)
			if len(sizes) > 0 {
				n = min(n, int(sizes[i%len(sizes)])+1)
			}
			b := append(held, rest[:n]...)
			rest = rest[n:]
			fwd, h, c := fr.scan(b, len(rest) == 0)
			if fwd+h > len(b) || fwd < 0 || h < 0 {
				t.Fatalf("scan of %d bytes: fwd %d held %d", len(b), fwd, h)
			}
			out = append(out, b[:fwd]...)
			held = append([]byte(nil), b[len(b)-h:]...)
			cut = c
		}
		if !bytes.HasPrefix(stream, out) {
			t.Fatalf("forwarded bytes are not a prefix of the stream")
		}
		if !armed && (!bytes.Equal(out, stream) || cut) {
			t.Fatalf("no rule: forwarded %d of %d bytes, cut %v", len(out), len(stream), cut)
		}
	})
}
