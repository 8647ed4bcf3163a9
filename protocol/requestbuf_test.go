package protocol

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// produceReq builds a ProduceRequest with two topics whose partitions hold
// record sets around minRefRecords (copied and referenced), a nil one and
// an empty one, their Adds interleaved.
func produceReq(rng *rand.Rand, v int16) *ProduceRequest {
	r := &ProduceRequest{Acks: -1, Timeout: 30 * time.Second}
	if v%2 == 0 {
		txn := "txn-id"
		r.TransactionalID = &txn
	}
	sizes := []int{0, 1, minRefRecords - 1, minRefRecords, 16 << 10, 300 << 10}
	for pi, size := range sizes {
		for ti := range 2 {
			var records []byte
			if !(ti == 1 && pi == 0) { // one nil record set
				records = make([]byte, size)
				for i := range records {
					records[i] = byte(rng.Uint32())
				}
			}
			r.Add(fmt.Sprintf("topic-%d", ti), [16]byte{byte(ti + 1), 2, 3}, int32(pi), records)
		}
	}
	return r
}

// toKmsg is kmsg's ProduceRequest for r at version v: its topics in the
// order of their first Add, each topic's batches in Add order.
func toKmsg(r *ProduceRequest, v int16) *kmsg.ProduceRequest {
	k := kmsg.NewPtrProduceRequest()
	k.Version = v
	k.TransactionID = r.TransactionalID
	k.Acks = r.Acks
	k.TimeoutMillis = int32(r.Timeout.Milliseconds())
	for _, t := range r.topics {
		kt := kmsg.NewProduceRequestTopic()
		kt.Topic, kt.TopicID = t.name, t.id
		for _, a := range t.adds {
			kp := kmsg.NewProduceRequestTopicPartition()
			kp.Partition, kp.Records = a.partition, a.records
			kt.Partitions = append(kt.Partitions, kp)
		}
		k.Topics = append(k.Topics, kt)
	}
	return k
}

func flatten(f *wireFrame) []byte {
	var out []byte
	for _, b := range f.appendBuffers(nil) {
		out = append(out, b...)
	}
	return out
}

// TestProduceFrameMatchesAppendRequest: the segments Produce writes for a
// request, concatenated, are AppendRequest's frame of the equivalent kmsg
// request at every version v3..v14, with and without a client id; and the
// large record sets really are referenced, not copied.
func TestProduceFrameMatchesAppendRequest(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	id := "client"
	for v := int16(3); v <= MaxProduceVersion; v++ {
		for _, cid := range []*string{nil, &id} {
			req := produceReq(rng, v)
			want := AppendRequest(nil, toKmsg(req, v), 77, cid)
			f := getFrame()
			f.encodeProduce(req, v, 77, cid)
			if got := flatten(f); !bytes.Equal(got, want) {
				t.Fatalf("v%d: %d bytes on the wire, AppendRequest %d; first difference at %d", v, len(got), len(want), firstDiff(got, want))
			}
			// 3 sets per topic are >= minRefRecords.
			if len(f.refs) != 6 {
				t.Fatalf("v%d: %d record sets referenced, want 6", v, len(f.refs))
			}
			for _, r := range f.refs {
				if len(r.b) < minRefRecords || &r.b[0] != findRecords(req, len(r.b), &r.b[0]) {
					t.Fatalf("v%d: a reference is not the caller's record set", v)
				}
			}
			putFrame(f)
		}
	}
}

// TestProduceRequestReset: Reset drops the batches and the references to
// their bytes, keeps the settings, and the request builds the same frame
// again from new Adds without allocating.
func TestProduceRequestReset(t *testing.T) {
	req := produceReq(rand.New(rand.NewPCG(7, 8)), 14)
	topics := req.topics[:cap(req.topics)]
	req.Reset()
	if req.Len() != 0 || len(req.topics) != 0 || req.Acks != -1 || req.TransactionalID == nil {
		t.Fatalf("after Reset: %d batches, %d topics, acks %d", req.Len(), len(req.topics), req.Acks)
	}
	for _, tp := range topics {
		for _, a := range tp.adds[:cap(tp.adds)] {
			if a.records != nil {
				t.Fatal("Reset kept a reference to a record set")
			}
		}
	}
	rec := make([]byte, 2*minRefRecords)
	f := getFrame()
	defer putFrame(f)
	build := func() {
		req.Reset()
		for p := range int32(6) {
			req.Add("topic-0", [16]byte{1, 2, 3}, p, rec)
			req.Add("topic-1", [16]byte{2, 2, 3}, p, rec)
		}
		f.encodeProduce(req, 14, 1, nil)
	}
	build()
	if n := testing.AllocsPerRun(50, build); n != 0 {
		t.Fatalf("%v allocations per reused request", n)
	}
}

// TestProduceFrameCatchesStaleRecords is the negative control: changing a
// referenced record set after encoding changes the wire bytes, so the
// equality above does compare the referenced bytes, and callers must leave
// them alone until done.
func TestProduceFrameCatchesStaleRecords(t *testing.T) {
	req := produceReq(rand.New(rand.NewPCG(3, 4)), 14)
	want := AppendRequest(nil, toKmsg(req, 14), 1, nil)
	f := getFrame()
	f.encodeProduce(req, 14, 1, nil)
	req.topics[0].adds[4].records[100] ^= 0xff
	if bytes.Equal(flatten(f), want) {
		t.Fatal("a modified referenced record set went unnoticed")
	}
}

func findRecords(req *ProduceRequest, n int, first *byte) *byte {
	for _, t := range req.topics {
		for _, a := range t.adds {
			if len(a.records) == n && &a.records[0] == first {
				return first
			}
		}
	}
	return nil
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestProduceOnTheWire sends produce requests at every version v3..v14
// through Conn.Produce, over TCP (writev) and a pipe (buffered writes), and
// checks the broker read exactly AppendRequest's frame of the equivalent
// kmsg request.
func TestProduceOnTheWire(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, transport := range []string{"tcp", "pipe"} {
		for v := int16(3); v <= MaxProduceVersion; v++ {
			t.Run(fmt.Sprintf("%s/v%d", transport, v), func(t *testing.T) {
				b := newFakeBroker(t)
				frames := make(chan []byte, 4)
				b.onFrame = func(f []byte) { frames <- f }
				b.handle = func(h RequestHeader, req kmsg.Request, reply func(any)) {
					reply(req.ResponseKind())
				}
				cfg := DialConfig{ClientID: "wire", MaxVersions: map[int16]int16{0: v}}
				addr := "pipe"
				if transport == "tcp" {
					addr = b.listen()
				} else {
					cfg.Dial = b.pipeDial
				}
				c := dialT(t, addr, cfg)
				<-frames // ApiVersions
				req := produceReq(rng, v)
				errc := make(chan error, 1)
				res := &ProduceResult{}
				c.Produce(req, res, 10*time.Second, func(err error) { errc <- err })
				if err := <-errc; err != nil {
					t.Fatal(err)
				}
				if len(res.Partitions) != req.Len() || res.Version != v {
					t.Fatalf("%d results at v%d for %d batches", len(res.Partitions), res.Version, req.Len())
				}
				got := <-frames
				id, _ := ResponseCorrelationID(got[4:]) // after key and version
				clientID := "wire"
				want := AppendRequest(nil, toKmsg(req, v), id, &clientID)[4:]
				if !bytes.Equal(got, want) {
					t.Fatalf("broker read %d bytes, AppendRequest %d; first difference at %d", len(got), len(want), firstDiff(got, want))
				}
			})
		}
	}
}

// gatedConn counts goroutines inside Write, so a completion can check that
// the writer no longer reads the caller's bytes.
type gatedConn struct {
	net.Conn
	inWrite *atomic.Int32
}

func (g gatedConn) Write(p []byte) (int, error) {
	g.inWrite.Add(1)
	defer g.inWrite.Add(-1)
	return g.Conn.Write(p)
}

// writeHeldRun sends a produce request with a 64 KiB record set to a
// broker that stopped reading, so the writer blocks inside Write; then
// either its deadline passes or the conn is closed. It reports the error
// done got, whether done ran while the writer was still inside Write, and
// whether the conn died.
func writeHeldRun(t *testing.T, byClose bool) (duringWrite, dead, closeDuringWrite bool, err error) {
	synctest.Test(t, func(t *testing.T) {
		b := newFakeBroker(t)
		stuck := make(chan struct{})
		b.handle = func(RequestHeader, kmsg.Request, func(any)) { <-stuck } // stops reading
		var inWrite atomic.Int32
		cfg := DialConfig{Dial: func(ctx context.Context, n, a string) (net.Conn, error) {
			nc, err := b.pipeDial(ctx, n, a)
			return gatedConn{nc, &inWrite}, err
		}}
		c := dialT(t, "pipe", cfg)
		c.Send(mdReq("0"), 0, func(kmsg.Response, error) {})
		synctest.Wait() // request 0 read by the broker, which now blocks
		req := &ProduceRequest{Acks: -1}
		req.Add("t", [16]byte{1}, 0, make([]byte, 64<<10))
		done := make(chan struct{})
		timeout := time.Second
		if byClose {
			timeout = 0
		}
		c.Produce(req, &ProduceResult{}, timeout, func(e error) {
			err, duringWrite = e, inWrite.Load() > 0
			close(done)
		})
		synctest.Wait() // the writer is blocked inside Write
		if inWrite.Load() == 0 {
			t.Fatal("writer not blocked in Write")
		}
		if byClose {
			c.Close()
			if inWrite.Load() > 0 {
				closeDuringWrite = true
			}
		}
		<-done
		select {
		case <-c.Done():
			dead = true
		default:
		}
		c.Close()
		close(stuck)
		b.stop()
	})
	return duringWrite, dead, closeDuringWrite, err
}

// TestProduceDoneAfterWriteReturns: a produce request whose record set is
// written from the caller's memory completes only once the writer is out
// of Write, both when its deadline passes mid-write (which closes the
// conn: only that unblocks the write) and when the conn is closed; and
// Close returns only once the writer is out of Write.
func TestProduceDoneAfterWriteReturns(t *testing.T) {
	for _, byClose := range []bool{false, true} {
		during, dead, closeEarly, err := writeHeldRun(t, byClose)
		if during {
			t.Fatalf("byClose=%v: done ran while the writer was still reading the record set", byClose)
		}
		if closeEarly {
			t.Fatal("Close returned while the writer was still in Write")
		}
		want := ErrRequestTimeout
		if byClose {
			want = ErrConnClosed
		}
		if !errors.Is(err, want) || SafeToRetry(err) || !dead {
			t.Fatalf("byClose=%v: err %v (want %v, not safe to retry), conn dead %v", byClose, err, want, dead)
		}
	}
}

// TestProduceDoneAfterWriteReturnsNegativeControl: with the hold-back off
// (what a plain copy-free writer would do), the timeout case runs done
// while the writer is blocked in Write, and the check above sees it.
func TestProduceDoneAfterWriteReturnsNegativeControl(t *testing.T) {
	holdRefsWhileWriting = false
	defer func() { holdRefsWhileWriting = true }()
	during, _, _, _ := writeHeldRun(t, false)
	if !during {
		t.Fatal("the check missed a completion during the write")
	}
}

// TestProduceMaxVersion: a ProduceRequest's MaxVersion caps the version it
// is sent at below the negotiated one (the header says v11 on a v14
// connection, and the answer is read at v11); 0 leaves the negotiated one.
func TestProduceMaxVersion(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, tc := range []struct{ max, want int16 }{{11, 11}, {0, MaxProduceVersion}, {MaxProduceVersion + 1, MaxProduceVersion}} {
		t.Run(fmt.Sprintf("max%d", tc.max), func(t *testing.T) {
			b := newFakeBroker(t)
			versions := make(chan int16, 4)
			b.handle = func(h RequestHeader, req kmsg.Request, reply func(any)) {
				if h.Key == 0 {
					versions <- h.Version
				}
				reply(req.ResponseKind())
			}
			c := dialT(t, b.listen(), DialConfig{ClientID: "wire"})
			req := produceReq(rng, 11)
			req.MaxVersion = tc.max
			errc := make(chan error, 1)
			res := &ProduceResult{}
			c.Produce(req, res, 10*time.Second, func(err error) { errc <- err })
			if err := <-errc; err != nil {
				t.Fatal(err)
			}
			if got := <-versions; got != tc.want || res.Version != tc.want {
				t.Fatalf("sent at v%d, read at v%d; want v%d", got, res.Version, tc.want)
			}
		})
	}
}
