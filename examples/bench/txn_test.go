package main

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTxnQuick runs transactional longhaul (also against the broker in its
// Kafka 4.0 mode) and kgo on the in-process embedded broker, with the
// phase trace: every row has committed records, at least two commits in
// the window, a commit latency, and no error; the phase table has a row
// per longhaul case.
func TestTxnQuick(t *testing.T) {
	var out, errw bytes.Buffer
	args := []string{"-txn", "100ms", "-clients", "lh-w50,lh-w5-k40,kgo", "-txn-phases", "-rtt", "10ms", "-partitions", "2",
		"-batch", "16384", "-duration", "600ms", "-warmup", "300ms", "-broker", "inproc"}
	code := run(context.Background(), args, &out, &errw)
	require.Zero(t, code, "stdout:\n%s\nstderr:\n%s", out.String(), errw.String())
	rows := 0
	for _, line := range strings.Split(out.String(), "\n") {
		f := strings.Split(line, "|")
		if len(f) != 15 || !strings.Contains(f[5], "#") {
			continue
		}
		rows++
		recs, err := strconv.ParseFloat(strings.TrimSpace(f[6]), 64)
		assert.NoError(t, err, line)
		assert.Positive(t, recs, "records/s: %s", line)
		commits, err := strconv.Atoi(strings.TrimSpace(f[9]))
		assert.NoError(t, err, line)
		assert.GreaterOrEqual(t, commits, 1, "commits: %s", line)
		assert.NotEqual(t, "-", strings.TrimSpace(f[10]), "commit p50: %s", line)
		assert.Empty(t, strings.TrimSpace(f[13]), "error: %s", line)
	}
	assert.Equal(t, 3, rows, "rows:\n%s", out.String())
	assert.Contains(t, out.String(), "Transactional ratios")
	_, phases, ok := strings.Cut(out.String(), "Where a transaction's time goes")
	require.True(t, ok, "no phase table:\n%s", out.String())
	for _, c := range []string{"| lh-w50 #1 |", "| lh-w5-k40 #1 |"} {
		assert.Contains(t, phases, c)
	}
	assert.NotContains(t, phases, "| kgo #1 |", "kgo has no phase trace")
}

func TestTxnBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-txn", "0s"},
		{"-txn", "x"},
		{"-txn", "1s", "-clients", "lh-cap5"},
		{"-txn", "1s", "-clients", "lh-w50x2"},
		{"-txn", "1s", "-rate", "100"},
		{"-txn", "1s", "-shape"},
		{"-txn", "1s", "-clients", "lh-w5-k40"},                                    // the child broker has no Kafka 4.0 mode
		{"-txn", "1s", "-clients", "lh-w5-k40", "-target", "kafka"},                // nor has Kafka
		{"-clients", "lh-w5-k40", "-broker", "inproc"},                             // only with -txn
		{"-txn", "1s", "-clients", "lh-w5-k40", "-broker", "inproc", "-rate", "1"}, // nor with -rate
	} {
		var errw bytes.Buffer
		assert.Equal(t, 2, run(context.Background(), args, &bytes.Buffer{}, &errw), "%v: %s", args, errw.String())
	}
}

// TestCommitLogWindow: the rate counts whole transactions between the
// first and the last commit inside the window; commits outside it, and
// the first one's records, are not counted.
func TestCommitLogWindow(t *testing.T) {
	t0 := time.Unix(1000, 0)
	l := &commitLog{}
	for i, c := range []struct {
		at      time.Duration
		records int64
	}{{0, 100}, {time.Second, 100}, {2 * time.Second, 300}, {3 * time.Second, 100}, {4 * time.Second, 100}} {
		l.n += c.records
		l.at = append(l.at, t0.Add(c.at))
		l.total = append(l.total, l.n)
		l.latency = append(l.latency, time.Duration(i+1)*time.Millisecond)
		l.produce = append(l.produce, 3*time.Millisecond)
	}
	rate, commits, lat, producing := l.window(t0.Add(500*time.Millisecond), t0.Add(3500*time.Millisecond))
	assert.InDelta(t, 200.0, rate, 1e-9, "(300+100) records over the 2 s from the commit at 1 s to the one at 3 s")
	assert.Equal(t, 2, commits)
	assert.Equal(t, []time.Duration{3 * time.Millisecond, 4 * time.Millisecond}, lat)
	assert.InDelta(t, 6.0/13.0, producing, 1e-9)
	_, commits, _, _ = l.window(t0.Add(500*time.Millisecond), t0.Add(1500*time.Millisecond))
	assert.Zero(t, commits, "one commit in the window bounds no transaction")
	assert.Equal(t, time.Duration(4), percentile([]time.Duration{4, 1, 3, 2}, 0.99))
	assert.Equal(t, time.Duration(2), percentile([]time.Duration{4, 1, 3, 2}, 0.5))
	assert.Zero(t, percentile(nil, 0.5))
}

// TestTxnPhasesSummary: the phases of a transaction are cut at its marks
// and the batches in flight are integrated over each: two batches in
// flight over the 50 ms ramp of a window of 4 is 50 % use, none during
// EndTxn is 0 %; a transaction that began before the window is left out.
func TestTxnPhasesSummary(t *testing.T) {
	t0 := time.Unix(1000, 0)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	p := &txnPhases{
		steps: []inflightAt{{ms(0), 2}, {ms(50), 4}, {ms(150), 1}, {ms(200), 0}},
		all: []*txnTrace{
			{begin: ms(-400), firstAck: ms(-350), prodEnd: ms(-300), lastSent: ms(-300), lastAck: ms(-250), bump: ms(-200), commitRet: ms(-200), next: ms(0)},
			{begin: ms(0), firstAck: ms(50), prodEnd: ms(150), lastSent: ms(150), lastAck: ms(200), bump: ms(250), commitRet: ms(251), next: ms(251), rejected: 2},
		},
	}
	s := p.summary(ms(-1), ms(300), 4)
	require.Equal(t, 1, s.n)
	assert.Equal(t, []time.Duration{50 * time.Millisecond, 100 * time.Millisecond, 0, 50 * time.Millisecond, 50 * time.Millisecond, time.Millisecond, 0}, s.dur[:])
	assert.InDelta(t, 0.5, s.use[0], 1e-9, "ramp")
	assert.InDelta(t, 1.0, s.use[1], 1e-9, "produce")
	assert.Equal(t, -1.0, s.use[2], "an empty flush")
	assert.InDelta(t, 0.25, s.use[3], 1e-9, "tail")
	assert.Zero(t, s.use[4], "EndTxn")
	assert.Equal(t, 251*time.Millisecond, s.total)
	assert.Equal(t, 2.0, s.rejected)
}
