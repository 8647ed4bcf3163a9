package kafkatest

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// respDropper wraps the producer's connections and loses Produce
// responses: when one is chosen, the connection is closed before any byte
// of that response reaches the producer, so the request was handled by the
// broker (the batch is in the log) but the producer never hears of it and
// must retry into the broker's deduplication. Each Produce response is
// dropped with probability 1/every while enabled.
type respDropper struct {
	every   int
	enabled atomic.Bool
	dropped atomic.Int64
	mu      sync.Mutex
	rng     *rand.Rand
	inits   []*kmsg.InitProducerIDRequest // every InitProducerId sent, decoded
}

// initRequests returns the InitProducerId requests seen so far.
func (d *respDropper) initRequests() []*kmsg.InitProducerIDRequest {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.inits)
}

// recordInit decodes a whole InitProducerId request frame (size prefix
// included) and keeps it; undecodable frames are kept as nil so a test
// notices.
func (d *respDropper) recordInit(frame []byte) {
	r := kbin.Reader{Src: frame[4:]}
	r.Int16() // key
	req := kmsg.NewPtrInitProducerIDRequest()
	req.Version = r.Int16()
	r.Int32()          // correlation id
	r.NullableString() // client id
	if req.IsFlexible() {
		for range r.Uvarint() {
			r.Uvarint()
			r.Span(int(r.Uvarint()))
		}
	}
	if !r.Ok() || req.ReadFrom(r.Src) != nil {
		req = nil
	}
	d.mu.Lock()
	d.inits = append(d.inits, req)
	d.mu.Unlock()
}

func newRespDropper(seed uint64, every int) *respDropper {
	return &respDropper{every: every, rng: rand.New(rand.NewPCG(seed, 15))}
}

func (d *respDropper) choose() bool {
	if !d.enabled.Load() {
		return false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.rng.IntN(d.every) == 0
}

func (d *respDropper) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var nd net.Dialer
	c, err := nd.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &dropConn{Conn: c, d: d, keys: map[int32]int16{}}, nil
}

// initProducerIDKey is InitProducerId's api key.
var initProducerIDKey = kmsg.NewPtrInitProducerIDRequest().Key()

// errResponseDropped is what the producer reads instead of a dropped
// response: the connection is gone.
var errResponseDropped = errors.New("kafkatest: response dropped, connection closed")

// dropConn tracks request correlation ids and api keys on Write, and on
// Read passes whole response frames only, so a dropped one is never
// partly delivered.
type dropConn struct {
	net.Conn
	d *respDropper

	wmu  sync.Mutex
	whdr []byte // current request frame's first 12 bytes
	skip int    // request bytes still to pass over
	init []byte // the InitProducerId frame being captured
	keys map[int32]int16

	rbuf   []byte // raw bytes read, not yet whole frames
	out    []byte // whole frames ready for the reader
	judged bool   // the frame at the head of rbuf was chosen to pass
	closed bool
}

func (c *dropConn) Write(b []byte) (int, error) {
	c.wmu.Lock()
	for rest := b; len(rest) > 0; {
		if c.skip > 0 {
			n := min(c.skip, len(rest))
			if c.init != nil {
				c.init = append(c.init, rest[:n]...)
			}
			c.skip -= n
			rest = rest[n:]
			if c.skip == 0 && c.init != nil {
				c.d.recordInit(c.init)
				c.init = nil
			}
			continue
		}
		n := min(12-len(c.whdr), len(rest))
		c.whdr = append(c.whdr, rest[:n]...)
		rest = rest[n:]
		if len(c.whdr) < 12 {
			break
		}
		size := int(int32(binary.BigEndian.Uint32(c.whdr)))
		key := int16(binary.BigEndian.Uint16(c.whdr[4:]))
		corr := int32(binary.BigEndian.Uint32(c.whdr[8:]))
		c.keys[corr] = key
		if key == initProducerIDKey {
			c.init = append([]byte{}, c.whdr...)
		}
		c.whdr = c.whdr[:0]
		c.skip = size - 8 // key, version and correlation id are read
		if c.skip == 0 && c.init != nil {
			c.d.recordInit(c.init)
			c.init = nil
		}
	}
	c.wmu.Unlock()
	return c.Conn.Write(b)
}

func (c *dropConn) Read(p []byte) (int, error) {
	for len(c.out) == 0 {
		if c.closed {
			return 0, errResponseDropped
		}
		buf := make([]byte, 64<<10)
		n, err := c.Conn.Read(buf)
		c.rbuf = append(c.rbuf, buf[:n]...)
		for len(c.rbuf) >= 8 {
			size := int(binary.BigEndian.Uint32(c.rbuf))
			corr := int32(binary.BigEndian.Uint32(c.rbuf[4:]))
			c.wmu.Lock()
			key, ok := c.keys[corr]
			c.wmu.Unlock()
			if !c.judged {
				if ok && key == produceKey && c.d.choose() {
					c.d.dropped.Add(1)
					c.closed = true
					c.Conn.Close()
					break
				}
				c.judged = true
			}
			if len(c.rbuf) < 4+size {
				break
			}
			c.wmu.Lock()
			delete(c.keys, corr)
			c.wmu.Unlock()
			c.out = append(c.out, c.rbuf[:4+size]...)
			c.rbuf = c.rbuf[4+size:]
			c.judged = false
		}
		if len(c.out) > 0 {
			break
		}
		if err != nil && !c.closed {
			return 0, err
		}
	}
	n := copy(p, c.out)
	c.out = c.out[n:]
	return n, nil
}

// fakeBroker answers every request frame on one connection with a
// response frame of the same correlation id and a 300-byte body, written
// in two parts so that frames arrive split.
func fakeBroker(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		for {
			var hdr [12]byte
			if _, err := io.ReadFull(c, hdr[:]); err != nil {
				return
			}
			body := make([]byte, binary.BigEndian.Uint32(hdr[:])-8)
			if _, err := io.ReadFull(c, body); err != nil {
				return
			}
			resp := binary.BigEndian.AppendUint32(nil, 4+300)
			resp = append(resp, hdr[8:12]...)
			resp = append(resp, bytes.Repeat([]byte{'r'}, 300)...)
			c.Write(resp[:6])
			time.Sleep(time.Millisecond)
			if _, err := c.Write(resp[6:]); err != nil {
				return
			}
		}
	}()
	return ln.Addr().String()
}

// request writes a request frame with key and correlation id corr.
func request(t *testing.T, c net.Conn, key int16, corr int32) {
	t.Helper()
	b := binary.BigEndian.AppendUint32(nil, 8+5)
	b = binary.BigEndian.AppendUint16(b, uint16(key))
	b = binary.BigEndian.AppendUint16(b, 9)
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	b = append(b, "hello"...)
	_, err := c.Write(b)
	require.NoError(t, err)
}

// TestRespDropperWholeFramesAndDrops checks the fault injector itself:
// responses arrive whole and intact while it is off or for other APIs, and
// a chosen Produce response is lost entirely with the connection closed.
func TestRespDropperWholeFramesAndDrops(t *testing.T) {
	d := newRespDropper(1, 1) // every Produce response, once enabled
	c, err := d.dial(context.Background(), "tcp", fakeBroker(t))
	require.NoError(t, err)
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))

	read := func() ([]byte, error) {
		var hdr [4]byte
		if _, err := io.ReadFull(c, hdr[:]); err != nil {
			return nil, err
		}
		body := make([]byte, binary.BigEndian.Uint32(hdr[:]))
		_, err := io.ReadFull(c, body)
		return body, err
	}
	request(t, c, produceKey, 1) // disabled: passes
	body, err := read()
	require.NoError(t, err)
	assert.Equal(t, []byte{0, 0, 0, 1}, body[:4])
	assert.Len(t, body, 304)

	d.enabled.Store(true)
	request(t, c, 3, 2) // Metadata: never dropped
	body, err = read()
	require.NoError(t, err)
	assert.Equal(t, []byte{0, 0, 0, 2}, body[:4])

	// An InitProducerId request, written in two pieces, is decoded.
	ip := kmsg.NewPtrInitProducerIDRequest()
	ip.Version, ip.ProducerID, ip.ProducerEpoch = 4, 7, 3
	frame := binary.BigEndian.AppendUint32(nil, 0)
	frame = binary.BigEndian.AppendUint16(frame, uint16(initProducerIDKey))
	frame = binary.BigEndian.AppendUint16(frame, 4)
	frame = binary.BigEndian.AppendUint32(frame, 4)
	frame = append(frame, 0, 2, 'l', 'h', 0) // client id, no tags
	frame = ip.AppendTo(frame)
	binary.BigEndian.PutUint32(frame, uint32(len(frame)-4))
	for _, part := range [][]byte{frame[:7], frame[7:]} {
		_, err := c.Write(part)
		require.NoError(t, err)
	}
	_, err = read()
	require.NoError(t, err)
	inits := d.initRequests()
	require.Len(t, inits, 1)
	require.NotNil(t, inits[0])
	assert.Equal(t, int64(7), inits[0].ProducerID)
	assert.Equal(t, int16(3), inits[0].ProducerEpoch)

	request(t, c, produceKey, 3) // dropped: not one byte of it
	n, err := c.Read(make([]byte, 1))
	assert.Zero(t, n)
	assert.ErrorIs(t, err, errResponseDropped)
	assert.Equal(t, int64(1), d.dropped.Load())
}
