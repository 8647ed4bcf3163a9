package broker

import (
	"bufio"
	"context"
	"net"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/longhaul-kafka/longhaul/internal/memnet"
	"github.com/longhaul-kafka/longhaul/protocol"
)

// memCluster starts a cluster on its own in-memory network (call it in a
// synctest bubble), closed at the end of the test.
func memCluster(t *testing.T, cfg Config) (*Cluster, *memnet.Network) {
	t.Helper()
	n := memnet.New()
	cfg.Listen = n.Listen
	return startCluster(t, cfg), n
}

// dialMem dials addr on n, or returns the error.
func dialMem(t *testing.T, n *memnet.Network, addr string) (*wireClient, error) {
	t.Helper()
	nc, err := n.Dial(context.Background(), "tcp", addr)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { nc.Close() })
	return &wireClient{t: t, nc: nc, r: bufio.NewReader(nc)}, nil
}

// closedConn reports whether the broker closed w's connection: a request
// cannot be written, or no answer comes but the end of the stream.
func closedConn(w *wireClient) bool {
	if _, err := w.nc.Write(protocol.AppendRequest(nil, metadataReq(), 99, nil)); err != nil {
		return true
	}
	w.nc.SetReadDeadline(time.Now().Add(time.Second))
	_, err := w.r.ReadByte()
	return isClosed(err)
}

// nodeAddr returns node id's address in a Metadata response.
func nodeAddr(t *testing.T, resp kmsg.Response, id int32) string {
	t.Helper()
	for _, b := range resp.(*kmsg.MetadataResponse).Brokers {
		if b.NodeID == id {
			return net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
		}
	}
	t.Fatalf("node %d not in metadata", id)
	return ""
}

// MoveNode without Replace: the same process at a new address. Metadata
// announces it, the old address's connections close and it refuses new
// ones, the node keeps its leadership, log and producer state.
func TestMoveNodeSameProcess(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, n := memCluster(t, Config{Nodes: 2, Topics: []TopicConfig{{Name: "t", Partitions: 1}}})
		old := c.Addr()
		w, err := dialMem(t, n, old)
		require.NoError(t, err)
		require.Zero(t, produceOne(t, c, w, 14, "t", 0, batch(t, 1, 0, 0, 1)).ErrorCode)
		_, epoch := c.Leader("t", 0)

		addr, err := c.MoveNode(0, NodeMove{})
		require.NoError(t, err)
		require.NotEqual(t, old, addr)
		require.Equal(t, addr, c.Addr())
		require.Equal(t, addr, c.Addrs()[0])
		require.True(t, closedConn(w), "the old address's connection closes")
		_, err = dialMem(t, n, old)
		require.Error(t, err, "the old address refuses")

		w, err = dialMem(t, n, addr)
		require.NoError(t, err)
		require.Equal(t, addr, nodeAddr(t, w.do(metadataReq()), 0))
		leader, e := c.Leader("t", 0)
		require.Equal(t, [2]int32{0, epoch}, [2]int32{leader, e}, "leadership unchanged")
		sp := produceOne(t, c, w, 14, "t", 0, batch(t, 1, 0, 0, 1))
		require.Equal(t, [2]int64{0, 0}, [2]int64{int64(sp.ErrorCode), sp.BaseOffset}, "the retry is a duplicate: state kept")
		_, err = c.MoveNode(7, NodeMove{})
		require.ErrorIs(t, err, ErrUnknownNode)
	})
}

// MoveNode with Replace and Snapshot: the new process has each producer's
// last batch only, so the retry of an earlier batch is
// OUT_OF_ORDER_SEQUENCE_NUMBER, the last one's a duplicate, and the next
// sequence appends. Without Snapshot every retained batch is still
// recognised (the negative control), and so it is on a partition another
// node leads either way.
func TestMoveNodeReplaceSnapshot(t *testing.T) {
	for _, snapshot := range []bool{true, false} {
		t.Run("snapshot="+strconv.FormatBool(snapshot), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c, n := memCluster(t, Config{Nodes: 2, Topics: []TopicConfig{{Name: "t", Partitions: 2}}})
				w, err := dialMem(t, n, c.Addr())
				require.NoError(t, err)
				w1, err := dialMem(t, n, c.Addrs()[1])
				require.NoError(t, err)
				for seq := range int32(3) {
					require.Zero(t, produceOne(t, c, w, 14, "t", 0, batch(t, 1, 0, seq, 1)).ErrorCode)
					require.Zero(t, produceOne(t, c, w1, 14, "t", 1, batch(t, 1, 0, seq, 1)).ErrorCode)
				}
				addr, err := c.MoveNode(0, NodeMove{Replace: true, Snapshot: snapshot})
				require.NoError(t, err)
				w, err = dialMem(t, n, addr)
				require.NoError(t, err)
				want := int16(0)
				if snapshot {
					want = kerr.OutOfOrderSequenceNumber.Code
				}
				require.Equal(t, want, produceOne(t, c, w, 14, "t", 0, batch(t, 1, 0, 1, 1)).ErrorCode, "retry of seq 1")
				sp := produceOne(t, c, w, 14, "t", 0, batch(t, 1, 0, 2, 1))
				require.Equal(t, [2]int64{0, 2}, [2]int64{int64(sp.ErrorCode), sp.BaseOffset}, "retry of the last batch: duplicate")
				sp = produceOne(t, c, w, 14, "t", 0, batch(t, 1, 0, 3, 1))
				require.Equal(t, [2]int64{0, 3}, [2]int64{int64(sp.ErrorCode), sp.BaseOffset}, "next sequence")
				require.Len(t, c.Records("t", 0), 4, "the log is kept")
				sp = produceOne(t, c, w1, 14, "t", 1, batch(t, 1, 0, 0, 1))
				require.Equal(t, [2]int64{0, 0}, [2]int64{int64(sp.ErrorCode), sp.BaseOffset}, "node 1's partition keeps its state")
			})
		})
	}
}

// MoveNode with Replace sets the new process's version: OldMode answers
// Produce v14 with UNSUPPORTED_VERSION, CurrentMode takes it, SameMode
// keeps what the node was.
func TestMoveNodeReplaceMode(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, n := memCluster(t, Config{Topics: []TopicConfig{{Name: "t", Partitions: 1}}})
		seq := int32(0)
		v14 := func(addr string) int16 {
			w, err := dialMem(t, n, addr)
			require.NoError(t, err)
			code := produceOne(t, c, w, 14, "t", 0, batch(t, 1, 0, seq, 1)).ErrorCode
			if code == 0 {
				seq++
			}
			return code
		}
		for _, step := range []struct {
			mode NodeMode
			want int16
		}{
			{SameMode, 0},
			{OldMode, kerr.UnsupportedVersion.Code},
			{SameMode, kerr.UnsupportedVersion.Code},
			{CurrentMode, 0},
		} {
			addr, err := c.MoveNode(0, NodeMove{Replace: true, Mode: step.mode})
			require.NoError(t, err)
			require.Equal(t, step.want, v14(addr), "mode %d", step.mode)
		}
	})
}

// With a grace, the old process keeps its connections and its address
// that long, answering what it read only when the grace ends, then closes
// them; the new address answers at once.
func TestMoveNodeGrace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const rtt, grace = 10 * time.Millisecond, 200 * time.Millisecond
		c, n := memCluster(t, Config{RTT: rtt, Topics: []TopicConfig{{Name: "t", Partitions: 1}}})
		old := c.Addr()
		w, err := dialMem(t, n, old)
		require.NoError(t, err)
		w.send(produceReq(c, 14, "t", 0, batch(t, 1, 0, 0, 1)))
		synctest.Wait() // the old process read it
		start := time.Now()
		addr, err := c.MoveNode(0, NodeMove{Replace: true, Grace: grace})
		require.NoError(t, err)

		fresh, err := dialMem(t, n, addr)
		require.NoError(t, err)
		fresh.do(metadataReq())
		require.Equal(t, rtt, time.Since(start), "the new process answers at its round trip")
		late, err := dialMem(t, n, old)
		require.NoError(t, err, "the old address still accepts during the grace")
		late.send(metadataReq())

		require.Zero(t, partResp(t, w.recv()).ErrorCode)
		require.Equal(t, grace, time.Since(start), "the old process answers when the grace ends")
		require.Equal(t, addr, nodeAddr(t, late.recv(), 0), "it answers the connection made during the grace, with the new address")
		require.Equal(t, grace, time.Since(start))
		time.Sleep(rtt + time.Millisecond)
		require.True(t, closedConn(w), "the old process's connections close after the grace")
		require.True(t, closedConn(late), "the old process's connections close after the grace")
		_, err = dialMem(t, n, old)
		require.Error(t, err, "the old address refuses after the grace")
	})
}

// OverWindow counts batches beyond the window a process announced: 6 in
// flight before any answer (5 allowed), none of 20 once 20 was announced
// in a written response, also after the window shrank to 5; a replacement
// process has announced nothing, the same process at a new address keeps
// what it announced.
func TestOverWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, n := memCluster(t, Config{RTT: 50 * time.Millisecond, Topics: []TopicConfig{{Name: "t", Partitions: 1, Window: 20}}})
		seq := int32(0)
		burst := func(w *wireClient, k int) {
			for range k {
				w.send(produceReq(c, 14, "t", 0, batch(t, 1, 0, seq, 1)))
				seq++
			}
			synctest.Wait()
			for range k {
				require.Zero(t, partResp(t, w.recv()).ErrorCode)
			}
		}
		w, err := dialMem(t, n, c.Addr())
		require.NoError(t, err)
		burst(w, 5)
		over, _ := c.OverWindow()
		require.Zero(t, over, "5 before any answer")

		c2, n2 := memCluster(t, Config{RTT: 50 * time.Millisecond, Topics: []TopicConfig{{Name: "t", Partitions: 1, Window: 20}}})
		w2, err := dialMem(t, n2, c2.Addr())
		require.NoError(t, err)
		for i := range int32(6) {
			w2.send(produceReq(c2, 14, "t", 0, batch(t, 1, 0, i, 1)))
		}
		synctest.Wait()
		over, first := c2.OverWindow()
		require.Equal(t, int64(1), over, "the 6th before any answer")
		require.Len(t, first, 1)
		require.Contains(t, first[0], "producer id 1 had 6 batches of t[0] in flight, beyond the 5")

		burst(w, 20) // 20 announced by the answers of the first 5
		over, _ = c.OverWindow()
		require.Zero(t, over, "20 once 20 was announced")
		require.NoError(t, c.SetWindow("t", 5))
		burst(w, 20)
		over, _ = c.OverWindow()
		require.Zero(t, over, "lenient: 20 was announced before the window shrank")

		addr, err := c.MoveNode(0, NodeMove{})
		require.NoError(t, err)
		w, err = dialMem(t, n, addr)
		require.NoError(t, err)
		burst(w, 20)
		over, _ = c.OverWindow()
		require.Zero(t, over, "the same process keeps what it announced")

		addr, err = c.MoveNode(0, NodeMove{Replace: true})
		require.NoError(t, err)
		w, err = dialMem(t, n, addr)
		require.NoError(t, err)
		burst(w, 6)
		over, _ = c.OverWindow()
		require.Equal(t, int64(1), over, "a replacement announced nothing: the 6th is over")
	})
}

// OverWindow counts distinct batches of one producer epoch: copies of a
// batch (a retry while its first attempt is still held) count once, a
// bumped epoch's batches apart, and nothing read during a stall or one
// round trip after it counts (the client may have given up on it unseen).
// The negative control: 6 distinct batches of one epoch are over. On a
// node capped at Produce v3 (Kafka 0.11) the window is 1: 2 are over.
func TestOverWindowCountsDistinctBatchesOfAnEpoch(t *testing.T) {
	for _, tc := range []struct {
		name    string
		stall   bool
		batches [][2]int32 // epoch, seq
		over    int64
	}{
		{"six distinct", false, [][2]int32{{0, 0}, {0, 1}, {0, 2}, {0, 3}, {0, 4}, {0, 5}}, 1},
		{"a copy", false, [][2]int32{{0, 0}, {0, 1}, {0, 2}, {0, 3}, {0, 4}, {0, 4}}, 0},
		{"a bumped epoch", false, [][2]int32{{0, 0}, {0, 1}, {0, 2}, {0, 3}, {0, 4}, {1, 0}}, 0},
		{"during a stall", true, [][2]int32{{0, 0}, {0, 1}, {0, 2}, {0, 3}, {0, 4}, {0, 5}}, 0},
		// Kafka 0.11 (Produce v3) retains only the last batch: 1.
		{"v3 one", false, [][2]int32{{0, 0}}, 0},
		{"v3 two distinct", false, [][2]int32{{0, 0}, {0, 1}}, 1},
		{"v3 a copy", false, [][2]int32{{0, 0}, {0, 0}}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cfg, version := Config{RTT: 50 * time.Millisecond, Topics: []TopicConfig{{Name: "t", Partitions: 1}}}, int16(14)
				if strings.HasPrefix(tc.name, "v3 ") {
					cfg.ProduceMaxVersions, version = map[int32]int16{0: 3}, 3
				}
				c, n := memCluster(t, cfg)
				w, err := dialMem(t, n, c.Addr())
				require.NoError(t, err)
				if tc.stall {
					c.Stall(0, 20*time.Millisecond)
				}
				for _, b := range tc.batches {
					w.send(produceReq(c, version, "t", 0, batch(t, 1, int16(b[0]), b[1], 1)))
				}
				synctest.Wait()
				over, _ := c.OverWindow()
				require.Equal(t, tc.over, over)
			})
		})
	}
}

// Close during a replaced process's grace ends it too: its connection
// closes and nothing is left running (the bubble would not end).
func TestCloseDuringGrace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, n := memCluster(t, Config{Topics: []TopicConfig{{Name: "t", Partitions: 1}}})
		w, err := dialMem(t, n, c.Addr())
		require.NoError(t, err)
		_, err = c.MoveNode(0, NodeMove{Replace: true, Grace: time.Hour})
		require.NoError(t, err)
		require.NoError(t, c.Close())
		require.True(t, closedConn(w))
		_, err = c.MoveNode(0, NodeMove{})
		require.ErrorIs(t, err, ErrClosed)
	})
}

// Armed faults carry over to the same process at a new address, not to a
// replacement; the KIP-951 leader hints of a NOT_LEADER_OR_FOLLOWER name
// the new address.
func TestMoveNodeFaultsAndLeaderHints(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, n := memCluster(t, Config{Nodes: 2, Topics: []TopicConfig{{Name: "t", Partitions: 1}}})
		seq := int32(0)
		for _, replace := range []bool{false, true} {
			c.DropProduceResponses(0, 1)
			addr, err := c.MoveNode(0, NodeMove{Replace: replace})
			require.NoError(t, err)
			w, err := dialMem(t, n, addr)
			require.NoError(t, err)
			w.send(produceReq(c, 14, "t", 0, batch(t, 1, 0, seq, 1)))
			seq++
			w.send(metadataReq())
			if replace {
				require.Zero(t, partResp(t, w.recv()).ErrorCode, "a replacement has no armed fault")
			} else {
				w.sent = w.sent[1:] // dropped: the metadata answer comes next
			}
			_, ok := w.recv().(*kmsg.MetadataResponse)
			require.True(t, ok)
		}

		require.NoError(t, c.MoveLeader("t", 0, 1))
		addr, err := c.MoveNode(1, NodeMove{Replace: true})
		require.NoError(t, err)
		w, err := dialMem(t, n, c.Addrs()[0])
		require.NoError(t, err)
		resp := w.do(produceReq(c, 14, "t", 0, batch(t, 1, 0, seq, 1))).(*kmsg.ProduceResponse)
		require.Equal(t, kerr.NotLeaderForPartition.Code, resp.Topics[0].Partitions[0].ErrorCode)
		require.Len(t, resp.Brokers, 1)
		got := net.JoinHostPort(resp.Brokers[0].Host, strconv.Itoa(int(resp.Brokers[0].Port)))
		require.Equal(t, [2]any{int32(1), addr}, [2]any{resp.Brokers[0].NodeID, got})
	})
}
