package broker

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func metadataReq() kmsg.Request {
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 12
	return req
}

// TestEmulatedRTT measures the emulated round trip. The response cannot
// arrive before the RTT (that is the property); the upper bound is
// generous because the machine is shared.
func TestEmulatedRTT(t *testing.T) {
	const rtt = 80 * time.Millisecond
	c := startCluster(t, Config{RTT: rtt})
	w := dialWire(t, c.Addr())
	start := time.Now()
	w.do(metadataReq())
	got := time.Since(start)
	t.Logf("asked %v, measured %v", rtt, got)
	if got < rtt || got > rtt+time.Second {
		t.Fatalf("round trip %v, want %v (generous upper bound +1s)", got, rtt)
	}
	c.SetRTT(0, 0)
	start = time.Now()
	w.do(metadataReq())
	if got := time.Since(start); got >= rtt {
		t.Logf("after SetRTT(0) a round trip still took %v (loaded machine?)", got)
	}
}

// TestPipeliningPreserved sends many requests back to back on one
// connection: each is delayed by the RTT concurrently, so the whole burst
// takes about one RTT, not one per request, and responses come in request
// order.
func TestPipeliningPreserved(t *testing.T) {
	const rtt, n = 200 * time.Millisecond, 10
	c := startCluster(t, Config{RTT: rtt, Topics: []TopicConfig{{Name: "t", Partitions: 1, Window: 20}}})
	w := dialWire(t, c.Addr())
	start := time.Now()
	for i := range n {
		w.send(produceReq(c, 14, "t", 0, batch(t, 1, 0, int32(i), 1)))
	}
	for i := range n {
		sp := partResp(t, w.recv())
		if sp.ErrorCode != 0 || sp.BaseOffset != int64(i) {
			t.Fatalf("response %d: %v offset %d", i, kerr.ErrorForCode(sp.ErrorCode), sp.BaseOffset)
		}
	}
	got := time.Since(start)
	t.Logf("%d pipelined requests with RTT %v took %v", n, rtt, got)
	// Serialized they would take n*RTT = 2s; allow a lot of slack but
	// stay well below that.
	if got < rtt || got >= n*rtt/2 {
		t.Fatalf("burst took %v, want about %v (serialized would be %v)", got, rtt, n*rtt)
	}
	// Every batch was read long before the first response was due, so
	// all n were in flight at once, waiting out their delay.
	if st := c.PartitionStats("t", 0); st.MaxInFlight != n {
		t.Fatalf("MaxInFlight %d, want %d: requests waiting out their delay must count", st.MaxInFlight, n)
	}
}

// TestBandwidthPacing checks the bandwidth cap slows a large transfer: 256
// KiB at 1 MiB/s takes at least a quarter second.
func TestBandwidthPacing(t *testing.T) {
	c := startCluster(t, Config{Bandwidth: 1 << 20, Topics: []TopicConfig{{Name: "t", Partitions: 1}}})
	w := dialWire(t, c.Addr())
	big := make([]byte, 64<<10)
	start := time.Now()
	for range 4 {
		w.send(produceReq(c, 14, "t", 0, bigBatch(t, big)))
	}
	for range 4 {
		if sp := partResp(t, w.recv()); sp.ErrorCode != 0 {
			t.Fatal(kerr.ErrorForCode(sp.ErrorCode))
		}
	}
	if got := time.Since(start); got < 250*time.Millisecond {
		t.Fatalf("256 KiB at 1 MiB/s took %v, want at least 250ms", got)
	}
}
