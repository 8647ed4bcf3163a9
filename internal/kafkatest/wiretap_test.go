package kafkatest

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"sync"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// tp names a partition.
type tp struct {
	topic     string
	partition int32
}

func (p tp) String() string { return fmt.Sprintf("%s/%d", p.topic, p.partition) }

// wireTap sits between a producer and its brokers (as its Dialer) and
// counts, from the bytes on the wire, Produce requests by version and
// record batches in flight per partition and requests in flight per
// connection: a batch is in flight from the write of its request until
// the response with the same correlation id is read, or the connection
// ends. It decodes what the producer wrote with kmsg, independently of
// longhaul's protocol package.
type wireTap struct {
	mu          sync.Mutex
	names       map[[16]byte]string // topic id -> name (Produce v13+)
	inflight    map[tp]int
	maxInflight map[tp]int
	maxConnReqs int
	versions    map[int16]int64
	// Per broker address: batches in flight per partition, their
	// maximum, and the Produce versions sent there.
	addrInflight map[string]map[tp]int
	addrMax      map[string]map[tp]int
	addrVersions map[string]map[int16]int64
	batches      int64
	decodeErr    error
}

func newWireTap(ids map[string][16]byte) *wireTap {
	w := &wireTap{names: map[[16]byte]string{}, inflight: map[tp]int{}, maxInflight: map[tp]int{}, versions: map[int16]int64{},
		addrInflight: map[string]map[tp]int{}, addrMax: map[string]map[tp]int{}, addrVersions: map[string]map[int16]int64{}}
	for name, id := range ids {
		w.names[id] = name
	}
	return w
}

func (w *wireTap) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	w.mu.Lock()
	if w.addrInflight[addr] == nil {
		w.addrInflight[addr], w.addrMax[addr], w.addrVersions[addr] = map[tp]int{}, map[tp]int{}, map[int16]int64{}
	}
	w.mu.Unlock()
	return &tapConn{Conn: c, w: w, addr: addr, pending: map[int32][]tp{}}, nil
}

// byAddr returns, per broker address dialled, the maximum batches in
// flight per partition and the Produce versions sent.
func (w *wireTap) byAddr() (maxInflight map[string]map[tp]int, versions map[string]map[int16]int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	maxInflight, versions = map[string]map[tp]int{}, map[string]map[int16]int64{}
	for a, m := range w.addrMax {
		maxInflight[a] = map[tp]int{}
		for k, v := range m {
			maxInflight[a][k] = v
		}
		versions[a] = map[int16]int64{}
		for k, v := range w.addrVersions[a] {
			versions[a][k] = v
		}
	}
	return maxInflight, versions
}

// snapshot returns the maximum batches in flight per partition, the
// maximum Produce requests in flight on one connection, and the Produce
// versions seen.
func (w *wireTap) snapshot() (maxInflight map[tp]int, maxConnReqs int, versions map[int16]int64, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	maxInflight = make(map[tp]int, len(w.maxInflight))
	for k, v := range w.maxInflight {
		maxInflight[k] = v
	}
	versions = make(map[int16]int64, len(w.versions))
	for k, v := range w.versions {
		versions[k] = v
	}
	return maxInflight, w.maxConnReqs, versions, w.decodeErr
}

type tapConn struct {
	net.Conn
	w          *wireTap
	addr       string
	wbuf, rbuf []byte
	// Guarded by w.mu.
	pending map[int32][]tp // correlation id -> batches of a Produce request
	closed  bool
}

func (c *tapConn) Write(b []byte) (int, error) {
	c.wbuf = append(c.wbuf, b...)
	for len(c.wbuf) >= 4 {
		size := int(binary.BigEndian.Uint32(c.wbuf))
		if len(c.wbuf) < 4+size {
			break
		}
		c.request(c.wbuf[4 : 4+size])
		c.wbuf = append(c.wbuf[:0], c.wbuf[4+size:]...)
	}
	return c.Conn.Write(b)
}

func (c *tapConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.rbuf = append(c.rbuf, b[:n]...)
	for len(c.rbuf) >= 8 {
		size := int(binary.BigEndian.Uint32(c.rbuf))
		if len(c.rbuf) < 4+size {
			break
		}
		c.response(int32(binary.BigEndian.Uint32(c.rbuf[4:])))
		c.rbuf = append(c.rbuf[:0], c.rbuf[4+size:]...)
	}
	if err != nil {
		c.drop()
	}
	return n, err
}

func (c *tapConn) Close() error {
	c.drop()
	return c.Conn.Close()
}

// drop ends everything in flight on the connection.
func (c *tapConn) drop() {
	c.w.mu.Lock()
	defer c.w.mu.Unlock()
	if c.closed {
		return
	}
	c.closed = true
	for corr, tps := range c.pending {
		for _, p := range tps {
			c.w.inflight[p]--
			c.w.addrInflight[c.addr][p]--
		}
		delete(c.pending, corr)
	}
}

func (c *tapConn) request(frame []byte) {
	r := kbin.Reader{Src: frame}
	key, version, corr := r.Int16(), r.Int16(), r.Int32()
	if key != produceKey {
		return
	}
	r.NullableString() // client id
	if version >= 9 {
		for range r.Uvarint() {
			r.Uvarint()
			r.Span(int(r.Uvarint()))
		}
	}
	req := kmsg.NewPtrProduceRequest()
	req.Version = min(version, req.MaxVersion())
	err := req.ReadFrom(r.Src)
	c.w.mu.Lock()
	defer c.w.mu.Unlock()
	c.w.versions[version]++
	c.w.addrVersions[c.addr][version]++
	if err != nil || !r.Ok() {
		if c.w.decodeErr == nil {
			c.w.decodeErr = fmt.Errorf("decode Produce v%d: %v", version, err)
		}
		return
	}
	var tps []tp
	for _, t := range req.Topics {
		name := t.Topic
		if name == "" {
			name = c.w.names[t.TopicID]
		}
		for _, p := range t.Partitions {
			for range countBatches(p.Records) {
				tps = append(tps, tp{name, p.Partition})
			}
		}
	}
	if req.Acks == 0 || c.closed {
		return
	}
	c.pending[corr] = tps
	c.w.maxConnReqs = max(c.w.maxConnReqs, len(c.pending))
	for _, p := range tps {
		c.w.batches++
		c.w.inflight[p]++
		c.w.maxInflight[p] = max(c.w.maxInflight[p], c.w.inflight[p])
		c.w.addrInflight[c.addr][p]++
		c.w.addrMax[c.addr][p] = max(c.w.addrMax[c.addr][p], c.w.addrInflight[c.addr][p])
	}
}

func (c *tapConn) response(corr int32) {
	c.w.mu.Lock()
	defer c.w.mu.Unlock()
	tps, ok := c.pending[corr]
	if !ok {
		return
	}
	delete(c.pending, corr)
	for _, p := range tps {
		c.w.inflight[p]--
		c.w.addrInflight[c.addr][p]--
	}
}

// countBatches counts the v2 record batches in a partition's record set
// (each: base offset int64, length int32, then length bytes).
func countBatches(records []byte) int {
	n := 0
	for len(records) >= 12 {
		l := int(int32(binary.BigEndian.Uint32(records[8:])))
		if l <= 0 || len(records) < 12+l {
			break
		}
		n++
		records = records[12+l:]
	}
	return n
}
