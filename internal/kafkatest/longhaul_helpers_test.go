package kafkatest

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/longhaul-kafka/longhaul/producer"
)

// produceSniffer wraps the producer's dialer and reads the request headers
// the producer writes (size, api key, api version), so a test sees the
// Produce version on the wire rather than trusting the producer's word.
type produceSniffer struct {
	mu       sync.Mutex
	versions map[int16]int64 // Produce version -> requests
}

func newProduceSniffer() *produceSniffer {
	return &produceSniffer{versions: make(map[int16]int64)}
}

func (s *produceSniffer) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &sniffConn{Conn: c, s: s}, nil
}

// produceVersions returns the Produce versions seen, sorted, with counts.
func (s *produceSniffer) produceVersions() ([]int16, map[int16]int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	counts := make(map[int16]int64, len(s.versions))
	var vs []int16
	for v, n := range s.versions {
		vs = append(vs, v)
		counts[v] = n
	}
	slices.Sort(vs)
	return vs, counts
}

// sniffConn parses the client-to-broker byte stream into frames. Writes
// may hold several frames or split one anywhere, so it keeps the header
// bytes of the current frame and the count of body bytes still to skip.
type sniffConn struct {
	net.Conn
	s    *produceSniffer
	hdr  []byte // bytes of the current frame's first 8 bytes
	skip int    // bytes of the current frame still to pass over
}

func (c *sniffConn) Write(b []byte) (int, error) {
	c.scan(b)
	return c.Conn.Write(b)
}

func (c *sniffConn) scan(b []byte) {
	for len(b) > 0 {
		if c.skip > 0 {
			n := min(c.skip, len(b))
			c.skip -= n
			b = b[n:]
			continue
		}
		n := min(8-len(c.hdr), len(b))
		c.hdr = append(c.hdr, b[:n]...)
		b = b[n:]
		if len(c.hdr) < 8 {
			return
		}
		size := int(int32(binary.BigEndian.Uint32(c.hdr)))
		key := int16(binary.BigEndian.Uint16(c.hdr[4:]))
		version := int16(binary.BigEndian.Uint16(c.hdr[6:]))
		if key == produceKey {
			c.s.mu.Lock()
			c.s.versions[version]++
			c.s.mu.Unlock()
		}
		c.hdr = c.hdr[:0]
		c.skip = size - 4 // the 4 bytes of key and version are read
	}
}

// value returns record i's value: 24 bytes, unique, the index readable.
func value(i int) []byte {
	b := make([]byte, 0, 24)
	b = append(b, "lh-"...)
	b = strconv.AppendInt(b, int64(i), 10)
	for len(b) < 24 {
		b = append(b, '.')
	}
	return b
}

// newLonghaul builds a longhaul producer on bootstrap (comma-separated)
// with a generous delivery timeout, dialing through sn when non-nil, and
// closes it in t.Cleanup.
func newLonghaul(t testing.TB, bootstrap string, sn *produceSniffer, opts ...producer.Opt) *producer.Producer {
	t.Helper()
	all := []producer.Opt{
		producer.BootstrapServers(strings.Split(bootstrap, ",")...),
		producer.ClientID("kafkatest-longhaul"),
		producer.DeliveryTimeout(10 * time.Minute),
	}
	if sn != nil {
		all = append(all, producer.Dialer(sn.dial))
	}
	if os.Getenv("LONGHAUL_INTEROP_LOG") == "1" {
		all = append(all, producer.Logger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))))
	}
	p, err := producer.New(append(all, opts...)...)
	if err != nil {
		t.Fatalf("producer.New: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		p.Close(ctx)
	})
	return p
}

// lhRun produces n records with longhaul in the background, record i to
// partition i%partitions with value(i), and records each callback's
// outcome. With perTick > 0 it produces at most perTick records every
// 10 ms, so that faults injected meanwhile land while records are in
// flight; with 0 it produces as fast as buffer.memory lets it.
type lhRun struct {
	n, partitions int
	outcome       []atomic.Uint32 // per record: 0 pending, 1+Outcome when called back
	acked         atomic.Int64
	failed        atomic.Int64
	done          chan struct{} // closed when every callback has run

	mu       sync.Mutex
	firstErr error
	errs     map[string]int // error text -> count
}

func startLonghaul(p *producer.Producer, topic string, n, partitions, perTick int) *lhRun {
	r := &lhRun{n: n, partitions: partitions, outcome: make([]atomic.Uint32, n), done: make(chan struct{}), errs: map[string]int{}}
	go func() {
		var wg sync.WaitGroup
		wg.Add(n)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for i := range n {
			if perTick > 0 && i > 0 && i%perTick == 0 {
				<-tick.C
			}
			rec := &producer.Record{Topic: topic, Value: value(i)}
			rec.SetPartition(int32(i % partitions))
			p.Produce(context.Background(), rec, func(_ *producer.Record, err error) {
				defer wg.Done()
				if err == nil {
					r.outcome[i].Store(1 + uint32(Acked))
					r.acked.Add(1)
					return
				}
				o := NotWritten
				if producer.IsFateUnknown(err) {
					o = MaybeWritten
				}
				r.outcome[i].Store(1 + uint32(o))
				r.failed.Add(1)
				r.mu.Lock()
				if r.firstErr == nil {
					r.firstErr = err
				}
				r.errs[errKind(err)]++
				r.mu.Unlock()
			})
		}
		wg.Wait()
		close(r.done)
	}()
	return r
}

// errKind shortens an error for counting: the DeliveryError's cause and
// fate, not its sequence number.
func errKind(err error) string {
	var de *producer.DeliveryError
	if errors.As(err, &de) {
		return fmt.Sprintf("%v (fate unknown %v)", de.Err, de.FateUnknown)
	}
	return err.Error()
}

// waitAcked waits until k records are acknowledged or all are done.
func (r *lhRun) waitAcked(k int64) {
	for r.acked.Load() < k {
		select {
		case <-r.done:
			return
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// wait waits up to timeout for every callback and returns what was sent,
// per partition in produce order.
func (r *lhRun) wait(t testing.TB, timeout time.Duration) map[int32][]Sent {
	t.Helper()
	select {
	case <-r.done:
	case <-time.After(timeout):
		t.Fatalf("only %d acked and %d failed of %d records after %v", r.acked.Load(), r.failed.Load(), r.n, timeout)
	}
	out := make(map[int32][]Sent, r.partitions)
	for i := range r.n {
		p := int32(i % r.partitions)
		out[p] = append(out[p], Sent{Value: value(i), Outcome: Outcome(r.outcome[i].Load() - 1)})
	}
	return out
}

// failures describes the failed records, "" when none failed.
func (r *lhRun) failures() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.errs) == 0 {
		return ""
	}
	return fmt.Sprintf("%d failed, first %v, by kind %v", r.failed.Load(), r.firstErr, r.errs)
}

// statsWatch folds producer.Stats snapshots into what the tests assert:
// the in-flight maximum and limits seen per partition, gate violations,
// and per-partition leader history with whether the gate was seen armed
// under each leader.
type statsWatch struct {
	samples      int
	maxInFlight  map[int32]int
	limits       map[int]int // limit value -> samples
	overLimit    []string    // samples with InFlight > Limit or > 5
	gateBreached []string    // samples with Gated and InFlight > 1
	leaders      map[int32][]leaderSpan
	maxRetried   map[int32]int64
	epochBumps   int64
}

// leaderSpan is one stretch of samples with the same leader.
type leaderSpan struct {
	leader        int32
	samples       int
	gatedSamples  int
	gatedRuns     int // stretches of consecutive gated samples: how often the gate was seen re-armed
	lastGated     bool
	firstGatedIdx int // sample index within the span when first seen gated, -1 if never
}

func newStatsWatch() *statsWatch {
	return &statsWatch{maxInFlight: map[int32]int{}, limits: map[int]int{}, leaders: map[int32][]leaderSpan{}, maxRetried: map[int32]int64{}}
}

// observe folds one snapshot of topic's partitions into w.
func (w *statsWatch) observe(st producer.Stats, topic string) {
	w.samples++
	w.epochBumps = st.EpochBumps
	for _, ps := range st.Partitions {
		if ps.Topic != topic {
			continue
		}
		p := ps.Partition
		w.maxInFlight[p] = max(w.maxInFlight[p], ps.InFlight)
		w.limits[ps.Limit]++
		w.maxRetried[p] = max(w.maxRetried[p], ps.BatchesRetried)
		if ps.InFlight > ps.Limit || ps.InFlight > 5 || ps.Limit > 5 {
			w.overLimit = append(w.overLimit, fmt.Sprintf("sample %d: %s/%d InFlight %d Limit %d", w.samples, topic, p, ps.InFlight, ps.Limit))
		}
		// While draining, what is in flight was sent before the reset
		// and nothing new goes: the gate holds what follows.
		if ps.Gated && !ps.Draining && ps.InFlight > 1 {
			w.gateBreached = append(w.gateBreached, fmt.Sprintf("sample %d: %s/%d gated with %d in flight", w.samples, topic, p, ps.InFlight))
		}
		spans := w.leaders[p]
		if len(spans) == 0 || spans[len(spans)-1].leader != ps.Leader {
			spans = append(spans, leaderSpan{leader: ps.Leader, firstGatedIdx: -1})
		}
		s := &spans[len(spans)-1]
		if ps.Gated && !s.lastGated {
			s.gatedRuns++
		}
		s.lastGated = ps.Gated
		if ps.Gated {
			s.gatedSamples++
			if s.firstGatedIdx < 0 {
				s.firstGatedIdx = s.samples
			}
		}
		s.samples++
		w.leaders[p] = spans
	}
}

// watchStats samples p.Stats() every interval until the returned stop is
// called; stop returns the folded result.
func watchStats(p *producer.Producer, topic string, interval time.Duration) (stop func() *statsWatch) {
	w := newStatsWatch()
	quit, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			w.observe(p.Stats(), topic)
			select {
			case <-quit:
				w.observe(p.Stats(), topic)
				return
			case <-tick.C:
			}
		}
	}()
	var once sync.Once
	return func() *statsWatch {
		once.Do(func() { close(quit) })
		<-exited
		return w
	}
}

// check fails t on any sample over the limit or through the gate.
func (w *statsWatch) check(t testing.TB) {
	t.Helper()
	if len(w.overLimit) > 0 {
		t.Errorf("%d samples over the in-flight limit (KIP-1269 absent: must stay <= 5), first: %s", len(w.overLimit), w.overLimit[0])
	}
	if len(w.gateBreached) > 0 {
		t.Errorf("%d samples with more than one batch in flight while gated, first: %s", len(w.gateBreached), w.gateBreached[0])
	}
}

// String summarises w for the test log.
func (w *statsWatch) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d samples; limits seen %v; max in flight per partition %v; max retried %v; epoch bumps %d",
		w.samples, w.limits, w.maxInFlight, w.maxRetried, w.epochBumps)
	for _, p := range slices.Sorted(maps.Keys(w.leaders)) {
		if spans := w.leaders[p]; len(spans) > 1 {
			fmt.Fprintf(&b, "; p%d leaders", p)
			for _, s := range spans {
				fmt.Fprintf(&b, " %d(%d samples, %d gated in %d runs, first gated at %d)", s.leader, s.samples, s.gatedSamples, s.gatedRuns, s.firstGatedIdx)
			}
		}
	}
	return b.String()
}
