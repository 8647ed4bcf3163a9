package main

import (
	"bytes"
	"context"
	"io"
	"math"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestQuick runs the few-second smoke matrix, so the program cannot rot:
// every case must deliver records without a single failure.
func TestQuick(t *testing.T) {
	var out, errw bytes.Buffer
	if code := run(context.Background(), []string{"--quick"}, &out, &errw); code != 0 {
		t.Fatalf("run --quick = %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errw.String())
	}
	rows := 0
	for _, line := range strings.Split(out.String(), "\n") {
		f := strings.Split(line, "|")
		if len(f) < 15 || strings.TrimSpace(f[1]) == "RTT" || strings.HasPrefix(strings.TrimSpace(f[1]), "-") {
			continue
		}
		rows++
		recs, err := strconv.ParseFloat(strings.TrimSpace(f[6]), 64)
		if err != nil || recs <= 0 {
			t.Errorf("row %q: records/s %q, want > 0", line, f[6])
		}
		if e := strings.TrimSpace(f[14]); e != "0" {
			t.Errorf("row %q: errors %q, want 0", line, e)
		}
	}
	if rows != 6 { // RTT 0 and 10ms x lh-w20, lh-cap5, kgo
		t.Errorf("got %d result rows, want 6:\n%s", rows, out.String())
	}
	if !strings.Contains(out.String(), "Targets:") {
		t.Errorf("no targets section:\n%s", out.String())
	}
}

func TestBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--rtt", "-5ms"},
		{"--partitions", "0"},
		{"--clients", "lh-w7"},
		{"--duration", "0s"},
		{"extra"},
		{"--direct"}, // embedded target: no proxy to bypass
		{"--target", "kafka", "--proxy-timer", "fast"},
		{"--proxy-timer", "timer"}, // embedded target: no harness proxy
		{"--clients", "lh-w50x2", "--topics", "2"},
		{"--clients", "lh-w50x2", "--keyed"},
	} {
		var out, errw bytes.Buffer
		if code := run(context.Background(), args, &out, &errw); code != 2 {
			t.Errorf("run %q = %d, want 2 (stderr %q)", args, code, errw.String())
		}
	}
}

func TestBound(t *testing.T) {
	tests := []struct {
		name      string
		bandwidth int64
		window    int
		batch     int
		rtt       time.Duration
		parts     int
		want      float64
	}{
		{"issue target: 50ms, W=20, 16K", 0, 20, 16384, 50 * time.Millisecond, 1, 20 * 16384 / 0.05},
		{"partitions multiply", 0, 5, 16384, 50 * time.Millisecond, 16, 16 * 5 * 16384 / 0.05},
		{"link caps it", 1e6, 20, 16384, 50 * time.Millisecond, 1, 1e6},
		{"RTT 0 is unbounded", 0, 5, 16384, 0, 1, math.Inf(1)},
		{"RTT 0 with a link", 5e6, 5, 16384, 0, 1, 5e6},
	}
	for _, tt := range tests {
		if got := boundBytesPerSec(tt.bandwidth, tt.window, tt.batch, tt.rtt, tt.parts); math.Abs(got-tt.want) > 1e-6*tt.want && got != tt.want {
			t.Errorf("%s: bound = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestPerPartitionWindow(t *testing.T) {
	byName := map[string]clientKind{}
	for _, k := range allClients {
		byName[k.name] = k
	}
	tests := []struct {
		client      string
		maxInFlight int
		want        int
	}{
		{"lh-w50", 64, 50},
		{"lh-w50", 8, 8}, // max.in.flight.requests.per.connection limits it
		{"lh-w5", 64, 5},
		{"lh-cap5", 64, 5},
		{"lh-cap5", 3, 3},
		{"kgo", 64, 5}, // kgo's own idempotent limit, whatever longhaul's is
	}
	for _, tt := range tests {
		if got := byName[tt.client].perPartitionWindow(tt.maxInFlight); got != tt.want {
			t.Errorf("%s with max.in.flight %d: window %d, want %d", tt.client, tt.maxInFlight, got, tt.want)
		}
	}
}

// TestHistogramBuckets checks that every value lands in a bucket whose
// upper bound is at most 1/16 above it, and that buckets are ordered.
func TestHistogramBuckets(t *testing.T) {
	prev := -1
	for v := uint64(0); v < 1<<22; v += 1 + v/64 {
		i := bucketOf(v)
		if i < prev {
			t.Fatalf("bucketOf(%d) = %d after %d: not monotonic", v, i, prev)
		}
		prev = i
		up := bucketUpper(i)
		if up < v || float64(up) > float64(v)*(1+1.0/16)+1 {
			t.Fatalf("value %d in bucket %d with upper bound %d", v, i, up)
		}
	}
	if i := bucketOf(math.MaxUint64); i >= nBuckets {
		t.Fatalf("bucketOf(max) = %d, out of %d buckets", i, nBuckets)
	}
}

func TestQuantile(t *testing.T) {
	var h histogram
	start := h.snapshot()
	for i := 1; i <= 1000; i++ {
		h.add(time.Duration(i) * time.Millisecond)
	}
	end := h.snapshot()
	for _, tt := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 500 * time.Millisecond}, {0.99, 990 * time.Millisecond}} {
		got := quantile(start, end, tt.q)
		if got < tt.want || got > tt.want+tt.want/16 {
			t.Errorf("q%v = %v, want %v (+1/16)", tt.q, got, tt.want)
		}
	}
	if got := quantile(end, end, 0.99); got != 0 {
		t.Errorf("empty window: q99 = %v, want 0", got)
	}
}

func TestProcCPU(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	if got := procCPU(os.Getpid()); got < 0 {
		t.Fatalf("procCPU(self) = %v", got)
	}
	if got := procCPU(-1); got != -1 {
		t.Fatalf("procCPU(-1) = %v, want -1", got)
	}
}

func TestRoundOrderRotatesSoEveryClientLeadsOnce(t *testing.T) {
	clients := []string{"a", "b", "c"}
	require.Equal(t, []string{"a", "b", "c"}, roundOrder(clients, 1))
	require.Equal(t, []string{"b", "c", "a"}, roundOrder(clients, 2))
	require.Equal(t, []string{"c", "a", "b"}, roundOrder(clients, 3))
	require.Equal(t, []string{"a", "b", "c"}, roundOrder(clients, 4))
	require.Equal(t, []string{"a", "b", "c"}, clients, "the configured order is not changed")
	require.Empty(t, roundOrder([]string(nil), 2))
}

// TestKeyedHeap: --keyed --heap runs keyed records and prints the memory
// table, one row per client with a positive active heap and its idle CPU.
func TestKeyedHeap(t *testing.T) {
	var out, errw bytes.Buffer
	args := []string{"--quick", "--rtt", "0", "--partitions", "8", "--clients", "lh-w5,kgo", "--keyed", "--heap"}
	if code := run(context.Background(), args, &out, &errw); code != 0 {
		t.Fatalf("run %q = %d\nstdout:\n%s\nstderr:\n%s", args, code, out.String(), errw.String())
	}
	_, mem, ok := strings.Cut(out.String(), "Memory (keyed, ")
	if !ok {
		t.Fatalf("no keyed memory table:\n%s", out.String())
	}
	rows := 0
	for _, line := range strings.Split(mem, "\n") {
		f := strings.Split(line, "|")
		if len(f) < 13 || strings.TrimSpace(f[1]) == "RTT" || strings.HasPrefix(strings.TrimSpace(f[1]), "-") {
			continue
		}
		rows++
		if active, err := strconv.ParseFloat(strings.TrimSpace(f[8]), 64); err != nil || active <= 0 {
			t.Errorf("row %q: heap active %q, want > 0", line, f[8])
		}
		if len(f) < 14 {
			t.Errorf("row %q: no idle CPU column", line)
		} else if idle, err := strconv.ParseFloat(strings.TrimSpace(f[13]), 64); err != nil || idle < 0 {
			t.Errorf("row %q: idle CPU %q, want a number >= 0", line, f[13])
		}
	}
	if rows != 2 {
		t.Errorf("got %d memory rows, want 2:\n%s", rows, mem)
	}
}

// TestKafkaTargetAddsJavaAfterQuick: on a Kafka target java joins the
// default clients, also when --quick picked the defaults.
func TestKafkaTargetAddsJavaAfterQuick(t *testing.T) {
	for _, args := range [][]string{{"--target", "kafka"}, {"--target", "kafka", "--quick"}} {
		o, err := parseFlags(args, io.Discard)
		require.NoError(t, err)
		var names []string
		for _, k := range o.clients {
			names = append(names, k.name)
		}
		assert.Contains(t, names, "java", "%v", args)
	}
	o, err := parseFlags([]string{"--target", "kafka", "--clients", "kgo"}, io.Discard)
	require.NoError(t, err)
	assert.Len(t, o.clients, 1, "an explicit list is kept as given")
}

// TestRequestCapHoldsABatch: the request cap is the buffer up to 6 MiB,
// never below one batch (kgo refuses a write cap below its batch size).
func TestRequestCapHoldsABatch(t *testing.T) {
	assert.Equal(t, 6<<20, clientConfig{batchSize: 16384, bufferBytes: 256 << 20}.requestCap())
	assert.Equal(t, 1<<20, clientConfig{batchSize: 16384, bufferBytes: 1 << 20}.requestCap())
	assert.Equal(t, 512<<10, clientConfig{batchSize: 512 << 10, bufferBytes: 256 << 10}.requestCap())
}

// TestOwnValues: with --own-values each record gets its own value buffer
// of the record size, reused when the record comes back, with the counter
// in its first 8 bytes; without it every record shares one slice. The flag
// parses, and a quick run of both Go clients with it delivers.
func TestOwnValues(t *testing.T) {
	shared := make([]byte, 1024)
	off := clientConfig{recordSize: 1024}
	require.Same(t, &shared[0], &off.valueFor(nil, shared, 7)[0], "without the flag: the shared slice")

	on := clientConfig{recordSize: 1024, ownValues: true}
	v := on.valueFor(nil, shared, 7)
	require.Len(t, v, 1024)
	require.NotSame(t, &shared[0], &v[0], "its own buffer")
	require.Equal(t, []byte{0, 0, 0, 0, 0, 0, 0, 7}, v[:8], "the counter")
	again := on.valueFor(v, shared, 8)
	require.Same(t, &v[0], &again[0], "a recycled record keeps its buffer")
	require.Equal(t, byte(8), again[7])
	require.Len(t, clientConfig{recordSize: 4, ownValues: true}.valueFor(nil, shared, 1), 4, "records under 8 bytes: no counter, no panic")

	o, err := parseFlags([]string{"--own-values"}, io.Discard)
	require.NoError(t, err)
	require.True(t, o.ownValues)

	var out, errw bytes.Buffer
	args := []string{"--quick", "--rtt", "0", "--clients", "lh-w5,kgo", "--own-values"}
	require.Zero(t, run(context.Background(), args, &out, &errw), "stdout:\n%s\nstderr:\n%s", out.String(), errw.String())
	require.Contains(t, out.String(), "| lh-w5 |")
	require.Contains(t, out.String(), "| kgo |")
}

// TestWarmRound checks --warm-round: round 0 of every client runs and
// prints as #0, and the ratio table summarizes rounds 1..repeat only (its
// MB/s range is exactly that of the #1 and #2 rows).
func TestWarmRound(t *testing.T) {
	var out, errw bytes.Buffer
	code := run(context.Background(), []string{"--quick", "--warm-round", "--repeat", "2", "--rtt", "0", "--clients", "lh-w20,kgo"}, &out, &errw)
	require.Equal(t, 0, code, "stderr: %s", errw.String())
	mbps := map[string][]string{} // client -> MB/s of rounds 1 and 2
	warm := 0
	inRatios := false
	var ratioRange string
	for _, line := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(line, "Ratios over") {
			inRatios = true
		}
		f := strings.Split(line, "|")
		if len(f) < 6 {
			continue
		}
		name := strings.TrimSpace(f[4])
		switch {
		case inRatios && name == "lh-w20":
			ratioRange = strings.TrimSpace(f[5])
		case !inRatios && strings.HasSuffix(name, " #0"):
			warm++
		case !inRatios && (strings.HasSuffix(name, " #1") || strings.HasSuffix(name, " #2")):
			client := strings.Fields(name)[0]
			mbps[client] = append(mbps[client], strings.TrimSpace(f[5]))
		}
	}
	assert.Equal(t, 2, warm, "one round-0 row per client:\n%s", out.String())
	require.Len(t, mbps["lh-w20"], 2, out.String())
	lo, hi := mbps["lh-w20"][0], mbps["lh-w20"][1]
	if parseF(t, lo) > parseF(t, hi) {
		lo, hi = hi, lo
	}
	assert.Contains(t, ratioRange, "("+lo+"-"+hi+")", "the ratio table's range is rounds 1 and 2 only:\n%s", out.String())
}

func parseF(t *testing.T, s string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(s, 64)
	require.NoError(t, err)
	return v
}
