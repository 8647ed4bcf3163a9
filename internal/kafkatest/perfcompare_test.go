package kafkatest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// lhPerfSummary is the part of examples/perf's --json output the
// comparison reads. It is declared here rather than imported so the
// harness reads the tool's output as a user would.
type lhPerfSummary struct {
	Records       int64   `json:"records"`
	RecordsPerSec float64 `json:"records_per_sec"`
	MBPerSec      float64 `json:"mb_per_sec"`
	AvgLatencyMs  float64 `json:"avg_latency_ms"`
	MaxLatencyMs  float64 `json:"max_latency_ms"`
	P50Ms         float64 `json:"p50_ms"`
	P99Ms         float64 `json:"p99_ms"`
	FailedRecords int64   `json:"failed_records"`
	LearnedWindow int     `json:"learned_window"`
}

func (s lhPerfSummary) String() string {
	return fmt.Sprintf("%d records: %.0f rec/s, %.2f MB/s, avg %.1f ms, p50 %.0f ms, p99 %.0f ms, max %.0f ms, failed %d, window %d",
		s.Records, s.RecordsPerSec, s.MBPerSec, s.AvgLatencyMs, s.P50Ms, s.P99Ms, s.MaxLatencyMs, s.FailedRecords, s.LearnedWindow)
}

// buildPerf builds examples/perf (without -race: it is measured, not
// checked) into a temporary directory and returns the binary's path.
func buildPerf(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "perf")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/longhaul-kafka/longhaul/examples/perf")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build examples/perf: %v\n%s", err, out)
	}
	return bin
}

// perfArgs are the arguments both tools get for one workload: the Java
// tool's flags, idempotent with acks=all and otherwise default settings.
func perfArgs(topic, bootstrap string, n, size int) []string {
	return []string{
		"--topic", topic,
		"--num-records", strconv.Itoa(n),
		"--record-size", strconv.Itoa(size),
		"--throughput", "-1",
		"--producer-props", "bootstrap.servers=" + bootstrap, "acks=all", "enable.idempotence=true",
	}
}

// runLonghaulPerf runs examples/perf with args plus --json and returns its
// summary.
func runLonghaulPerf(ctx context.Context, bin string, args ...string) (lhPerfSummary, error) {
	cmd := exec.CommandContext(ctx, bin, append(append([]string{}, args...), "--json")...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return lhPerfSummary{}, fmt.Errorf("examples/perf: %w\nstdout: %s\nstderr: %s", err, out.String(), tail(errb.String(), 20))
	}
	var s lhPerfSummary
	if err := json.Unmarshal(out.Bytes(), &s); err != nil {
		return lhPerfSummary{}, fmt.Errorf("examples/perf --json output: %w\n%s", err, out.String())
	}
	return s, nil
}

// runJavaPerf runs ProducerPerformance with args and returns its summary.
func runJavaPerf(ctx context.Context, c *Cluster, args ...string) (PerfSummary, error) {
	out, err := c.RunJavaPerf(ctx, args...)
	if err != nil {
		return PerfSummary{}, fmt.Errorf("%w\nstdout: %s", err, out)
	}
	return ParsePerfSummary(out)
}

// testPerfSideBySideSmoke runs both perf tools once on a small workload
// straight to the broker and checks that each produced a plausible summary
// and that the log holds both runs' records. It is the CI guard that the
// LONGHAUL_LONG comparison (TestPerfSideBySide) can run at all.
func testPerfSideBySideSmoke(t *testing.T, c *Cluster) {
	const n, size = 20000, 100
	bin := buildPerf(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c.CreateTopic(t, "smoke-java", 1, 1, nil)
	c.CreateTopic(t, "smoke-longhaul", 1, 1, nil)
	js, err := runJavaPerf(ctx, c, perfArgs("smoke-java", c.Bootstrap(), n, size)...)
	if err != nil {
		t.Fatal(err)
	}
	ls, err := runLonghaulPerf(ctx, bin, perfArgs("smoke-longhaul", c.Bootstrap(), n, size)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Java:     %v", js)
	t.Logf("longhaul: %v", ls)
	if js.Records != n || js.RecordsPerSec <= 0 {
		t.Errorf("Java summary implausible: %+v", js)
	}
	if ls.Records != n || ls.RecordsPerSec <= 0 || ls.FailedRecords != 0 || ls.LearnedWindow != 5 {
		t.Errorf("longhaul summary implausible (want %d records, none failed, window 5 on Kafka %s): %+v", n, Version, ls)
	}
	for _, topic := range []string{"smoke-java", "smoke-longhaul"} {
		if got := c.EndOffsets(t, topic, 1)[0]; got != n {
			t.Errorf("%s holds %d records, want %d", topic, got, n)
		}
	}
}

// TestPerfSideBySide (LONGHAUL_LONG=1) is the benchmark of issue 8:
// examples/perf (longhaul) and the Java client's ProducerPerformance, both
// idempotent with acks=all and default batching (batch.size 16384,
// linger.ms 5, 5 requests in flight per connection), on the same broker and
// the same workloads: through the proxy with no delay and with 50 ms RTT.
// Runs alternate between the tools; each workload has its own fresh
// 1-partition topic per run. It logs each run and the longhaul/Java
// throughput ratios; it asserts only that every run completed.
//
//	LONGHAUL_LONG=1 go test -run TestPerfSideBySide -v -timeout 30m ./internal/kafkatest
//
// LONGHAUL_PERF_REPS (default 2) sets the runs per tool and workload.
func TestPerfSideBySide(t *testing.T) {
	if os.Getenv("LONGHAUL_LONG") != "1" {
		t.Skip("set LONGHAUL_LONG=1 to run the perf comparison")
	}
	reps := 2
	if s := os.Getenv("LONGHAUL_PERF_REPS"); s != "" {
		var err error
		if reps, err = strconv.Atoi(s); err != nil || reps < 1 {
			t.Fatalf("LONGHAUL_PERF_REPS=%q", s)
		}
	}
	bin := buildPerf(t)
	c := Start(t, Options{HeapMB: 1024})
	type workload struct {
		name   string
		oneWay time.Duration
		n      int
		size   int
	}
	workloads := []workload{
		{"proxy-0ms", 0, 500_000, 512},
		{"proxy-50ms-rtt", 25 * time.Millisecond, 100_000, 512},
	}
	var table []string
	for _, w := range workloads {
		c.SetDelay(w.oneWay)
		var jbest PerfSummary
		var lbest lhPerfSummary
		for r := range reps {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			jt := fmt.Sprintf("cmp-%s-java-%d", w.name, r)
			lt := fmt.Sprintf("cmp-%s-longhaul-%d", w.name, r)
			c.CreateTopic(t, jt, 1, 1, nil)
			c.CreateTopic(t, lt, 1, 1, nil)
			js, err := runJavaPerf(ctx, c, perfArgs(jt, c.ProxiedBootstrap(), w.n, w.size)...)
			if err != nil {
				cancel()
				t.Fatalf("%s Java: %v", w.name, err)
			}
			ls, err := runLonghaulPerf(ctx, bin, perfArgs(lt, c.ProxiedBootstrap(), w.n, w.size)...)
			cancel()
			if err != nil {
				t.Fatalf("%s longhaul: %v", w.name, err)
			}
			t.Logf("%s run %d Java:     %v", w.name, r, js)
			t.Logf("%s run %d longhaul: %v", w.name, r, ls)
			if ls.FailedRecords != 0 || ls.Records != int64(w.n) || js.Records != int64(w.n) {
				t.Errorf("%s run %d: incomplete: Java %d records, longhaul %d (%d failed)", w.name, r, js.Records, ls.Records, ls.FailedRecords)
			}
			if js.MBPerSec > jbest.MBPerSec {
				jbest = js
			}
			if ls.MBPerSec > lbest.MBPerSec {
				lbest = ls
			}
		}
		table = append(table, fmt.Sprintf("| %s | %d x %d B | %.2f MB/s (p99 %v) | %.2f MB/s (p99 %.0f ms) | %s |",
			w.name, w.n, w.size, jbest.MBPerSec, jbest.P99, lbest.MBPerSec, lbest.P99Ms, ratio(lbest.MBPerSec, jbest.MBPerSec)))
	}
	c.SetDelay(0)
	t.Logf("best of %d runs, 1 partition, idempotent acks=all, default batching, Kafka %s single node through the proxy:\n| workload | records | Java ProducerPerformance | longhaul examples/perf | longhaul/Java |\n|---|---|---|---|---|\n%s",
		reps, Version, strings.Join(table, "\n"))
}
