package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestKafkaFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--clients", "java"},                           // java needs a Kafka target
		{"--target", "confluent"},                       // unknown target
		{"--repeat", "0"},                               // at least one round
		{"--target", "kafka", "--bandwidth", "1000000"}, // the harness proxy has no cap
	} {
		var out, errw bytes.Buffer
		assert.Equal(t, 2, run(context.Background(), args, &out, &errw), "run %q, stderr %q", args, errw.String())
	}
	o, err := parseFlags([]string{"--target", "kafka-stock"}, &bytes.Buffer{})
	require.NoError(t, err)
	var names []string
	for _, k := range o.clients {
		names = append(names, k.name)
	}
	assert.Equal(t, []string{"lh-w5", "lh-w20", "lh-w50", "lh-cap5", "kgo", "java"}, names, "java joins the default clients on Kafka")
	o, err = parseFlags([]string{"--target", "kafka", "--clients", "kgo"}, &bytes.Buffer{})
	require.NoError(t, err)
	require.Len(t, o.clients, 1, "an explicit --clients is kept as given")
	o, err = parseFlags(nil, &bytes.Buffer{})
	require.NoError(t, err)
	for _, k := range o.clients {
		assert.False(t, k.java, "the embedded target's default has no java")
	}
}

// TestCaseAddr checks --direct: only RTT 0 cases bypass the proxy; a
// delayed case needs it for its round trip.
func TestCaseAddr(t *testing.T) {
	assert.Equal(t, "proxy:1", caseAddr(false, 0, "proxy:1", "direct:2"))
	assert.Equal(t, "direct:2", caseAddr(true, 0, "proxy:1", "direct:2"))
	assert.Equal(t, "proxy:1", caseAddr(true, 50*time.Millisecond, "proxy:1", "direct:2"))
}

func TestHarnessTB(t *testing.T) {
	var log bytes.Buffer
	tb := newHarnessTB(&log)
	var order []int
	dir := tb.TempDir()
	err := tb.do(func() {
		tb.Cleanup(func() { order = append(order, 1) })
		tb.Cleanup(func() { order = append(order, 2) })
		tb.Logf("hello %d", 7)
		tb.Fatalf("broke at %d", 3)
		order = append(order, 99) // never reached: Fatalf unwinds
	})
	require.EqualError(t, err, "broke at 3")
	assert.True(t, tb.Failed())
	assert.Contains(t, log.String(), "hello 7\n")

	err = tb.do(func() { tb.Skipf("no %s", "java") })
	require.EqualError(t, err, "skipped: no java")
	assert.True(t, tb.Skipped())
	require.NoError(t, tb.do(func() {}))

	_, statErr := os.Stat(dir)
	require.NoError(t, statErr)
	tb.cleanup()
	assert.Equal(t, []int{2, 1}, order, "cleanups run last first, and only in cleanup")
	_, statErr = os.Stat(dir)
	assert.True(t, os.IsNotExist(statErr), "TempDir removed by cleanup")

	assert.Panics(t, func() { _ = tb.do(func() { panic("not a tb stop") }) }, "other panics propagate")
}

func TestPrintRatios(t *testing.T) {
	byName := map[string]clientKind{}
	for _, k := range allClients {
		byName[k.name] = k
	}
	mk := func(client string, round int, recs float64) result {
		return result{rtt: 50 * time.Millisecond, partitions: 1, batch: 16384, client: byName[client], round: round,
			recsPerSec: recs, mbps: recs * 1024 / 1e6, boundMBps: 1, cpuPerGB: 2, brokerPerG: -1}
	}
	// Round 2 is twice as fast for everyone: per-round ratios stay put,
	// ratios of means across rounds would not.
	rs := []result{
		mk("lh-w50", 1, 1000), mk("kgo", 1, 100), mk("java", 1, 50),
		mk("lh-w50", 2, 3000), mk("kgo", 2, 200), mk("java", 2, 100),
	}
	o := options{repeat: 2, clients: []clientKind{byName["lh-w50"], byName["kgo"], byName["java"]}}
	var out bytes.Buffer
	printRatios(&out, o, rs)
	var w50 string
	for _, line := range strings.Split(out.String(), "\n") {
		if strings.Contains(line, "| lh-w50 |") {
			w50 = line
		}
	}
	require.NotEmpty(t, w50, out.String())
	f := strings.Split(w50, "|")
	assert.Equal(t, "12.50 (10.00-15.00)", strings.TrimSpace(f[6]), "x kgo: 10 and 15 in rounds 1 and 2")
	assert.Equal(t, "25.00 (20.00-30.00)", strings.TrimSpace(f[7]), "x java: 20 and 30")
	assert.Equal(t, "2.00 (2.00-2.00)", strings.TrimSpace(f[9]))
	assert.Equal(t, "-", strings.TrimSpace(f[10]), "no broker CPU known")
}

// TestPacer checks that open-loop records carry their intended send time:
// evenly spaced from the start, even when the loop runs behind schedule
// (here an hour), so latency counts the delay instead of hiding it.
func TestPacer(t *testing.T) {
	start := clk.now() - int64(time.Hour)
	p := &pacer{start: start, interval: int64(time.Millisecond)}
	for i := range 5 {
		assert.Equal(t, start+int64(i)*int64(time.Millisecond), stamp(p))
	}
	assert.InDelta(t, float64(time.Since(epoch)), float64(stamp(nil)), float64(time.Second), "closed loop stamps now")
	q := newPacer(1000)
	assert.Equal(t, int64(time.Millisecond), q.interval)
	q.i = 20 // ahead of schedule: next waits until its intended time
	want := q.next()
	assert.Equal(t, q.start+20*int64(time.Millisecond), want)
	assert.GreaterOrEqual(t, clk.now(), want-int64(time.Millisecond), "returned more than 1 ms before the intended time")
}
