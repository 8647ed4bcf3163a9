package producer

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/longhaul-kafka/longhaul/internal/broker"
	"github.com/longhaul-kafka/longhaul/internal/memnet"
	"github.com/longhaul-kafka/longhaul/protocol"
)

// hostileProxy sits between the producer and one node of a real embedded
// broker. It forwards every request (so appends really happen) and every
// response, rewriting Metadata so the producer keeps coming through the
// proxy, but spoils every nth Produce response in one of several ways.
type hostileProxy struct {
	t        testing.TB
	net      *memnet.Network
	ln       net.Listener
	upstream string
	every    int64 // spoil every nth produce response; 0 = none

	produces atomic.Int64
	accepted atomic.Int64
	spoiled  [numSpoils]atomic.Int64

	mu    sync.Mutex
	conns []net.Conn
	wg    sync.WaitGroup
}

// Ways to spoil a produce response.
const (
	spoilGarbageBody  = iota // right size and correlation id, random body
	spoilGarbageFrame        // random bytes, size prefix included
	spoilHalfAndStall        // half the frame, then nothing until the client hangs up
	spoilHugeSize            // a size prefix of 2 GiB
	spoilWrongCorr           // the real response under another correlation id
	numSpoils
)

// startHostileProxy starts a proxy to upstream on the in-memory network n,
// closed at cleanup.
func startHostileProxy(t testing.TB, n *memnet.Network, upstream string, every int64) *hostileProxy {
	ln, err := n.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hp := &hostileProxy{t: t, net: n, ln: ln, upstream: upstream, every: every}
	hp.wg.Add(1)
	go hp.accept()
	t.Cleanup(hp.close)
	return hp
}

func (hp *hostileProxy) close() {
	hp.ln.Close()
	hp.mu.Lock()
	for _, c := range hp.conns {
		c.Close()
	}
	hp.mu.Unlock()
	hp.wg.Wait()
}

func (hp *hostileProxy) track(c net.Conn) {
	hp.mu.Lock()
	hp.conns = append(hp.conns, c)
	hp.mu.Unlock()
}

func (hp *hostileProxy) accept() {
	defer hp.wg.Done()
	for {
		c, err := hp.ln.Accept()
		if err != nil {
			return
		}
		hp.accepted.Add(1)
		up, err := hp.net.Dial(context.Background(), "tcp", hp.upstream)
		if err != nil {
			c.Close()
			continue
		}
		hp.track(c)
		hp.track(up)
		hp.wg.Add(1)
		go func() {
			defer hp.wg.Done()
			defer c.Close()
			defer up.Close()
			hp.serve(c, up)
		}()
	}
}

// serve relays one connection, one request at a time.
func (hp *hostileProxy) serve(c, up net.Conn) {
	cr, ur := bufio.NewReader(c), bufio.NewReader(up)
	var frame, resp []byte
	for {
		var err error
		if frame, err = protocol.ReadFrame(cr, frame, 0); err != nil {
			return
		}
		h, req, err := protocol.ParseRequest(frame)
		if err != nil {
			return
		}
		out := binary.BigEndian.AppendUint32(nil, uint32(len(frame)))
		if _, err := up.Write(append(out, frame...)); err != nil {
			return
		}
		if resp, err = protocol.ReadFrame(ur, resp, 0); err != nil {
			return
		}
		var w []byte
		switch h.Key {
		case 3: // Metadata: point the producer at the proxy
			r, err := protocol.ParseResponse(resp, req, h.CorrelationID)
			if err != nil {
				return
			}
			md := r.(*kmsg.MetadataResponse)
			host, port, _ := net.SplitHostPort(hp.ln.Addr().String())
			p, _ := strconv.Atoi(port)
			for i := range md.Brokers {
				md.Brokers[i].Host, md.Brokers[i].Port = host, int32(p)
			}
			w = protocol.AppendResponse(nil, h.CorrelationID, md)
		case 0:
			n := hp.produces.Add(1)
			if hp.every > 0 && n%hp.every == 0 {
				kind := (n / hp.every) % numSpoils
				hp.spoiled[kind].Add(1)
				if !hp.spoil(c, kind, h.CorrelationID, resp) {
					return
				}
				continue
			}
			fallthrough
		default:
			w = binary.BigEndian.AppendUint32(nil, uint32(len(resp)))
			w = append(w, resp...)
		}
		if _, err := c.Write(w); err != nil {
			return
		}
	}
}

// spoil writes a bad answer to a produce request; false ends the
// connection.
func (hp *hostileProxy) spoil(c net.Conn, kind int64, corr int32, resp []byte) bool {
	junk := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(i*131 + 7 + int(corr))
		}
		return b
	}
	switch kind {
	case spoilGarbageBody:
		w := binary.BigEndian.AppendUint32(nil, uint32(len(resp)))
		w = binary.BigEndian.AppendUint32(w, uint32(corr))
		w = append(w, junk(len(resp)-4)...)
		_, err := c.Write(w)
		return err == nil
	case spoilGarbageFrame:
		c.Write(junk(64))
		return true
	case spoilHalfAndStall:
		w := binary.BigEndian.AppendUint32(nil, uint32(len(resp)))
		w = append(w, resp...)
		c.Write(w[:len(w)/2])
		io.Copy(io.Discard, c) // until the producer gives up and closes
		return false
	case spoilHugeSize:
		c.Write([]byte{0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 0})
		return true
	case spoilWrongCorr:
		w := binary.BigEndian.AppendUint32(nil, uint32(len(resp)))
		w = binary.BigEndian.AppendUint32(w, uint32(corr+1000))
		w = append(w, resp[4:]...)
		_, err := c.Write(w)
		return err == nil
	}
	return false
}

// TestHostileBrokerCostsOnlyReconnects: every 7th produce response is
// garbage, a torn frame followed by silence, an absurd size or a wrong
// correlation id. The producer must reconnect and retry: no panic, no hang,
// every callback once, every record acked exactly once in order in the real
// broker's log.
func TestHostileBrokerCostsOnlyReconnects(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		c, n := memCluster(t, broker.Config{RTT: 2 * time.Millisecond,
			Topics: []broker.TopicConfig{{Name: "t", Partitions: 2, Window: 20}}})
		hp := startHostileProxy(t, n, c.Addr(), 7)
		p := newTestProducer(t, c, Dialer(n.Dial), BootstrapServers(hp.ln.Addr().String()), MaxInFlightRequestsPerConnection(10),
			BatchSize(512), RequestTimeout(400*time.Millisecond))
		tr := newTracker(t, "h")
		for part := range int32(2) {
			tr.produce(p, "t", part, 0, 1500, 60)
		}
		tr.wait()
		tr.requireClean(t, c, "t", 0, 1)
		var spoiled []int64
		total := int64(0)
		for i := range hp.spoiled {
			spoiled = append(spoiled, hp.spoiled[i].Load())
			total += hp.spoiled[i].Load()
		}
		t.Logf("produce responses %d, spoiled by kind %v, connections accepted %d", hp.produces.Load(), spoiled, hp.accepted.Load())
		for kind, n := range spoiled {
			if n == 0 {
				t.Errorf("spoil kind %d never happened: the test did not exercise it", kind)
			}
		}
		if hp.accepted.Load() < total/2 {
			t.Errorf("%d connections for %d spoiled responses: spoiled connections were reused", hp.accepted.Load(), total)
		}
	})
}

// TestOutOfOrderOnFirstUnackedBatchIsNotRetriedForever: when the oldest
// unacknowledged batch of a partition gets OUT_OF_ORDER_SEQUENCE_NUMBER
// while later batches wait in the retry queue, the broker's answer is
// final for it (nothing earlier is missing), so the producer must resolve
// it (fail it as fate unknown if it may be in the log, bump the epoch)
// instead of resending it until delivery.timeout.ms. Found by the soak
// (internal/soak, seed 2279135456329919898): a partition stalled for the
// whole delivery timeout, failing every batch behind it.
//
// Scenario: window 20; 20 batches are appended but every response is
// lost; before the producer retries them the topic's window shrinks to 5,
// so the broker has forgotten the first 15 and answers their retries
// OOOSN, while the last 5 are still recognised as duplicates.
func TestOutOfOrderOnFirstUnackedBatchIsNotRetriedForever(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		c := virtualCluster(t, broker.Config{RTT: 20 * time.Millisecond,
			Topics: []broker.TopicConfig{{Name: "t", Partitions: 1, Window: 20}}})
		p := newTestProducer(t, c, MaxInFlightRequestsPerConnection(50), BatchSize(512), Linger(0),
			RequestTimeout(time.Second), DeliveryTimeout(8*time.Second))
		tr := newTracker(t, "a")
		tr.produce(p, "t", 0, 0, 200, 100) // learn window 20
		tr.wait()
		before := len(c.Records("t", 0))
		c.DropProduceResponses(0, 20)
		tr.produce(p, "t", 0, 200, 80, 100) // ~20 batches of ~4 records
		// All appended; their responses are lost, so the producer retries them
		// only after request.timeout.ms (1 s). Shrink the window before that.
		waitFor(t, "the 80 records appended", func() bool { return len(c.Records("t", 0)) >= before+80 })
		if err := c.SetWindow("t", 5); err != nil {
			t.Fatal(err)
		}
		tr.wait()

		timedOut := 0
		for k, err := range tr.failed {
			if errors.Is(err, ErrDeliveryTimeout) {
				timedOut++
				if timedOut <= 3 {
					t.Errorf("record %s waited out delivery.timeout.ms although the broker answered every attempt: %v", k, err)
				}
			} else if !IsFateUnknown(err) {
				t.Errorf("record %s failed without FateUnknown: %v (it is in the log)", k, err)
			}
		}
		if timedOut > 0 {
			t.Errorf("%d records failed with delivery timeout", timedOut)
		}
		if lc := tr.checkLog(c, "t", 0); !lc.ok() {
			t.Errorf("log: lost=%d dup=%d reorder=%d %v", lc.lost, lc.dup, lc.reorder, first(lc.problems, 5))
		}
		if len(tr.acked) < 200+4*4 {
			t.Errorf("only %d records acked; the last batches are still retained by the broker and should be acked as duplicates", len(tr.acked))
		}
	})
}

// TestExpiredStateThenRetriableErrorKeepsOrder: KIP-854 expires a producer's
// state on a partition it has not written for producer.id.expiration.ms, so
// the realistic case is an idle partition. When writing resumes, the
// producer still has the learned window and sends several batches at once.
// If the first is refused with a retriable error without being appended
// (NOT_ENOUGH_REPLICAS) the broker, having no state, accepts the second at
// any sequence: the first can then only be appended after its successors.
// The producer must never ack it there (order is per partition, in Produce
// order); failing it is acceptable.
func TestExpiredStateThenRetriableErrorKeepsOrder(t *testing.T) {
	c := startCluster(t, broker.Config{RTT: 20 * time.Millisecond,
		Topics: []broker.TopicConfig{{Name: "t", Partitions: 1, Window: 20}}})
	p := newTestProducer(t, c, MaxInFlightRequestsPerConnection(50), BatchSize(512), Linger(0),
		RequestTimeout(time.Second), DeliveryTimeout(10*time.Second))
	tr := newTracker(t, "a")
	tr.produce(p, "t", 0, 0, 200, 100) // learn window 20
	tr.wait()
	c.ExpireProducerIDs() // the partition was idle long enough
	c.InjectError("t", 0, kerr.NotEnoughReplicas.Code, 1)
	tr.produce(p, "t", 0, 200, 80, 100) // ~20 batches at once
	tr.wait()
	lc := tr.checkLog(c, "t", 0)
	if lc.reorder > 0 || lc.dup > 0 || lc.lost > 0 {
		t.Errorf("log: lost=%d dup=%d reorder=%d %v", lc.lost, lc.dup, lc.reorder, first(lc.problems, 5))
	}
	for k, err := range tr.failed {
		t.Logf("failed (acceptable if not acked out of order): %s: %v", k, err)
		break
	}
}
