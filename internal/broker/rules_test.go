package broker

import (
	"math"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/longhaul-kafka/longhaul/protocol"
)

// step is one action of a wire rule test: a produce (with what to expect)
// or a control call.
type step struct {
	epoch    int16
	seq      int32
	n        int   // records; 0 = 1
	code     int16 // expected error code
	dupOf    int   // >0: expect a duplicate answering the base offset of the dupOf-th produce (1-based)
	control  func(*Cluster)
	version  int16 // 0 = 14
	noRetain bool  // expect no ProducerStateBatchesToRetain
}

// produceSeqs returns steps producing one-record batches seq 0..n-1 at epoch.
func produceSeqs(epoch int16, n int) []step {
	out := make([]step, n)
	for i := range out {
		out[i] = step{epoch: epoch, seq: int32(i)}
	}
	return out
}

func cat(parts ...[]step) []step {
	var out []step
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// TestBrokerRulesOverTheWire drives each broker rule of SPEC.md through a
// real connection: Produce v14 requests built with protocol, decoded
// responses, then the log is checked against what was accepted.
func TestBrokerRulesOverTheWire(t *testing.T) {
	const pid = 77
	oooOf := func(epoch int16, seq int32) step {
		return step{epoch: epoch, seq: seq, code: kerr.OutOfOrderSequenceNumber.Code}
	}
	setWindow := func(n int) step {
		return step{control: func(c *Cluster) {
			if err := c.SetWindow("t", n); err != nil {
				panic(err)
			}
		}}
	}
	cases := []struct {
		name   string
		window int
		old    bool
		steps  []step
	}{
		{"window 5: 5th newest duplicate", 5, false, cat(produceSeqs(0, 25), []step{{epoch: 0, seq: 20, dupOf: 21}})},
		{"window 5: 20th newest out of order", 5, false, cat(produceSeqs(0, 25), []step{oooOf(0, 5)})},
		{"window 20: 20th newest duplicate", 20, false, cat(produceSeqs(0, 25), []step{{epoch: 0, seq: 5, dupOf: 6}})},
		{"window 20: 21st newest out of order", 20, false, cat(produceSeqs(0, 25), []step{oooOf(0, 4)})},
		{"window 20 shrunk to 5 at runtime", 20, false, cat(produceSeqs(0, 25), []step{setWindow(5), oooOf(0, 5), {epoch: 0, seq: 20, dupOf: 21}})},
		{"window 5 grown to 20 at runtime", 5, false, cat(produceSeqs(0, 10), []step{setWindow(20)}, []step{oooOf(0, 0)},
			[]step{{epoch: 0, seq: 10}}, []step{{epoch: 0, seq: 9, dupOf: 10}})},
		{"old-mode node retains 5 whatever the topic says", 20, true, cat(produceSeqs(0, 25), []step{
			{epoch: 0, seq: 5, version: 13, noRetain: true, code: kerr.OutOfOrderSequenceNumber.Code},
			{epoch: 0, seq: 20, version: 13, noRetain: true, dupOf: 21},
		})},
		{"gap is out of order, then the right sequence appends", 5, false, cat(produceSeqs(0, 3), []step{oooOf(0, 4), {epoch: 0, seq: 3}})},
		{"epoch bump resets sequences", 5, false, cat(produceSeqs(0, 8), []step{
			oooOf(1, 8),
			{epoch: 1, seq: 0},
			{epoch: 1, seq: 1},
			{epoch: 0, seq: 8, code: kerr.InvalidProducerEpoch.Code},
			{epoch: 1, seq: 1, dupOf: 11},
		})},
		{"no state accepts any first sequence", 5, false, []step{{epoch: 3, seq: 1000}, {epoch: 3, seq: 1001}, oooOf(3, 1000+5)}},
		{"expiry drops state", 5, false, cat(produceSeqs(0, 5), []step{
			{control: (*Cluster).ExpireProducerIDs},
			{epoch: 0, seq: 500}, // would be a gap with state
			oooOf(0, 4),          // the old batches are forgotten: not duplicates any more
		})},
		{"sequence wraps", 5, false, []step{
			{epoch: 0, seq: math.MaxInt32 - 1, n: 2},
			{epoch: 0, seq: 0, n: 3},
			{epoch: 0, seq: math.MaxInt32 - 1, n: 2, dupOf: 1},
			{epoch: 0, seq: 3},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{Topics: []TopicConfig{{Name: "t", Partitions: 1, Window: tc.window}}}
			if tc.old {
				cfg.OldNodes = []int32{0}
			}
			c := startCluster(t, cfg)
			w := dialWire(t, c.Addr())
			var bases []int64 // base offset answered to each produce step, -1 on error
			var accepted []int
			dups := 0
			for i, s := range tc.steps {
				if s.control != nil {
					s.control(c)
					continue
				}
				v := s.version
				if v == 0 {
					v = 14
					if tc.old {
						v = 13
					}
				}
				n := max(s.n, 1)
				sp := produceOne(t, c, w, v, "t", 0, batch(t, pid, s.epoch, s.seq, n))
				if sp.ErrorCode != s.code {
					t.Fatalf("step %d (epoch %d seq %d): code %v, want %v", i, s.epoch, s.seq, kerr.ErrorForCode(sp.ErrorCode), kerr.ErrorForCode(s.code))
				}
				n2, present, err := protocol.BatchesToRetain(v, &sp)
				switch {
				case err != nil:
					t.Fatalf("step %d: %v", i, err)
				case s.noRetain || v < 14:
					if present {
						t.Fatalf("step %d: ProducerStateBatchesToRetain %d present, want absent", i, n2)
					}
				case !present || int(n2) != c.Window("t"):
					t.Fatalf("step %d: ProducerStateBatchesToRetain %d (present %v), want %d", i, n2, present, c.Window("t"))
				}
				if s.code != 0 {
					bases = append(bases, -1)
					continue
				}
				if s.dupOf > 0 {
					dups++
					if want := bases[s.dupOf-1]; sp.BaseOffset != want {
						t.Fatalf("step %d: duplicate answered offset %d, want original %d", i, sp.BaseOffset, want)
					}
				} else {
					accepted = append(accepted, n)
				}
				bases = append(bases, sp.BaseOffset)
			}
			total := 0
			for _, n := range accepted {
				total += n
			}
			recs := c.Records("t", 0)
			if len(recs) != total {
				t.Fatalf("log has %d records, want %d (duplicates must not be appended)", len(recs), total)
			}
			for i, r := range recs {
				if r.Offset != int64(i) || r.ProducerID != pid {
					t.Fatalf("record %d: offset %d pid %d", i, r.Offset, r.ProducerID)
				}
			}
			if st := c.PartitionStats("t", 0); st.Duplicates != dups || st.Appended != len(accepted) {
				t.Fatalf("stats %+v, want %d duplicates and %d appended", st, dups, len(accepted))
			}
		})
	}
}

// TestProducerIDExpirationLazy checks KIP-854's producer.id.expiration.ms:
// state untouched for longer than it is gone at the next write.
func TestProducerIDExpirationLazy(t *testing.T) {
	c := startCluster(t, Config{ProducerIDExpiration: 20 * time.Millisecond, Topics: []TopicConfig{{Name: "t", Partitions: 1}}})
	w := dialWire(t, c.Addr())
	if sp := produceOne(t, c, w, 14, "t", 0, batch(t, 5, 0, 0, 1)); sp.ErrorCode != 0 {
		t.Fatal(kerr.ErrorForCode(sp.ErrorCode))
	}
	if sp := produceOne(t, c, w, 14, "t", 0, batch(t, 5, 0, 7, 1)); sp.ErrorCode != kerr.OutOfOrderSequenceNumber.Code {
		t.Fatalf("gap with live state: %v, want OUT_OF_ORDER_SEQUENCE_NUMBER", kerr.ErrorForCode(sp.ErrorCode))
	}
	time.Sleep(40 * time.Millisecond) // past the expiration: the outcome does not depend on how much
	if sp := produceOne(t, c, w, 14, "t", 0, batch(t, 5, 0, 7, 1)); sp.ErrorCode != 0 {
		t.Fatalf("after expiration: %v, want accepted at any sequence", kerr.ErrorForCode(sp.ErrorCode))
	}
}

// TestOldModeNode checks an old-mode node: ApiVersions offers Produce up to
// v13, Produce v14 is UNSUPPORTED_VERSION, and v13 answers carry no
// ProducerStateBatchesToRetain; SetOld switches at runtime.
func TestOldModeNode(t *testing.T) {
	c := startCluster(t, Config{Nodes: 2, OldNodes: []int32{1}, Topics: []TopicConfig{{Name: "t", Partitions: 2, Window: 20}}})
	produceMax := func(addr string) int16 {
		w := dialWire(t, addr)
		req := kmsg.NewPtrApiVersionsRequest()
		req.Version = 3
		req.ClientSoftwareName, req.ClientSoftwareVersion = "test", "1"
		resp := w.do(req).(*kmsg.ApiVersionsResponse)
		for _, k := range resp.ApiKeys {
			if k.ApiKey == 0 {
				return k.MaxVersion
			}
		}
		t.Fatal("no Produce in ApiVersions")
		return 0
	}
	if got := produceMax(c.Addrs()[0]); got != 14 {
		t.Fatalf("new node offers Produce v%d, want 14", got)
	}
	if got := produceMax(c.Addrs()[1]); got != 13 {
		t.Fatalf("old node offers Produce v%d, want 13", got)
	}
	w := dialWire(t, c.Addrs()[1])
	sp := produceOne(t, c, w, 14, "t", 1, batch(t, 9, 0, 0, 1))
	if sp.ErrorCode != kerr.UnsupportedVersion.Code {
		t.Fatalf("old node, Produce v14: %v, want UNSUPPORTED_VERSION", kerr.ErrorForCode(sp.ErrorCode))
	}
	if sp.UnknownTags.Len() != 0 {
		t.Fatal("old node sent tagged fields")
	}
	if len(c.Records("t", 1)) != 0 {
		t.Fatal("rejected v14 produce was appended")
	}
	sp = produceOne(t, c, w, 13, "t", 1, batch(t, 9, 0, 0, 1))
	if sp.ErrorCode != 0 || sp.UnknownTags.Len() != 0 {
		t.Fatalf("old node, Produce v13: %v, %d tags", kerr.ErrorForCode(sp.ErrorCode), sp.UnknownTags.Len())
	}
	c.SetOld(1, false)
	if got := produceMax(c.Addrs()[1]); got != 14 {
		t.Fatalf("after SetOld(false) node offers Produce v%d, want 14", got)
	}
	sp = produceOne(t, c, w, 14, "t", 1, batch(t, 9, 0, 1, 1))
	if n, ok, _ := protocol.BatchesToRetain(14, &sp); sp.ErrorCode != 0 || !ok || n != 20 {
		t.Fatalf("after SetOld(false): %v, window %d present %v", kerr.ErrorForCode(sp.ErrorCode), n, ok)
	}
}

// TestRetainFieldOnErrors checks that every v14 partition response carries
// the window, errors included, and that v13 never does.
func TestRetainFieldOnErrors(t *testing.T) {
	c := startCluster(t, Config{DefaultWindow: 7, Nodes: 2, Topics: []TopicConfig{{Name: "t", Partitions: 2, Window: 30}, {Name: "d", Partitions: 1}}})
	w := dialWire(t, c.Addr())
	check := func(name string, v int16, topic string, part int32, wantCode int16, want int32) {
		t.Helper()
		sp := produceOne(t, c, w, v, topic, part, batch(t, 1, 0, 0, 1))
		n, ok, err := protocol.BatchesToRetain(v, &sp)
		if sp.ErrorCode != wantCode || err != nil || (v >= 14) != ok || (ok && n != want) {
			t.Fatalf("%s: code %v, window %d present %v err %v; want code %v window %d", name, kerr.ErrorForCode(sp.ErrorCode), n, ok, err, kerr.ErrorForCode(wantCode), want)
		}
	}
	check("success", 14, "t", 0, 0, 30)
	check("server default", 14, "d", 0, 0, 7)
	check("not leader", 14, "t", 1, kerr.NotLeaderForPartition.Code, 30)
	check("v13 never", 13, "t", 0, 0, 0)
	c.InjectError("t", 0, kerr.OutOfOrderSequenceNumber.Code, 1)
	check("injected", 14, "t", 0, kerr.OutOfOrderSequenceNumber.Code, 30)
}
