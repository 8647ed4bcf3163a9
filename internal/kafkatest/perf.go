package kafkatest

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"math"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"time"
)

// perfMainClass is the Java producer's perf tool in kafka-tools, what
// bin/kafka-producer-perf-test.sh runs.
const perfMainClass = "org.apache.kafka.tools.ProducerPerformance"

// javaPerfArgs is the java command line of perfMainClass with args: a
// 1 GiB G1 heap, an English locale (the tool's number format is parsed),
// and the cluster's tool log configuration and classpath.
func (c *Cluster) javaPerfArgs(args []string) []string {
	return append([]string{
		"-Xms1g", "-Xmx1g", "-XX:+UseG1GC",
		"-Duser.language=en", "-Duser.country=US",
		"-Dlog4j2.configurationFile=" + c.toolLog,
		"-cp", c.classpath,
		perfMainClass,
	}, args...)
}

// JavaPerf describes one run of the Java producer perf tool. The zero
// values of optional fields give an idempotent, acks=all producer at
// unthrottled throughput.
type JavaPerf struct {
	Topic      string // required
	NumRecords int64  // required, > 0
	RecordSize int    // bytes per record value; required, > 0
	// Throughput caps records/s; 0 means unthrottled (-1 to the tool).
	Throughput int64
	// WarmupRecords, if > 0, are the first records left out of a second,
	// " steady state" summary line (KIP-1052; Kafka 3.9 and later).
	WarmupRecords int64
	// Bootstrap is bootstrap.servers; "" means the cluster's direct
	// listeners. Use [Cluster.ProxiedBootstrap] to go through the proxies.
	Bootstrap string
	// Props are extra producer properties, overriding the defaults
	// acks=all and enable.idempotence=true (for example linger.ms,
	// batch.size, max.in.flight.requests.per.connection).
	Props map[string]string
}

// Args returns the ProducerPerformance arguments for p on cluster c.
func (p JavaPerf) Args(c *Cluster) []string {
	bootstrap := p.Bootstrap
	if bootstrap == "" {
		bootstrap = c.Bootstrap()
	}
	tput := p.Throughput
	if tput == 0 {
		tput = -1
	}
	props := map[string]string{
		"bootstrap.servers":  bootstrap,
		"acks":               "all",
		"enable.idempotence": "true",
	}
	for k, v := range p.Props {
		props[k] = v
	}
	args := []string{
		"--topic", p.Topic,
		"--num-records", strconv.FormatInt(p.NumRecords, 10),
		"--record-size", strconv.Itoa(p.RecordSize),
		"--throughput", strconv.FormatInt(tput, 10),
	}
	if p.WarmupRecords > 0 {
		args = append(args, "--warmup-records", strconv.FormatInt(p.WarmupRecords, 10))
	}
	args = append(args, "--producer-props")
	for _, k := range slices.Sorted(maps.Keys(props)) {
		args = append(args, k+"="+props[k])
	}
	return args
}

// RunJavaPerf runs ProducerPerformance with args (see [JavaPerf.Args]) in
// a JVM on the cluster's classpath (1 GiB heap, English number format so
// the output parses) and returns its stdout. On a non-zero exit the error
// includes the tail of stderr; stdout is returned either way. ctx kills
// the JVM. Safe for concurrent use.
func (c *Cluster) RunJavaPerf(ctx context.Context, args ...string) (stdout string, err error) {
	cmd := exec.CommandContext(ctx, "java", c.javaPerfArgs(args)...)
	setDeathSignal(cmd)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("kafkatest: %s: %w\n%s", perfMainClass, err, tail(errb.String(), 20))
	}
	return out.String(), nil
}

// PerfSummary is ProducerPerformance's final line, for example
// "100000 records sent, 51813.471503 records/sec (49.41 MB/sec), 364.35 ms
// avg latency, 655.00 ms max latency, 371 ms 50th, 598 ms 95th, 638 ms
// 99th, 652 ms 99.9th."
type PerfSummary struct {
	Records       int64
	Qualifier     string // "" for the whole run; e.g. " steady state" for KIP-1052 warm-up splits
	RecordsPerSec float64
	MBPerSec      float64 // MiB/s as the tool computes it (bytes / 1024 / 1024)
	AvgLatency    time.Duration
	MaxLatency    time.Duration
	P50, P95      time.Duration
	P99, P999     time.Duration
}

var perfSummaryRE = regexp.MustCompile(`(?m)^(\d+)([^\n]*?) records sent, ([0-9.]+) records/sec \(([0-9.]+) MB/sec\), ([0-9.]+) ms avg latency, ([0-9.]+) ms max latency, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th, (\d+) ms 99\.9th\.`)

// ParsePerfSummary returns the whole-run summary line from
// ProducerPerformance output (the last summary without a qualifier, else
// the last one), ignoring the periodic progress lines, or [ErrNoSummary].
func ParsePerfSummary(out string) (PerfSummary, error) {
	ms := perfSummaryRE.FindAllStringSubmatch(out, -1)
	if len(ms) == 0 {
		return PerfSummary{}, ErrNoSummary
	}
	m := ms[len(ms)-1]
	for _, cand := range slices.Backward(ms) {
		if cand[2] == "" {
			m = cand
			break
		}
	}
	return parsePerfMatch(m)
}

// ParsePerfSteadyState returns the " steady state" summary line that a run
// with [JavaPerf.WarmupRecords] prints after the whole-run one: the
// records after the warm-up only. [ErrNoSummary] if there is none.
func ParsePerfSteadyState(out string) (PerfSummary, error) {
	for _, m := range slices.Backward(perfSummaryRE.FindAllStringSubmatch(out, -1)) {
		if m[2] == " steady state" {
			return parsePerfMatch(m)
		}
	}
	return PerfSummary{}, ErrNoSummary
}

func parsePerfMatch(m []string) (PerfSummary, error) {
	var s PerfSummary
	var err error
	s.Records, err = strconv.ParseInt(m[1], 10, 64)
	if err != nil {
		return PerfSummary{}, fmt.Errorf("kafkatest: perf summary records: %w", err)
	}
	s.Qualifier = m[2]
	floats := []*float64{&s.RecordsPerSec, &s.MBPerSec}
	for i, f := range floats {
		if *f, err = strconv.ParseFloat(m[3+i], 64); err != nil {
			return PerfSummary{}, fmt.Errorf("kafkatest: perf summary: %w", err)
		}
	}
	durs := []*time.Duration{&s.AvgLatency, &s.MaxLatency, &s.P50, &s.P95, &s.P99, &s.P999}
	for i, d := range durs {
		v, err := strconv.ParseFloat(m[5+i], 64)
		if err != nil {
			return PerfSummary{}, fmt.Errorf("kafkatest: perf summary: %w", err)
		}
		if v*float64(time.Millisecond) >= math.MaxInt64 {
			return PerfSummary{}, fmt.Errorf("kafkatest: perf summary latency %q ms out of range", m[5+i])
		}
		*d = time.Duration(v * float64(time.Millisecond))
	}
	return s, nil
}

// String formats s like one line of a benchmark table.
func (s PerfSummary) String() string {
	return fmt.Sprintf("%d records%s: %.0f rec/s, %.2f MB/s, avg %v, max %v, p50 %v, p95 %v, p99 %v, p99.9 %v",
		s.Records, s.Qualifier, s.RecordsPerSec, s.MBPerSec, s.AvgLatency, s.MaxLatency, s.P50, s.P95, s.P99, s.P999)
}
