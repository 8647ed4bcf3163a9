package producer

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-kafka/longhaul/internal/broker"
)

// Kafka API keys the wire tap tells apart.
const (
	apiProduce            int16 = 0
	apiApiVersions        int16 = 18
	apiInitProducerID     int16 = 22
	apiAddPartitionsToTxn int16 = 24
	apiAddOffsetsToTxn    int16 = 25
	apiEndTxn             int16 = 26
)

// wireTap sees what a producer's connections write and read: every
// request's API key and version, in the order written, and how many
// produce requests one connection has in flight (written, their response
// not read yet). A request is counted before it is written and its
// response after it is read, so the count is never below what the broker
// holds on the connection at the same instant.
type wireTap struct {
	mu         sync.Mutex
	reqs       []tapReq
	maxProduce int // most produce requests in flight on one connection
}

type tapReq struct{ key, version int16 }

func (w *wireTap) dial(dial func(ctx context.Context, network, addr string) (net.Conn, error)) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &tapConn{Conn: c, w: w, produce: map[int32]bool{},
			out: frameSplitter{hdr: make([]byte, 12)}, in: frameSplitter{hdr: make([]byte, 8)}}, nil
	}
}

// mark is the position of the next request written.
func (w *wireTap) mark() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.reqs)
}

// between returns the requests written from mark from to mark to.
func (w *wireTap) between(from, to int) []tapReq {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]tapReq(nil), w.reqs[from:to]...)
}

func (w *wireTap) maxProduceInFlight() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.maxProduce
}

// frameSplitter cuts a byte stream into Kafka frames (a 4-byte size, then
// the frame) and hands each frame's first len(hdr) bytes, size included,
// to fn.
type frameSplitter struct {
	hdr  []byte
	have int // bytes of hdr filled
	skip int // bytes of the current frame left after hdr
}

func (f *frameSplitter) feed(b []byte, fn func(hdr []byte)) {
	for len(b) > 0 {
		if f.skip > 0 {
			k := min(f.skip, len(b))
			f.skip -= k
			b = b[k:]
			continue
		}
		k := copy(f.hdr[f.have:], b)
		f.have += k
		b = b[k:]
		if f.have == len(f.hdr) {
			f.have = 0
			f.skip = int(binary.BigEndian.Uint32(f.hdr)) - (len(f.hdr) - 4)
			fn(f.hdr)
		}
	}
}

// tapConn reports one connection's requests (size, key, version,
// correlation id) and produce responses (size, correlation id) to w.
type tapConn struct {
	net.Conn
	w        *wireTap
	out, in  frameSplitter
	produce  map[int32]bool // correlation ids of produce requests in flight; guarded by w.mu
	inFlight int            // guarded by w.mu
}

func (c *tapConn) Write(b []byte) (int, error) {
	c.w.mu.Lock()
	c.out.feed(b, func(h []byte) {
		key, version := int16(binary.BigEndian.Uint16(h[4:])), int16(binary.BigEndian.Uint16(h[6:]))
		c.w.reqs = append(c.w.reqs, tapReq{key, version})
		if key == apiProduce {
			c.produce[int32(binary.BigEndian.Uint32(h[8:]))] = true
			c.inFlight++
			c.w.maxProduce = max(c.w.maxProduce, c.inFlight)
		}
	})
	c.w.mu.Unlock()
	return c.Conn.Write(b)
}

func (c *tapConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.w.mu.Lock()
	c.in.feed(b[:n], func(h []byte) {
		corr := int32(binary.BigEndian.Uint32(h[4:]))
		if c.produce[corr] {
			delete(c.produce, corr)
			c.inFlight--
		}
	})
	c.w.mu.Unlock()
	return n, err
}

// checkShapes asserts that reqs, the requests of one committed
// transaction (no offsets sent), are all of transaction version tv:
// under 2 no AddPartitionsToTxn, Produce v12+ and EndTxn v5; under 1
// AddPartitionsToTxn, Produce v11 at most and EndTxn v4 at most.
func checkShapes(t *testing.T, what string, tv int16, reqs []tapReq) {
	t.Helper()
	var produce, adds, ends int
	for _, r := range reqs {
		switch r.key {
		case apiProduce:
			produce++
			if tv == 2 {
				require.GreaterOrEqual(t, r.version, int16(12), "%s: Produce version inside a version 2 transaction", what)
			} else {
				require.LessOrEqual(t, r.version, int16(11), "%s: Produce version inside a version 1 transaction", what)
			}
		case apiAddPartitionsToTxn, apiAddOffsetsToTxn:
			adds++
			require.Equal(t, int16(1), tv, "%s: AddPartitionsToTxn/AddOffsetsToTxn (key %d) inside a version 2 transaction", what, r.key)
		case apiEndTxn:
			ends++
			if tv == 2 {
				require.Equal(t, int16(5), r.version, "%s: EndTxn version inside a version 2 transaction", what)
			} else {
				require.LessOrEqual(t, r.version, int16(4), "%s: EndTxn version inside a version 1 transaction", what)
			}
		}
	}
	require.Positive(t, produce, "%s: produce requests", what)
	require.Equal(t, 1, ends, "%s: one EndTxn", what)
	if tv == 1 {
		require.Positive(t, adds, "%s: a version 1 transaction adds its partitions", what)
	}
}

// TestTransactionVersionNotSwitchedInside: the transaction version is
// chosen at BeginTransaction from the finalized features and kept to the
// transaction's end. The cluster switches transaction.version while a
// transaction is open, and every connection is dropped, so the producer
// reconnects and reads the new features (ApiVersions) before the rest of
// the transaction's records and its EndTxn: every request of that
// transaction still has the old version's shape, and the next transaction
// has the new one's. From version 1 to 2 the first version 2 transaction
// starts with an epoch bump (InitProducerId with the current id and
// epoch, before its first Produce; DESIGN.md), and from 2 to 1 none is
// sent. Every record is committed once, in order.
func TestTransactionVersionNotSwitchedInside(t *testing.T) {
	for _, tc := range []struct{ from, to int16 }{{2, 1}, {1, 2}} {
		t.Run(fmt.Sprintf("TV%dto%d", tc.from, tc.to), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newTxnEnv(t, tc.from, broker.Config{})
				tap := &wireTap{}
				p := e.producer(Dialer(tap.dial(e.n.Dial)))
				ctx := context.Background()
				produce := func(part int32, values ...string) {
					t.Helper()
					for _, err := range produceAll(p, "out", part, values...)() {
						require.NoError(t, err)
					}
				}

				require.NoError(t, p.BeginTransaction())
				start := tap.mark()
				produce(0, "a1", "a2")
				produce(1, "b1")
				require.NoError(t, e.c.SetTransactionVersion(tc.to))
				switched := tap.mark()
				for node := range int32(3) {
					e.c.DropConnections(node)
				}
				produce(0, "a3")
				produce(1, "b2")
				require.NoError(t, p.CommitTransaction(ctx))
				end := tap.mark()

				var asked, produced bool
				for _, r := range tap.between(switched, end) {
					asked = asked || r.key == apiApiVersions
					produced = produced || r.key == apiProduce
				}
				require.True(t, asked, "the producer reconnected and read the new features inside the transaction")
				require.True(t, produced, "records of the transaction were sent after that")
				checkShapes(t, "the transaction open at the switch", tc.from, tap.between(start, end))

				e.settled()
				before, ok := e.c.Transaction(e.id)
				require.True(t, ok)
				_, bumpsBefore := e.c.InitProducerIDRequests()
				next := tap.mark()
				require.NoError(t, p.BeginTransaction())
				produce(0, "a4")
				produce(1, "b3")
				require.NoError(t, p.CommitTransaction(ctx))
				reqs := tap.between(next, tap.mark())
				checkShapes(t, "the next transaction", tc.to, reqs)
				_, bumpsAfter := e.c.InitProducerIDRequests()
				e.settled()
				after, _ := e.c.Transaction(e.id)
				require.Equal(t, before.ProducerID, after.ProducerID)
				if tc.to == 2 {
					// One bump by InitProducerId, one by EndTxn v5.
					require.Equal(t, before.ProducerEpoch+2, after.ProducerEpoch, "the first version 2 transaction after version 1 bumps the epoch")
					require.Greater(t, bumpsAfter, bumpsBefore, "by InitProducerId")
					var bumpAt, firstProduce = -1, -1
					for i, r := range reqs {
						if r.key == apiInitProducerID && bumpAt < 0 {
							bumpAt = i
						}
						if r.key == apiProduce && firstProduce < 0 {
							firstProduce = i
						}
					}
					require.GreaterOrEqual(t, bumpAt, 0, "InitProducerId sent")
					require.Less(t, bumpAt, firstProduce, "the bump comes before the transaction's first Produce")
				} else {
					require.Equal(t, bumpsBefore, bumpsAfter, "no InitProducerId bump for a version 1 transaction after version 2")
					require.Equal(t, before.ProducerEpoch, after.ProducerEpoch, "a version 1 transaction keeps its epoch")
				}
				require.Equal(t, []string{"a1", "a2", "a3", "a4"}, e.committed("out", 0))
				require.Equal(t, []string{"b1", "b2", "b3"}, e.committed("out", 1))
			})
		})
	}
}

// TestTransactionConnectionCap: inside transactions the connection cap
// (max.in.flight.requests.per.connection, produce requests in flight on
// one connection) applies with the learned window as for idempotent
// batches. Four partitions on one broker announce a window of 20, the cap
// is 8: the producer keeps the learned window (InFlightLimit 20) but
// never has more than 8 produce requests in flight on its connection, and
// does reach 8 (the wire tap counts a request from before it is written
// to after its answer is read, never below what the broker holds); the
// broker sees at most 8 batches of a partition in flight (the window
// alone would allow 20) and every record committed once, in order.
func TestTransactionConnectionCap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const parts, perTxn = 4, 400
		e := newTxnEnv(t, 2, broker.Config{Nodes: 1, RTT: 50 * time.Millisecond,
			Topics: []broker.TopicConfig{{Name: "w", Partitions: parts, Window: 20}}})
		tap := &wireTap{}
		p := e.producer(MaxInFlightRequestsPerConnection(8), BatchSize(1024), Linger(0), Dialer(tap.dial(e.n.Dial)))
		ctx := context.Background()
		want := make([][]string, parts)
		for txn := range 2 {
			require.NoError(t, p.BeginTransaction())
			var waits []func() []error
			for part := range int32(parts) {
				vals := make([]string, perTxn)
				for i := range vals {
					vals[i] = fmt.Sprintf("%d-%d-%04d-%090d", txn, part, i, 0)
				}
				want[part] = append(want[part], vals...)
				waits = append(waits, produceAll(p, "w", part, vals...))
			}
			for _, wait := range waits {
				for _, err := range wait() {
					require.NoError(t, err)
				}
			}
			require.NoError(t, p.CommitTransaction(ctx))
		}
		require.Equal(t, 8, tap.maxProduceInFlight(), "produce requests in flight on the connection: the cap, reached")
		for part := range int32(parts) {
			require.Equal(t, 20, p.InFlightLimit("w", part), "the learned window of partition %d", part)
			bs := e.c.PartitionStats("w", part)
			require.LessOrEqual(t, bs.MaxInFlight, 8, "batches of partition %d in flight at the broker", part)
			require.Zero(t, bs.OutOfOrder)
			require.Equal(t, want[part], e.committed("w", part))
		}
	})
}
