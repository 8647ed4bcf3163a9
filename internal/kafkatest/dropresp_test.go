package kafkatest

import (
	"context"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
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
			c.skip -= n
			rest = rest[n:]
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
		c.whdr = c.whdr[:0]
		c.skip = size - 8 // key, version and correlation id are read
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
