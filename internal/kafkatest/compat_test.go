package kafkatest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/longhaul-kafka/longhaul/producer"
)

// compatRow is one release's line of the compatibility table.
type compatRow struct {
	release        Release
	produce        int16 // ApiVersions max of Produce
	initProducerID int16 // ... of InitProducerId
	metadata       int16 // ... of Metadata
	window         int   // the producer's in-flight limit after the run
	bump           string
}

// compatRecords is the record count of each release's faulty run; CI uses
// the default. LONGHAUL_COMPAT_RECORDS overrides it.
func compatRecords(t *testing.T) int {
	t.Helper()
	if s := os.Getenv("LONGHAUL_COMPAT_RECORDS"); s != "" {
		var n int
		_, err := fmt.Sscan(s, &n)
		require.NoError(t, err, "LONGHAUL_COMPAT_RECORDS=%q", s)
		require.Positive(t, n, "LONGHAUL_COMPAT_RECORDS")
		return n
	}
	return 20_000
}

// compatReleases returns the releases to test: all of them, or those in
// LONGHAUL_COMPAT_RELEASES (comma-separated versions) for local runs.
func compatReleases(t *testing.T) []Release {
	t.Helper()
	s := os.Getenv("LONGHAUL_COMPAT_RELEASES")
	if s == "" {
		return Releases()
	}
	var out []Release
	for _, v := range strings.Split(s, ",") {
		r, ok := ReleaseByVersion(strings.TrimSpace(v))
		require.True(t, ok, "LONGHAUL_COMPAT_RELEASES: unknown release %q", v)
		out = append(out, r)
	}
	return out
}

// TestCompatMatrix runs every release of the matrix, one single-node
// cluster at a time: it records the ApiVersions that decide the
// producer's behaviour, produces through the proxy with connection cuts and
// dropped Produce responses, stops them and settles the producer's
// connection ([settle]), forces one epoch bump with a record the broker
// rejects, and reads everything back (exactly once, in order, nothing of
// the rejected record). The table it logs is the README's compatibility
// table, which it checks.
func TestCompatMatrix(t *testing.T) {
	var rows []compatRow
	for _, rel := range compatReleases(t) {
		t.Run(rel.version(), func(t *testing.T) {
			began := time.Now()
			row := testCompatRelease(t, rel)
			t.Logf("%v: done in %v", rel, time.Since(began).Round(time.Second))
			rows = append(rows, row)
		})
	}
	table := compatTable(rows)
	t.Logf("compatibility matrix:\n%s", table)
	if len(rows) > 0 {
		checkReadmeTable(t, rows)
	}
}

func testCompatRelease(t *testing.T, rel Release) compatRow {
	c := Start(t, Options{Release: rel})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	av, err := APIVersions(ctx, c.DirectAddr(0))
	require.NoError(t, err)
	row := compatRow{release: rel}
	for key, dst := range map[int16]*int16{
		produceKey:                            &row.produce,
		(&kmsg.InitProducerIDRequest{}).Key(): &row.initProducerID,
		(&kmsg.MetadataRequest{}).Key():       &row.metadata,
	} {
		_, maxV, ok := VersionRange(av, key)
		require.True(t, ok, "%v does not offer %s", rel, kmsg.NameForKey(key))
		*dst = maxV
	}
	t.Logf("%v: Produce v%d, InitProducerId v%d, Metadata v%d", rel, row.produce, row.initProducerID, row.metadata)
	// The premises of what follows: every release keeps 5 batches per
	// producer (Produce v4+), and KIP-360 bumps arrive with 2.5.
	require.GreaterOrEqual(t, row.produce, int16(4), "Produce v3 brokers keep one batch; none is in the matrix")
	preKIP360 := versionLess(rel.version(), "2.5")
	assert.Equal(t, preKIP360, row.initProducerID < 3, "InitProducerId v%d on %v", row.initProducerID, rel)

	const topic, partitions = "compat", 3
	// Batches of at most 1 KiB always fit; one 8 KiB record never does.
	c.CreateTopic(t, topic, partitions, 1, map[string]string{"max.message.bytes": "4096"})
	c.SetDelay(time.Millisecond)
	drop := newRespDropper(uint64(len(rel.version())), 40)
	p := newLonghaul(t, c.ProxiedBootstrap(), nil,
		producer.Dialer(drop.dial),
		producer.BatchSize(1024),
		producer.Linger(time.Millisecond),
	)
	warm := &producer.Record{Topic: topic, Value: []byte("warm-up")}
	warm.SetPartition(0)
	require.NoError(t, p.ProduceSync(ctx, warm).FirstErr(), "warm-up")
	stWarm := p.Stats()
	require.GreaterOrEqual(t, stWarm.ProducerID, int64(0))

	// Phase 1: cuts and dropped responses while producing.
	n := compatRecords(t)
	proxyBefore := c.Proxy(0).Stats()
	drop.enabled.Store(true)
	stopCuts, err := c.Proxy(0).CutRandomly(rand.New(rand.NewPCG(15, uint64(n))), 200*time.Millisecond)
	require.NoError(t, err)
	watch := watchStats(p, topic, time.Millisecond)
	run := startLonghaul(p, topic, n, partitions, 200)
	sent := run.wait(t, 4*time.Minute)
	stopCuts()
	drop.enabled.Store(false)
	cuts := c.Proxy(0).Stats().Cuts - proxyBefore.Cuts
	st1 := p.Stats()
	t.Logf("faulty run: %d acked, %d failed; %d connections cut, %d responses dropped; %d batches sent, %d retried; producer id %d epoch %d, %d bumps",
		run.acked.Load(), run.failed.Load(), cuts, drop.dropped.Load(), st1.BatchesSent, st1.BatchesRetried, st1.ProducerID, st1.ProducerEpoch, st1.EpochBumps)
	assert.Empty(t, run.failures(), "records failed with a 10-minute delivery timeout")
	assert.Positive(t, cuts, "no connection was cut")
	assert.Positive(t, drop.dropped.Load(), "no response was dropped")
	// A cut or drop just before the stop may not have reached the
	// producer yet; the too-large record must not be the first request
	// on such a connection (settle).
	sent[1] = append(sent[1], settle(t, ctx, p, topic, 1))

	// Phase 2: one forced bump. The too-large record fails alone
	// (MESSAGE_TOO_LARGE, not written); the batches queued right behind it
	// already carry later sequence numbers, so the gap needs an epoch
	// bump: KIP-360 on 2.5+, a new producer id before.
	var (
		bumpErr  error
		after    []Sent
		attempts int
	)
	bumpsBefore := p.Stats().EpochBumps
	// InitProducerId requests so far: the first id, and its retries when
	// the coordinator was still loading (KRaft brokers right after start).
	initsBefore := len(drop.initRequests())
	for attempt := 1; attempt <= 3 && p.Stats().EpochBumps == bumpsBefore; attempt++ {
		attempts = attempt
		big := make([]byte, 8<<10)
		copy(big, fmt.Sprintf("too-big-%d", attempt))
		tooBig := &producer.Record{Topic: topic, Value: big}
		tooBig.SetPartition(1)
		errc := make(chan error, 1)
		p.Produce(ctx, tooBig, func(_ *producer.Record, err error) { errc <- err })
		var recs []*producer.Record
		for i := range 400 {
			r := &producer.Record{Topic: topic, Value: []byte(fmt.Sprintf("after-%d-%d", attempt, i))}
			r.SetPartition(1)
			recs = append(recs, r)
			after = append(after, Sent{Value: r.Value, Outcome: Acked})
		}
		res := p.ProduceSync(ctx, recs...)
		require.NoError(t, res.FirstErr(), "records behind the rejected one")
		bumpErr = <-errc
		t.Logf("attempt %d: too-large record: %v; bumps %d", attempt, bumpErr, p.Stats().EpochBumps)
		require.Error(t, bumpErr)
		sent[1] = append(sent[1], Sent{Value: tooBig.Value, Outcome: NotWritten})
		sent[1] = append(sent[1], after...)
		after = after[:0]
	}
	require.True(t, errors.Is(bumpErr, kerr.MessageTooLarge), "the record failed with %v, want MESSAGE_TOO_LARGE", bumpErr)
	assert.False(t, producer.IsFateUnknown(bumpErr), "a record the broker rejected is certainly not written")
	st2 := p.Stats()
	require.Greater(t, st2.EpochBumps, bumpsBefore, "no epoch bump after a rejected record with later batches behind it")
	t.Logf("bump: producer id %d epoch %d -> id %d epoch %d", st1.ProducerID, st1.ProducerEpoch, st2.ProducerID, st2.ProducerEpoch)
	// How the producer bumped: before 2.5 it must ask for a new id
	// (InitProducerId < v3 has no KIP-360 fields); from 2.5 it raises its
	// own epoch without asking (KIP-360 for producers without a
	// transactional id, as the Java client does: Kafka would answer
	// InitProducerId with a new id anyway), and the broker must accept the
	// higher epoch from sequence 0 (the records after the bump are
	// checked in the log below).
	inits := drop.initRequests()
	for i, r := range inits {
		require.NotNil(t, r, "InitProducerId request %d undecodable", i)
	}
	if preKIP360 {
		require.Greater(t, len(inits), initsBefore, "no InitProducerId request for the bump")
		ask := inits[initsBefore]
		t.Logf("bump request: InitProducerId v%d producer id %d epoch %d", ask.Version, ask.ProducerID, ask.ProducerEpoch)
		assert.Less(t, ask.Version, int16(3))
		assert.Equal(t, int64(-1), ask.ProducerID)
		assert.NotEqual(t, st1.ProducerID, st2.ProducerID, "pre-2.5: a bump takes a new producer id")
		assert.Zero(t, st2.ProducerEpoch, "a new producer id starts at epoch 0")
		row.bump = "new producer id (InitProducerId v" + fmt.Sprint(ask.Version) + ")"
	} else {
		assert.Equal(t, initsBefore, len(inits), "2.5+: the epoch is raised locally, no InitProducerId")
		assert.Equal(t, st1.ProducerID, st2.ProducerID, "2.5+: same producer id")
		assert.Greater(t, st2.ProducerEpoch, st1.ProducerEpoch, "2.5+: the epoch must have risen")
		row.bump = "epoch raised by the client (KIP-360)"
	}

	w := watch()
	w.check(t)
	row.window = 5
	for i := range int32(partitions) {
		got := p.InFlightLimit(topic, i)
		assert.Equal(t, 5, got, "InFlightLimit(%s, %d) on %v", topic, i, rel)
		row.window = min(row.window, got)
	}
	sent[0] = append([]Sent{{Value: []byte("warm-up"), Outcome: Acked}}, sent[0]...)
	rep := checkLog(t, c, topic, partitions, sent)
	assert.Equal(t, 1+n+1+400*attempts, rep.Acked, "acknowledged records found once (warm-up, run, settle, after the rejected ones)")
	assert.Equal(t, attempts, rep.NotWritten, "rejected records, all absent")
	return row
}

// compatTable renders rows as the README's markdown table.
func compatTable(rows []compatRow) string {
	var b strings.Builder
	b.WriteString("| Kafka | mode | Produce | InitProducerId | Metadata | in-flight window | epoch bump |\n")
	b.WriteString("|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		mode := "KRaft"
		if !r.release.KRaft() {
			mode = "ZooKeeper " + r.release.ZooKeeper
		}
		fmt.Fprintf(&b, "| %s | %s | v%d | v%d | v%d | %d | %s |\n",
			r.release.version(), mode, r.produce, r.initProducerID, r.metadata, r.window, r.bump)
	}
	return b.String()
}

// checkReadmeTable checks that README.md has each measured row verbatim,
// so the documented table is the tested one.
func checkReadmeTable(t *testing.T, rows []compatRow) {
	t.Helper()
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	have := map[string]bool{}
	for _, line := range strings.Split(string(readme), "\n") {
		have[strings.TrimSpace(line)] = true
	}
	lines := strings.Split(strings.TrimSpace(compatTable(rows)), "\n")
	for _, line := range lines[2:] {
		assert.True(t, have[line], "README.md lacks the measured row\n%s", line)
	}
}

// versionLess compares dotted release versions numerically.
func versionLess(a, b string) bool {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := range max(len(as), len(bs)) {
		var x, y int
		if i < len(as) {
			fmt.Sscan(as[i], &x)
		}
		if i < len(bs) {
			fmt.Sscan(bs[i], &y)
		}
		if x != y {
			return x < y
		}
	}
	return false
}
