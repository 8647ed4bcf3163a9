package kafkatest

import (
	"context"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/longhaul-kafka/longhaul/producer"
	"github.com/longhaul-kafka/longhaul/protocol"
)

// millionRecords is the record count of the exactly-once runs (issue 8
// asks for at least 1,000,000). LONGHAUL_INTEROP_RECORDS overrides it for
// quick local iterations; CI uses the default.
func millionRecords(t *testing.T) int {
	if s := os.Getenv("LONGHAUL_INTEROP_RECORDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("LONGHAUL_INTEROP_RECORDS=%q: want a positive integer", s)
		}
		return n
	}
	return 1_000_000
}

// testLonghaulProduceVersion checks that longhaul's protocol layer
// negotiates the highest Produce version Kafka 4.4 offers, that the
// producer puts exactly that version on the wire, and that with no
// KIP-1269 field in the responses every partition's limit is 5.
func testLonghaulProduceVersion(t *testing.T, c *Cluster) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	av, err := APIVersions(ctx, c.DirectAddr(0))
	if err != nil {
		t.Fatal(err)
	}
	_, brokerMax, _ := VersionRange(av, produceKey)
	conn, err := protocol.Dial(ctx, c.DirectAddr(0), protocol.DialConfig{ClientID: "kafkatest"})
	if err != nil {
		t.Fatal(err)
	}
	v, ok := conn.Version(produceKey)
	conn.Close()
	want := min(brokerMax, int16(protocol.MaxProduceVersion))
	t.Logf("Kafka %s offers Produce up to v%d; longhaul knows up to v%d; protocol.Dial negotiated v%d", Version, brokerMax, protocol.MaxProduceVersion, v)
	if !ok || v != want {
		t.Fatalf("protocol.Dial negotiated Produce v%d (ok %v), want v%d", v, ok, want)
	}
	if protocol.MaxProduceVersion < 14 {
		t.Fatalf("protocol.MaxProduceVersion = %d: longhaul would not use KIP-1269's v14 on a broker that offered it", protocol.MaxProduceVersion)
	}

	const topic, partitions = "lh-version", 3
	c.CreateTopic(t, topic, partitions, 1, nil)
	sn := newProduceSniffer()
	p := newLonghaul(t, c.Bootstrap(), sn)
	var recs []*producer.Record
	for i := range 300 {
		r := &producer.Record{Topic: topic, Value: value(i)}
		r.SetPartition(int32(i % partitions))
		recs = append(recs, r)
	}
	if err := p.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("ProduceSync: %v", err)
	}
	vs, counts := sn.produceVersions()
	t.Logf("Produce requests on the wire by version: %v", counts)
	if !slices.Equal(vs, []int16{want}) {
		t.Fatalf("producer sent Produce versions %v, want only v%d", vs, want)
	}
	for i := range int32(partitions) {
		if got := p.InFlightLimit(topic, i); got != 5 {
			t.Errorf("InFlightLimit(%s, %d) = %d, want 5 (no KIP-1269 field from Kafka %s)", topic, i, got, Version)
		}
	}
}

// testLonghaulMillionExactlyOnce produces a million small records
// idempotently over 6 partitions straight to the broker, samples Stats
// every millisecond (limit 5, never more than 5 in flight, at most one
// while gated), and reads everything back with an independent kgo
// consumer: every record exactly once, in order.
func testLonghaulMillionExactlyOnce(t *testing.T, c *Cluster) {
	const topic, partitions = "lh-million", 6
	n := millionRecords(t)
	c.CreateTopic(t, topic, partitions, 1, nil)
	sn := newProduceSniffer()
	p := newLonghaul(t, c.Bootstrap(), sn)
	began := time.Now()
	stop := watchStats(p, topic, time.Millisecond)
	run := startLonghaul(p, topic, n, partitions, 0)
	sent := run.wait(t, 8*time.Minute)
	took := time.Since(began)
	w := stop()
	st := p.Stats()
	t.Logf("longhaul: %d records in %v (%.0f rec/s), %d batches sent, %d retried, producer id %d epoch %d",
		n, took.Round(time.Millisecond), float64(n)/took.Seconds(), st.BatchesSent, st.BatchesRetried, st.ProducerID, st.ProducerEpoch)
	t.Logf("stats: %v", w)
	_, counts := sn.produceVersions()
	t.Logf("Produce requests by version: %v", counts)
	if f := run.failures(); f != "" {
		t.Errorf("records failed on a healthy broker: %s", f)
	}
	w.check(t)
	for i := range int32(partitions) {
		if got := p.InFlightLimit(topic, i); got != 5 {
			t.Errorf("InFlightLimit(%s, %d) = %d, want 5", topic, i, got)
		}
	}
	checkLog(t, c, topic, partitions, sent)
}

// testLonghaulMillionThroughProxyWithCuts is the same million records
// through the proxy (1 ms one-way delay) while it cuts a random connection
// every 150 ms on average. Records reported failed with fate unknown may
// be absent or present once; with a 10-minute delivery timeout none
// should fail, and the counts are logged either way.
func testLonghaulMillionThroughProxyWithCuts(t *testing.T, c *Cluster) {
	const topic, partitions = "lh-million-cuts", 6
	n := millionRecords(t)
	c.CreateTopic(t, topic, partitions, 1, nil)
	c.SetDelay(time.Millisecond)
	t.Cleanup(func() { c.SetDelay(0) })
	p := newLonghaul(t, c.ProxiedBootstrap(), nil)
	// Start the cuts once the producer id is known, so they hit produce
	// requests rather than only the first metadata round trips.
	warm := &producer.Record{Topic: topic, Value: []byte("warm-up")}
	warm.SetPartition(0)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := p.ProduceSync(ctx, warm).FirstErr(); err != nil {
		t.Fatalf("warm-up: %v", err)
	}
	before := c.Proxy(0).Stats()
	cutStop, err := c.Proxy(0).CutRandomly(rand.New(rand.NewPCG(1269, 8)), 150*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	stop := watchStats(p, topic, time.Millisecond)
	run := startLonghaul(p, topic, n, partitions, 0)
	sent := run.wait(t, 8*time.Minute)
	took := time.Since(began)
	cutStop()
	w := stop()
	after := c.Proxy(0).Stats()
	st := p.Stats()
	t.Logf("longhaul through proxy: %d records in %v (%.0f rec/s); %d acked, %d failed; %d connections cut, %d accepted; %d batches sent, %d retried, %d epoch bumps",
		n, took.Round(time.Millisecond), float64(n)/took.Seconds(), run.acked.Load(), run.failed.Load(),
		after.Cuts-before.Cuts, after.Accepted-before.Accepted, st.BatchesSent, st.BatchesRetried, st.EpochBumps)
	t.Logf("stats: %v", w)
	if f := run.failures(); f != "" {
		t.Logf("failures: %s", f)
	}
	if after.Cuts == before.Cuts {
		t.Fatal("no connection was cut: the run did not exercise retries")
	}
	w.check(t)
	// The warm-up record is first in partition 0.
	sent[0] = append([]Sent{{Value: []byte("warm-up"), Outcome: Acked}}, sent[0]...)
	rep := checkLog(t, c, topic, partitions, sent)
	if rep.NotWritten > 0 {
		t.Errorf("%d records failed as not written despite a 10-minute delivery timeout: %s", rep.NotWritten, run.failures())
	}
}

// checkLog reads the whole topic (up to the log end offsets, so
// duplicates are read too) and checks it against sent.
func checkLog(t *testing.T, c *Cluster, topic string, partitions int32, sent map[int32][]Sent) DeliveryReport {
	t.Helper()
	ends := c.EndOffsets(t, topic, partitions)
	var total int64
	for _, e := range ends {
		total += e
	}
	began := time.Now()
	got := c.Consume(t, topic, int(total), 4*time.Minute)
	rep, err := CheckDelivered(sent, got)
	t.Logf("consumed %d records (log end offsets %v) in %v: %+v", total, ends, time.Since(began).Round(time.Millisecond), rep)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// testLonghaulLeaderMovesWhileProducing moves the leader of partition 0
// twice while longhaul produces to 3 partitions (replication 3,
// min.insync.replicas 2) through the proxies with 10 ms one-way delay,
// and checks no loss, no duplicate, order, and the reset on each leader
// change as Stats shows it. Kafka 4.4 sends no KIP-1269 window, so the
// limit is 5 before and after a move; what a reset makes observable is the
// Leader field switching to the new leader and the first-batch gate armed
// (Gated, at most one batch in flight) until the new leader acknowledges a
// batch. The delay makes that gate last at least one 20 ms round trip, long
// enough for the 1 ms Stats sampler to see it.
func testLonghaulLeaderMovesWhileProducing(t *testing.T, c *Cluster) {
	const topic, partitions, n = "lh-moves", 3, 100_000
	c.CreateTopic(t, topic, partitions, 3, map[string]string{"min.insync.replicas": "2"})
	c.SetDelay(10 * time.Millisecond)
	t.Cleanup(func() { c.SetDelay(0) })
	before := c.Partition(t, topic, 0)
	p := newLonghaul(t, c.ProxiedBootstrap(), nil)
	stop := watchStats(p, topic, time.Millisecond)
	run := startLonghaul(p, topic, n, partitions, 100) // >= 10 s of producing
	var moved, epochs []int32
	leader := before.Leader
	for _, at := range []int64{n / 4, n / 2} {
		run.waitAcked(at)
		to := (leader + 1) % 3
		epochs = append(epochs, c.MoveLeader(t, topic, 0, to))
		moved = append(moved, to)
		leader = to
	}
	sent := run.wait(t, 8*time.Minute)
	w := stop()
	after := c.Partition(t, topic, 0)
	st := p.Stats()
	t.Logf("partition 0: leader %d epoch %d -> moves to %v with epochs %v -> leader %d epoch %d",
		before.Leader, before.LeaderEpoch, moved, epochs, after.Leader, after.LeaderEpoch)
	t.Logf("longhaul: %d acked, %d failed; %d batches sent, %d retried; epoch bumps %d", run.acked.Load(), run.failed.Load(), st.BatchesSent, st.BatchesRetried, st.EpochBumps)
	t.Logf("stats: %v", w)
	if f := run.failures(); f != "" {
		t.Errorf("records failed: %s", f)
	}
	if after.Leader != moved[1] || after.LeaderEpoch < before.LeaderEpoch+2 {
		t.Fatalf("leadership did not move twice: moves %v, final leader %d epoch %d", moved, after.Leader, after.LeaderEpoch)
	}
	w.check(t)
	for l, n := range w.limits {
		if l != 5 {
			t.Errorf("limit %d seen in %d samples; Kafka %s sends no window, so it must stay 5", l, n, Version)
		}
	}

	// The producer must have followed both moves, in order, and re-armed
	// the gate under a new leader.
	var seq []int32
	gatedAfterMove := 0
	for i, s := range w.leaders[0] {
		if s.leader < 0 {
			continue // unknown for a moment between metadata answers
		}
		if len(seq) == 0 || seq[len(seq)-1] != s.leader {
			seq = append(seq, s.leader)
		}
		if i > 0 && s.gatedSamples > 0 {
			gatedAfterMove++
		}
	}
	want := []int32{before.Leader, moved[0], moved[1]}
	if !slices.Equal(seq, want) {
		t.Errorf("Stats leader of partition 0 went %v, want %v", seq, want)
	}
	if gatedAfterMove == 0 {
		t.Errorf("the first-batch gate was never seen armed after a leader change (%v)", w)
	}
	rep := checkLog(t, c, topic, partitions, sent)
	if rep.Acked != n {
		t.Errorf("%d of %d records acknowledged", rep.Acked, n)
	}
}
