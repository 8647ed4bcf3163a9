package broker

import (
	"bufio"
	"context"
	"os"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/longhaul-kafka/longhaul/internal/memnet"
	"github.com/longhaul-kafka/longhaul/protocol"
)

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
