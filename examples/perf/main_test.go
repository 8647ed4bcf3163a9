package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/longhaul-kafka/longhaul/internal/broker"
	"github.com/longhaul-kafka/longhaul/internal/cli"
	"github.com/longhaul-kafka/longhaul/internal/cli/clitest"
	"github.com/longhaul-kafka/longhaul/internal/perfstat"
	"github.com/longhaul-kafka/longhaul/internal/testkit"
)

func TestBadFlagsExit2(t *testing.T) {
	clitest.BadFlagsExit2(t, run, [][]string{
		{"--num-records", "0"},
		{"--record-size", "-1"},
		{"--throughput", "0"},
		{"--throughput", "fast"},
		{"--producer-props"},
		{"--producer-props", "linger.ms"},
		{"--producer-props", "acks=1"},                               // idempotence needs all
		{"--producer-props", "no.such.property=1"},                   // unknown
		{"--producer-props", "linger.ms=5", "batch.size=-3"},         // second value checked too
		{"--producer.config", filepath.Join(t.TempDir(), "missing")}, // no file
		{"--window", "3"},
		{"--reporting-interval", "0"},
		{"--no-such-flag"},
		{"extra"},
	})
}

func TestHelpDocumentsEveryFlag(t *testing.T) {
	clitest.HelpDocuments(t, run, []string{"-topic", "-num-records", "-record-size", "-throughput", "-producer-props",
		"-producer.config", "-bootstrap-server", "-json", "-reporting-interval", "-rtt", "-window", "-partitions"})
}

func TestExpandProducerProps(t *testing.T) {
	for _, tc := range []struct{ in, want []string }{
		{[]string{"--producer-props", "a=1", "b=2", "--topic", "t"},
			[]string{"--producer-props", "a=1", "--producer-props", "b=2", "--topic", "t"}},
		{[]string{"-producer-props", "acks=-1"}, []string{"-producer-props", "acks=-1"}},
		{[]string{"--producer-props", "a=1", "extra"}, []string{"--producer-props", "a=1", "extra"}},
		{[]string{"--producer-props", "--json"}, []string{"--producer-props", "--json"}},
		{[]string{"--producer-props=a=1", "b=2"}, []string{"--producer-props=a=1", "b=2"}},
		{[]string{"--", "--producer-props", "a=1"}, []string{"--", "--producer-props", "a=1"}},
	} {
		if got := expandProducerProps(tc.in); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("expand(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestParseProperties(t *testing.T) {
	in := "# comment\n" +
		"! also a comment\n" +
		"\n" +
		"bootstrap.servers=a:9092,b:9092\n" +
		"  linger.ms : 10\n" +
		"client.id perf\n" +
		"sasl.jaas.config=org.Foo required \\\n" +
		"    username=\"u\" \\\n" +
		"    password=\"p\";\n" +
		"key\\=with\\:seps=v\\u0041\\t\n" +
		"empty=\n" +
		"emoji=\\ud83d\\ude00\n" +
		"linger.ms=20\n"
	got, err := parseProperties(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"bootstrap.servers": "a:9092,b:9092",
		"linger.ms":         "20",
		"client.id":         "perf",
		"sasl.jaas.config":  `org.Foo required username="u" password="p";`,
		"key=with:seps":     "vA\t",
		"empty":             "",
		"emoji":             "\U0001F600",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %q\nwant %q", got, want)
	}
	if _, err := parseProperties(strings.NewReader("a=1\nb=\\u12\n")); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("malformed \\u: err %v, want one naming line 2", err)
	}
}

// lastLine returns the last non-empty line of s.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

func TestSummaryLineAgainstEmbeddedBroker(t *testing.T) {
	var out, errb bytes.Buffer
	args := []string{"--num-records", "5000", "--record-size", "100", "--throughput", "20000", "--reporting-interval", "20"}
	if code := run(context.Background(), args, &out, &errb); code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errb.String())
	}
	s, err := perfstat.ParseSummary(lastLine(out.String()))
	if err != nil {
		t.Fatalf("%v\nstdout:\n%s", err, out.String())
	}
	if s.Records != 5000 || s.RecordsPerSec <= 0 || s.RecordsPerSec > 20000*1.1 || s.MBPerSec <= 0 {
		t.Errorf("summary %+v: want 5000 records at no more than ~20000/s", s)
	}
	if s.P50Ms > s.P95Ms || s.P95Ms > s.P99Ms || s.P99Ms > s.P999Ms || s.P999Ms > s.MaxLatencyMs {
		t.Errorf("percentiles out of order: %+v", s)
	}
	if !strings.Contains(out.String(), " records/sec (") || strings.Count(out.String(), "\n") < 2 {
		t.Errorf("no progress line before the summary:\n%s", out.String())
	}
}

func TestJSONSummary(t *testing.T) {
	var out, errb bytes.Buffer
	args := []string{"--num-records", "3000", "--json", "--window", "20", "--producer-props", "max.in.flight.requests.per.connection=50", "batch.size=1024"}
	if code := run(context.Background(), args, &out, &errb); code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errb.String())
	}
	var js jsonSummary
	dec := json.NewDecoder(&out)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&js); err != nil {
		t.Fatalf("stdout is not one JSON summary: %v", err)
	}
	if js.Records != 3000 || js.Bytes != 300000 || js.Topic != "longhaul-perf" || js.LearnedWindow != 20 || !js.Embedded || js.FailedRecords != 0 {
		t.Errorf("json summary %+v", js)
	}
}

// A properties file and --producer-props combine as in the Java tool (the
// flag wins), and bootstrap.servers from the file selects an external
// cluster, where the missing topic is created.
func TestProducerConfigFileAndExternalCluster(t *testing.T) {
	c := testkit.StartCluster(t, broker.Config{})
	file := filepath.Join(t.TempDir(), "producer.properties")
	body := "bootstrap.servers=" + c.Addr() + "\nbatch.size=not-a-number\nkey.serializer=org.apache.kafka.common.serialization.ByteArraySerializer\n"
	if err := os.WriteFile(file, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	args := []string{"--topic", "ext", "--num-records", "700", "--producer.config", file, "--producer-props", "batch.size=2048"}
	if code := run(context.Background(), args, &out, &errb); code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errb.String())
	}
	if n := len(c.Records("ext", 0)); n != 700 {
		t.Errorf("%d records in the log, want 700", n)
	}
	if !strings.Contains(errb.String(), "created topic ext") {
		t.Errorf("no note of the created topic:\n%s", errb.String())
	}
	// Without the override the file's bad batch.size is reported.
	errb.Reset()
	args = []string{"--topic", "ext", "--num-records", "1", "--producer.config", file}
	if code := run(context.Background(), args, &out, &errb); code != cli.ExitUsage || !strings.Contains(errb.String(), "batch.size") {
		t.Errorf("bad batch.size in file: exit %d, stderr %q", code, errb.String())
	}
}

func TestInterruptPrintsSummaryAndUndelivered(t *testing.T) {
	defer func(g time.Duration) { interruptGrace = g }(interruptGrace)
	interruptGrace = time.Second
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := clitest.NewCancelOnWrite("records sent", cancel)
	var errb bytes.Buffer
	args := []string{"--num-records", "1000000", "--throughput", "2000", "--reporting-interval", "20"}
	if code := run(ctx, args, out, &errb); code != cli.ExitInterrupted {
		t.Fatalf("exit %d, want %d\nstderr:\n%s", code, cli.ExitInterrupted, errb.String())
	}
	s, err := perfstat.ParseSummary(lastLine(out.String()))
	if err != nil || s.Records < 1 || s.Records >= 1000000 {
		t.Errorf("summary %+v, %v\n%s", s, err, out.String())
	}
	if !strings.Contains(errb.String(), "interrupted: ") || !strings.Contains(errb.String(), "never sent") {
		t.Errorf("no report of what was not delivered:\n%s", errb.String())
	}
}
