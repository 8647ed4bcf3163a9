package broker

import (
	"bufio"
	"context"
	"errors"
	"net"
	"os"
	"testing"
	"testing/synctest"
	"time"

	"github.com/longhaul-kafka/longhaul/internal/memnet"
	"github.com/longhaul-kafka/longhaul/protocol"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// isClosed reports whether err means the peer closed the connection.
func isClosed(err error) bool {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return false
	}
	return err != nil
}

func TestDropProduceResponses(t *testing.T) {
	c := startCluster(t, Config{Topics: []TopicConfig{{Name: "t", Partitions: 1}}})
	w := dialWire(t, c.Addr())
	c.DropProduceResponses(0, 1)
	w.send(produceReq(c, 14, "t", 0, batch(t, 1, 0, 0, 1)))
	w.sent = w.sent[:0] // its response will never come
	md := metadataReq()
	w.send(md)
	// The next frame on the connection answers the metadata request:
	// the produce response was dropped, not delayed.
	if _, ok := w.recv().(*kmsg.MetadataResponse); !ok {
		t.Fatal("next response is not the metadata response")
	}
	if n := len(c.Records("t", 0)); n != 1 {
		t.Fatalf("dropped response: %d records, want the append to have happened", n)
	}
	// The count was one: the next produce is answered, and the retry of
	// the dropped batch is a duplicate.
	if sp := produceOne(t, c, w, 14, "t", 0, batch(t, 1, 0, 0, 1)); sp.ErrorCode != 0 || sp.BaseOffset != 0 {
		t.Fatalf("retry: %v offset %d", kerr.ErrorForCode(sp.ErrorCode), sp.BaseOffset)
	}
	if st := c.PartitionStats("t", 0); st.Duplicates != 1 || st.Appended != 1 {
		t.Fatalf("stats %+v", st)
	}
}

func TestCloseAfterRequests(t *testing.T) {
	c := startCluster(t, Config{RTT: 20 * time.Millisecond, Topics: []TopicConfig{{Name: "t", Partitions: 1}}})
	w := dialWire(t, c.Addr())
	c.CloseAfterRequests(0, 2)
	w.send(produceReq(c, 14, "t", 0, batch(t, 1, 0, 0, 1)))
	w.send(produceReq(c, 14, "t", 0, batch(t, 1, 0, 1, 1)))
	// The first is answered, then the connection closes instead of
	// answering the second, whose append did happen.
	if sp := partResp(t, w.recv()); sp.ErrorCode != 0 {
		t.Fatal(kerr.ErrorForCode(sp.ErrorCode))
	}
	if _, err := w.tryRecv(); !isClosed(err) {
		t.Fatalf("second response: err %v, want the connection closed", err)
	}
	if n := len(c.Records("t", 0)); n != 2 {
		t.Fatalf("%d records, want 2: the nth request is appended before the close", n)
	}
	// The fault fired once: a new connection works.
	w2 := dialWire(t, c.Addr())
	if sp := produceOne(t, c, w2, 14, "t", 0, batch(t, 1, 0, 1, 1)); sp.ErrorCode != 0 || sp.BaseOffset != 1 {
		t.Fatalf("retry on a new connection: %v offset %d, want duplicate at 1", kerr.ErrorForCode(sp.ErrorCode), sp.BaseOffset)
	}
}

func TestInjectError(t *testing.T) {
	c := startCluster(t, Config{Topics: []TopicConfig{{Name: "t", Partitions: 1}}})
	w := dialWire(t, c.Addr())
	c.InjectError("t", 0, kerr.NotLeaderForPartition.Code, 2)
	for i := range 2 {
		sp := produceOne(t, c, w, 14, "t", 0, batch(t, 1, 0, 0, 1))
		if sp.ErrorCode != kerr.NotLeaderForPartition.Code {
			t.Fatalf("attempt %d: %v, want injected NOT_LEADER_OR_FOLLOWER", i, kerr.ErrorForCode(sp.ErrorCode))
		}
		if sp.CurrentLeader.LeaderID != 0 {
			t.Fatalf("injected NOT_LEADER without the CurrentLeader hint: %+v", sp.CurrentLeader)
		}
	}
	if n := len(c.Records("t", 0)); n != 0 {
		t.Fatalf("%d records after injected errors, want none", n)
	}
	if sp := produceOne(t, c, w, 14, "t", 0, batch(t, 1, 0, 0, 1)); sp.ErrorCode != 0 {
		t.Fatalf("after the injected errors: %v", kerr.ErrorForCode(sp.ErrorCode))
	}
}

func TestStall(t *testing.T) {
	c := startCluster(t, Config{})
	w := dialWire(t, c.Addr())
	const d = 150 * time.Millisecond
	c.Stall(0, d)
	start := time.Now()
	w.do(metadataReq())
	if got := time.Since(start); got < d-5*time.Millisecond {
		t.Fatalf("stalled node answered after %v, want at least %v", got, d)
	}
}

func TestDropConnectionsAndRestart(t *testing.T) {
	c := startCluster(t, Config{Nodes: 2, Topics: []TopicConfig{{Name: "t", Partitions: 1}}})
	w := dialWire(t, c.Addr())
	if sp := produceOne(t, c, w, 14, "t", 0, batch(t, 1, 0, 0, 1)); sp.ErrorCode != 0 {
		t.Fatal(kerr.ErrorForCode(sp.ErrorCode))
	}
	c.DropConnections(0)
	w.send(metadataReq())
	if _, err := w.tryRecv(); !isClosed(err) {
		t.Fatalf("after DropConnections: %v, want closed", err)
	}
	addr := c.Addr()
	w = dialWire(t, addr)
	if err := c.RestartNode(0); err != nil {
		t.Fatal(err)
	}
	w.send(metadataReq())
	if _, err := w.tryRecv(); !isClosed(err) {
		t.Fatalf("after RestartNode: %v, want closed", err)
	}
	if c.Addr() != addr {
		t.Fatalf("address changed: %s -> %s", addr, c.Addr())
	}
	w = dialWire(t, addr)
	// Log and producer state survived: the next sequence appends, a
	// retry is a duplicate.
	if sp := produceOne(t, c, w, 14, "t", 0, batch(t, 1, 0, 0, 1)); sp.ErrorCode != 0 || sp.BaseOffset != 0 {
		t.Fatalf("retry after restart: %v offset %d, want duplicate at 0", kerr.ErrorForCode(sp.ErrorCode), sp.BaseOffset)
	}
	if sp := produceOne(t, c, w, 14, "t", 0, batch(t, 1, 0, 1, 1)); sp.ErrorCode != 0 || sp.BaseOffset != 1 {
		t.Fatalf("next after restart: %v offset %d", kerr.ErrorForCode(sp.ErrorCode), sp.BaseOffset)
	}
}

func TestMoveLeader(t *testing.T) {
	c := startCluster(t, Config{Nodes: 2, Topics: []TopicConfig{{Name: "t", Partitions: 1}}})
	if n, e := c.Leader("t", 0); n != 0 || e != 0 {
		t.Fatalf("leader %d epoch %d", n, e)
	}
	if err := c.MoveLeader("t", 0, 1); err != nil {
		t.Fatal(err)
	}
	if n, e := c.Leader("t", 0); n != 1 || e != 1 {
		t.Fatalf("after move: leader %d epoch %d, want 1 1", n, e)
	}
	w := dialWire(t, c.Addrs()[0])
	for _, v := range []int16{9, 14} {
		resp := w.do(produceReq(c, v, "t", 0, batch(t, 1, 0, 0, 1))).(*kmsg.ProduceResponse)
		sp := resp.Topics[0].Partitions[0]
		if sp.ErrorCode != kerr.NotLeaderForPartition.Code {
			t.Fatalf("v%d old leader: %v", v, kerr.ErrorForCode(sp.ErrorCode))
		}
		hint := sp.CurrentLeader.LeaderID == 1 && sp.CurrentLeader.LeaderEpoch == 1 && len(resp.Brokers) == 1 && resp.Brokers[0].NodeID == 1
		if v >= 10 && !hint {
			t.Fatalf("v%d: no KIP-951 hint: %+v brokers %+v", v, sp.CurrentLeader, resp.Brokers)
		}
	}
	md := dialWire(t, c.Addr()).do(metadataReq()).(*kmsg.MetadataResponse)
	if p := md.Topics[0].Partitions[0]; p.Leader != 1 || p.LeaderEpoch != 1 {
		t.Fatalf("metadata: leader %d epoch %d", p.Leader, p.LeaderEpoch)
	}
	if err := c.MoveLeader("t", 0, 5); err == nil {
		t.Fatal("MoveLeader to an unknown node succeeded")
	}
}

// Tests of the mixed-fault vocabulary (issue 12): answers after append,
// scripted bursts, Kafka 2.4 mode, metadata rewriting, in-memory listener.

func TestInjectErrorAfterAppend(t *testing.T) {
	c := startCluster(t, Config{Topics: []TopicConfig{{Name: "t", Partitions: 1}}})
	w := dialWire(t, c.Addr())
	c.InjectErrorAfterAppend("t", 0, kerr.NotLeaderForPartition.Code, 1)
	sp := produceOne(t, c, w, 14, "t", 0, batch(t, 1, 0, 0, 2))
	require.Equal(t, kerr.NotLeaderForPartition.Code, sp.ErrorCode)
	require.EqualValues(t, -1, sp.BaseOffset)
	require.Len(t, c.Records("t", 0), 2, "the batch must be in the log despite the error")
	// The retry is recognised as a duplicate of the appended batch.
	sp = produceOne(t, c, w, 14, "t", 0, batch(t, 1, 0, 0, 2))
	require.Zero(t, sp.ErrorCode)
	require.EqualValues(t, 0, sp.BaseOffset)
	require.Len(t, c.Records("t", 0), 2)
	require.Equal(t, 1, c.PartitionStats("t", 0).Duplicates)

	// A batch the normal path rejects keeps its own answer, and the
	// injection is used up by it.
	c.InjectErrorAfterAppend("t", 0, kerr.RequestTimedOut.Code, 1)
	sp = produceOne(t, c, w, 14, "t", 0, batch(t, 1, 0, 7, 1))
	require.Equal(t, kerr.OutOfOrderSequenceNumber.Code, sp.ErrorCode)
	require.Zero(t, c.PendingAnswers("t", 0))
}

func TestScriptAnswers(t *testing.T) {
	c := startCluster(t, Config{Topics: []TopicConfig{{Name: "t", Partitions: 1}}})
	w := dialWire(t, c.Addr())
	c.ScriptAnswers("t", 0,
		Answer{Code: kerr.RequestTimedOut.Code, Mode: AppendThenFail},
		Answer{Code: kerr.NotEnoughReplicas.Code},
		Answer{Mode: Normal},
		Answer{Code: kerr.InvalidRecord.Code})
	require.Equal(t, 4, c.PendingAnswers("t", 0))
	codes := []int16{}
	for seq := int32(0); seq < 5; seq++ {
		codes = append(codes, produceOne(t, c, w, 14, "t", 0, batch(t, 1, 0, seq, 1)).ErrorCode)
	}
	// seq 0 appended then timed out; seq 1 refused; seq 2 appended;
	// seq 3 refused; seq 4 normal.
	require.Equal(t, []int16{kerr.RequestTimedOut.Code, kerr.NotEnoughReplicas.Code, kerr.OutOfOrderSequenceNumber.Code,
		kerr.InvalidRecord.Code, kerr.OutOfOrderSequenceNumber.Code}, codes)
	require.Len(t, c.Records("t", 0), 1)
	require.Zero(t, c.PendingAnswers("t", 0))

	c.ScriptAnswers("t", 0, Answer{Code: kerr.NotEnoughReplicas.Code}, Answer{Code: kerr.NotEnoughReplicas.Code})
	c.InjectError("t", 0, 0, 0) // n <= 0 clears scripts too
	require.Zero(t, c.PendingAnswers("t", 0))
}

func TestKafka24Mode(t *testing.T) {
	c := startCluster(t, Config{Nodes: 2, Kafka24Nodes: []int32{1}, Topics: []TopicConfig{{Name: "t", Partitions: 2, Window: 20}}})
	versions := func(node int32) map[int16]int16 {
		w := dialWire(t, c.Addrs()[node])
		req := kmsg.NewPtrApiVersionsRequest()
		req.Version = 3
		resp := w.do(req).(*kmsg.ApiVersionsResponse)
		m := map[int16]int16{}
		for _, k := range resp.ApiKeys {
			m[k.ApiKey] = k.MaxVersion
		}
		return m
	}
	require.EqualValues(t, 2, versions(1)[22])
	require.EqualValues(t, 8, versions(1)[0])
	require.EqualValues(t, 5, versions(0)[22])
	require.EqualValues(t, 14, versions(0)[0])

	// InitProducerId v3 to the 2.4 node closes the connection; v2 works.
	w := dialWire(t, c.Addrs()[1])
	req := kmsg.NewPtrInitProducerIDRequest()
	req.Version = 3
	req.ProducerID, req.ProducerEpoch = 1000, 0
	w.send(req)
	_, err := w.tryRecv()
	require.Error(t, err)
	w = dialWire(t, c.Addrs()[1])
	req.Version = 2
	resp := w.do(req).(*kmsg.InitProducerIDResponse)
	require.Zero(t, resp.ErrorCode)

	// The 2.4 node retains 5 batches whatever the topic says.
	c.mu.Lock()
	require.Equal(t, 5, c.effectiveWindow(c.topics["t"].parts[1]))
	require.Equal(t, 20, c.effectiveWindow(c.topics["t"].parts[0]))
	c.mu.Unlock()
	c.SetKafka24(1, false)
	require.EqualValues(t, 5, versions(1)[22])
}

func TestRewriteMetadata(t *testing.T) {
	c := startCluster(t, Config{Topics: []TopicConfig{{Name: "t", Partitions: 2}}})
	w := dialWire(t, c.Addr())
	c.RewriteMetadata(func(m *kmsg.MetadataResponse) {
		for i := range m.Topics {
			m.Topics[i].Partitions[0].Partition = -1
			m.Topics[i].Partitions[1].LeaderEpoch = -7
		}
	})
	resp := w.do(metadataReq()).(*kmsg.MetadataResponse)
	require.Len(t, resp.Topics, 1)
	require.EqualValues(t, -1, resp.Topics[0].Partitions[0].Partition)
	require.EqualValues(t, -7, resp.Topics[0].Partitions[1].LeaderEpoch)
	c.RewriteMetadata(nil)
	resp = w.do(metadataReq()).(*kmsg.MetadataResponse)
	require.EqualValues(t, 0, resp.Topics[0].Partitions[0].Partition)
}

// TestInMemoryListenerOnVirtualTime runs a cluster on an in-memory network
// inside a synctest bubble: a produce round trip takes exactly the
// emulated RTT of virtual time, a Stall holds answers for its duration,
// and Close leaves no goroutine behind (synctest would report it).
func TestInMemoryListenerOnVirtualTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net := memnet.New()
		c, err := Start(Config{Nodes: 2, RTT: 30 * time.Millisecond, Listen: net.Listen,
			Topics: []TopicConfig{{Name: "t", Partitions: 1}}})
		require.NoError(t, err)
		defer c.Close()
		ctx := context.Background()
		conn, err := protocol.Dial(ctx, c.Addr(), protocol.DialConfig{Dial: net.Dial})
		require.NoError(t, err)
		defer conn.Close()
		start := time.Now()
		resp, err := conn.Do(ctx, produceReq(c, 14, "t", 0, batch(t, 1, 0, 0, 1)))
		require.NoError(t, err)
		require.Zero(t, resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode)
		require.Equal(t, 30*time.Millisecond, time.Since(start))

		c.Stall(0, time.Second)
		start = time.Now()
		_, err = conn.Do(ctx, produceReq(c, 14, "t", 0, batch(t, 1, 0, 1, 1)))
		require.NoError(t, err)
		require.Equal(t, time.Second, time.Since(start))

		require.NoError(t, c.RestartNode(0))
		_, err = conn.Do(ctx, produceReq(c, 14, "t", 0, batch(t, 1, 0, 2, 1)))
		require.Error(t, err, "the restart dropped the connection")
		conn2, err := protocol.Dial(ctx, c.Addr(), protocol.DialConfig{Dial: net.Dial})
		require.NoError(t, err)
		defer conn2.Close()
		require.Len(t, c.Records("t", 0), 2)
	})
}

// TestMemnetConn covers the in-memory connection's contract used above:
// EOF after the peer closes, read deadlines on virtual time.
func TestMemnetConn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := memnet.New()
		ln, err := n.Listen("tcp", "h:0")
		require.NoError(t, err)
		_, err = n.Dial(context.Background(), "tcp", "nobody:1")
		require.ErrorIs(t, err, memnet.ErrRefused)
		go func() {
			c, err := ln.Accept()
			if err == nil {
				c.Write([]byte("hello\n"))
				c.Close()
			}
		}()
		c, err := n.Dial(context.Background(), "tcp", ln.Addr().String())
		require.NoError(t, err)
		line, err := bufio.NewReader(c).ReadString('\n')
		require.NoError(t, err)
		require.Equal(t, "hello\n", line)
		_, err = c.Read(make([]byte, 1))
		require.Error(t, err)
		c.Close()
		ln.Close()

		a, b := memnet.Pipe(ln.Addr(), ln.Addr())
		defer b.Close()
		a.SetReadDeadline(time.Now().Add(time.Second))
		start := time.Now()
		_, err = a.Read(make([]byte, 1))
		require.ErrorIs(t, err, os.ErrDeadlineExceeded)
		require.Equal(t, time.Second, time.Since(start))
		a.Close()
	})
}
