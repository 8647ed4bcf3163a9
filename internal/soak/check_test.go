package soak

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-kafka/longhaul/internal/broker"
	"github.com/longhaul-kafka/longhaul/internal/testkit"
	"github.com/longhaul-kafka/longhaul/producer"
)

// TestValueRoundTrip: the soak's values carry the producer index as
// testkit.Value's id; an id that is not an index below 2^16 is foreign.
func TestValueRoundTrip(t *testing.T) {
	v := encodeValue(63, 1<<40, 100)
	p, seq, n, ok := decodeValue(v)
	require.True(t, ok)
	require.Equal(t, 63, p)
	require.Equal(t, uint64(1<<40), seq)
	require.Equal(t, "63/1099511627776/", string(v[:n]))
	// Values testkit.ParseValue accepts, but not with a producer index.
	for _, bad := range []string{"x/1/", "65536/1/", "123456/1/", "1/2/3/"} {
		_, _, _, ok := decodeValue([]byte(bad))
		require.False(t, ok, "%q decoded", bad)
	}
}

// TestCheckerNegativeControl runs a short soak without faults and doctors
// the log read back: a duplicated record, two records swapped, an
// acknowledged record removed, and a record failed without FateUnknown put
// into the log. The checks must see every one of them, proving they can
// fail. Node 0 also stalls for 2.5 s without the stuck check being told
// (nothing explains the silence): the partitions it leads must be reported
// stuck.
func TestCheckerNegativeControl(t *testing.T) {
	var target struct {
		topic string
		part  int32
	}
	doctored := false
	cfg := Config{Seed: 7, Duration: 2500 * time.Millisecond, Producers: 2, FaultInterval: time.Hour, ExpireInterval: -1,
		hideStall: 2500 * time.Millisecond,
		doctor: func(topic string, part int32, log []logRecord) []logRecord {
			if doctored || len(log) < 10 {
				return log
			}
			doctored = true
			target.topic, target.part = topic, part
			out := slices.Clone(log)
			out = append(out, out[2])         // duplicate
			out[4], out[5] = out[5], out[4]   // reorder (records 4 and 5 are the same producer's, see below)
			out = append(out[:7], out[8:]...) // lose an acked record
			return out
		}}
	res, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !doctored {
		t.Fatal("no partition had 10 records to doctor")
	}
	t.Log(res.String())
	if res.Dup < 1 || res.Lost < 1 || res.OK() || res.Err() == nil || !errors.Is(res.Err(), ErrCheckFailed) {
		t.Errorf("doctored %s[%d] but the checks missed it: %s", target.topic, target.part, res)
	}
	require.Positive(t, res.Stuck, "node 0 stalled 2.5 s unexplained: %s", res)
	require.Greater(t, res.MaxSilent, retryBackoffMax+600*time.Millisecond+stuckSlack, "flagged only beyond the base allowance")
	// The swap is a reordering only when both records are one producer's;
	// check the reorder detector directly on a clean synthetic log.
	b := &book{}
	for range 3 {
		seq := b.add(0, 0, 0)
		r := &producer.Record{Offset: int64(seq)}
		r.SetPartition(0)
		b.done(seq, r, nil, []string{"t"})
	}
	mk := func(seqs ...uint64) []logRecord {
		var l []logRecord
		for i, s := range seqs {
			l = append(l, broker.LogRecord{Offset: int64(i), Value: encodeValue(0, s, 0)})
		}
		return l
	}
	if c := checkRecords([]*book{b}, []string{"t"}, map[tp][]logRecord{{"t", 0}: mk(0, 1, 2)}); c.lost+c.dup+c.reorder+c.badOffset != 0 {
		t.Fatalf("clean log flagged: %+v", c)
	}
	if c := checkRecords([]*book{b}, []string{"t"}, map[tp][]logRecord{{"t", 0}: mk(0, 2, 1)}); c.reorder != 1 {
		t.Errorf("swapped log: reorder=%d, want 1 (%v)", c.reorder, c.problems)
	}
	// A record failed without FateUnknown must not be in the log.
	b2 := &book{}
	seq := b2.add(0, 0, 0)
	b2.done(seq, &producer.Record{}, &producer.DeliveryError{Topic: "t", Err: producer.ErrDeliveryTimeout}, []string{"t"})
	if c := checkRecords([]*book{b2}, []string{"t"}, map[tp][]logRecord{{"t", 0}: mk(0)}); c.phantom != 1 {
		t.Errorf("failed record in the log: phantom=%d, want 1", c.phantom)
	}
	// An error that does not say why is flagged.
	b3 := &book{}
	seq = b3.add(0, 0, 0)
	b3.done(seq, &producer.Record{}, errors.New("nope"), []string{"t"})
	if c := checkRecords([]*book{b3}, []string{"t"}, nil); c.unexplained != 1 {
		t.Errorf("bare error: unexplained=%d, want 1", c.unexplained)
	}
	// A callback run twice is flagged.
	b3.done(seq, &producer.Record{}, errors.New("again"), []string{"t"})
	if c := checkRecords([]*book{b3}, []string{"t"}, nil); c.badCallbacks != 1 {
		t.Errorf("double callback: badCallbacks=%d, want 1", c.badCallbacks)
	}
}

// TestWindowTrackerNegativeControl: the allowance after a shrink lasts
// exactly until every producer's own view is within the new window (no
// time margin), and a connection a producer gave up allows its in-flight
// count more until the node's stall is over plus drain; outside both the
// bound is the window in force.
func TestWindowTrackerNegativeControl(t *testing.T) {
	c := testkit.StartCluster(t, broker.Config{Topics: []broker.TopicConfig{{Name: "w20", Partitions: 1, Window: 20}}})
	w := newWindowTracker(c, 0, map[string]int{"w20": 20}, 1, nil, time.Now())
	p := tp{"w20", 0}
	producerView := view{limit: 20, inflight: 12}
	w.views = func() []map[tp]view { return []map[tp]view{{p: producerView}} }
	check := func(what string, want int, wantStrict bool) {
		t.Helper()
		if got, strict := w.bound(p, time.Now()); got != want || strict != wantStrict {
			t.Errorf("%s: bound %d strict %v, want %d %v", what, got, strict, want, wantStrict)
		}
	}
	check("start", 20, true)
	// Shrink to 5: 20 stays allowed while the producer still uses it,
	// however many segments that takes.
	if err := w.setWindow("w20", 5, func() error { return c.SetWindow("w20", 5) }); err != nil {
		t.Fatal(err)
	}
	check("right after shrink", 20, false)
	w.closeSegment(time.Now())
	w.closeSegment(time.Now())
	check("producer still at limit 20", 20, false)
	producerView = view{limit: 5, inflight: 9} // learned 5, older batches still out
	w.closeSegment(time.Now())
	check("producer at limit 5 with 9 in flight", 20, false)
	producerView = view{limit: 5, inflight: 5}
	w.closeSegment(time.Now())
	check("producer settled", 5, true)

	// A connection given up during a stall: its 4 batches may stay
	// counted at the broker until the stall is over.
	stallEnd := time.Now().Add(time.Hour)
	w.stalled(0, stallEnd)
	w.connLost(1, 0, time.Now(), map[tp]int{p: 4})
	w.connLost(2, 0, time.Now(), map[tp]int{p: 3})
	w.connLost(1, 0, time.Now(), map[tp]int{p: 2})
	check("after losses", 5+4+2, false)
	w.closeSegment(time.Now())
	check("stall still on", 5+4+2, false)
	w.mu.Lock()
	w.stallEnd[0] = time.Now().Add(-time.Millisecond)
	w.mu.Unlock()
	w.closeSegment(time.Now()) // still overlaps the drained losses
	w.closeSegment(time.Now())
	check("stall over, drained", 5, true)
	if w.violations != 0 {
		t.Fatalf("violations with nothing in flight: %v", w.problems)
	}
}

// TestLossHook: a connection the producer gives up reaches onLoss with
// its node, once, and a connection that stays up does not.
func TestLossHook(t *testing.T) {
	c, err := broker.Start(broker.Config{Nodes: 2, Topics: []broker.TopicConfig{{Name: "t", Partitions: 2}}})
	require.NoError(t, err)
	defer c.Close()
	var mu sync.Mutex
	var nodes []int32
	hook := &lossHook{onLoss: func(n int32, _ time.Time) {
		mu.Lock()
		nodes = append(nodes, n)
		mu.Unlock()
	}}
	p, err := producer.New(producer.BootstrapServers(c.Addr()), producer.Hooks(hook))
	require.NoError(t, err)
	defer p.Close(context.Background())
	send := func(part int32) {
		r := &producer.Record{Topic: "t", Value: []byte("v")}
		r.SetPartition(part)
		require.NoError(t, p.ProduceSync(context.Background(), r).FirstErr())
	}
	send(0)
	send(1)
	c.DropConnections(1)
	send(1) // finds node 1's connection closed and dials again
	send(0)
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []int32{1}, nodes)
}

// TestWindowCheckSeesRealExcess: a producer fills a window-20 partition
// while the tracker believes the window is 5; closing the segment must
// report the excess (the broker's real counters, not a synthetic one).
func TestWindowCheckSeesRealExcess(t *testing.T) {
	c := testkit.StartCluster(t, broker.Config{RTT: 20 * time.Millisecond, Topics: []broker.TopicConfig{{Name: "w20", Partitions: 1, Window: 20}}})
	w := newWindowTracker(c, 0, map[string]int{"w20": 5}, 1, nil, time.Now())
	p, err := producer.New(producer.BootstrapServers(c.Addr()), producer.BatchSize(512),
		producer.MaxInFlightRequestsPerConnection(50), producer.Linger(0))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(context.Background())
	recs := make([]*producer.Record, 3000)
	for i := range recs {
		recs[i] = &producer.Record{Topic: "w20", Value: encodeValue(0, uint64(i), 100)}
		recs[i].SetPartition(0)
	}
	if err := p.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	w.closeSegment(time.Now())
	if w.violations != 1 || w.maxSeen["w20"] <= 5 {
		t.Fatalf("window believed 5, broker saw %d in flight, violations %d: the check cannot fail", w.maxSeen["w20"], w.violations)
	}
	t.Logf("as expected: %v", w.problems)
}

// classify holds an ErrOrderLost record to "not in the log" even when it
// is marked FateUnknown, as ErrOrderLost promises; other FateUnknown
// failures may be in the log once, and a bare error says nothing.
func TestClassifyOrderLostIsNotWritten(t *testing.T) {
	orderLost := &producer.DeliveryError{Topic: "t", FateUnknown: true, Err: producer.ErrOrderLost}
	require.Equal(t, stFailedKnown, classify(orderLost, "t"))
	timedOut := &producer.DeliveryError{Topic: "t", FateUnknown: true, Err: producer.ErrDeliveryTimeout}
	require.Equal(t, stFailedUnknown, classify(timedOut, "t"))
	require.Equal(t, stFailedKnown, classify(&producer.DeliveryError{Topic: "t", Err: producer.ErrDeliveryTimeout}, "t"))
	require.Equal(t, stFailedBad, classify(producer.ErrOrderLost, "t"))
	require.Equal(t, stFailedBad, classify(orderLost, "other"))
}
