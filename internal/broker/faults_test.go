package broker

import (
	"errors"
	"net"
	"testing"
	"time"

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
