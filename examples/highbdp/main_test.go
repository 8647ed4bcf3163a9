package main

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/longhaul-kafka/longhaul/internal/broker"
	"github.com/longhaul-kafka/longhaul/internal/cli"
	"github.com/longhaul-kafka/longhaul/internal/cli/clitest"
	"github.com/longhaul-kafka/longhaul/internal/testkit"
	"github.com/longhaul-kafka/longhaul/producer"
)

func TestBadFlagsExit2(t *testing.T) {
	clitest.BadFlagsExit2(t, run, [][]string{
		{"--windows", "4,50"},
		{"--windows", "5,x"},
		{"--windows", "5,5"},
		{"--records", "0"},
		{"--record-size", "7"},
		{"--partitions", "0"},
		{"--rtt", "-1s"},
		{"--rtt", "slow"},
		{"--max-in-flight", "0"},
		{"--no-such-flag"},
		{"extra"},
	})
}

func TestHelpDocumentsEveryFlag(t *testing.T) {
	clitest.HelpDocuments(t, run, []string{"-bootstrap-server", "-rtt", "-windows", "-partitions", "-records", "-record-size",
		"-batch-size", "-linger", "-max-in-flight", "-topic-prefix", "-progress"})
}

// tableRow returns the cells after label in the table printed to out.
func tableRow(t *testing.T, out, label string) []string {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		if rest, ok := strings.CutPrefix(line, label+"  "); ok {
			return strings.Fields(rest)
		}
	}
	t.Fatalf("no %q row in output:\n%s", label, out)
	return nil
}

func floatCell(t *testing.T, s string) float64 {
	t.Helper()
	f, err := strconv.ParseFloat(strings.TrimSuffix(s, "x"), 64)
	if err != nil {
		t.Fatalf("cell %q: %v", s, err)
	}
	return f
}

// The headline: with the same workload over the same emulated link, the
// topic retaining 50 batches is learned as 50, the broker sees 50 in
// flight, and it is clearly faster than the topic retaining 5.
func TestSmallWorkloadShowsWindowGain(t *testing.T) {
	var out, errb bytes.Buffer
	// At 50ms the window, not the CPU, sets the pace, even under -race on
	// a busy machine.
	args := []string{"--records", "2000", "--rtt", "50ms", "--progress", "50ms"}
	if code := run(context.Background(), args, &out, &errb); code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errb.String())
	}
	o := out.String()
	if got := tableRow(t, o, "learned window"); strings.Join(got, " ") != "5 50" {
		t.Errorf("learned window row %v, want [5 50]", got)
	}
	if got := tableRow(t, o, "max batches in flight (broker)"); strings.Join(got, " ") != "5 50" {
		t.Errorf("max in flight row %v, want [5 50]", got)
	}
	mb := tableRow(t, o, "MB/s")
	w5, w50 := floatCell(t, mb[0]), floatCell(t, mb[1])
	t.Logf("MB/s: w5 %.2f, w50 %.2f (%.1fx)", w5, w50, w50/w5)
	// The bound ratio is 10x; 1.5x leaves room for a loaded machine.
	if w50 < 1.5*w5 {
		t.Errorf("MB/s: w50 %.2f is not 1.5x w5 %.2f\n%s", w50, w5, o)
	}
	if got := tableRow(t, o, "log: each record once, in order"); strings.Join(got, " ") != "ok ok" {
		t.Errorf("log check row %v", got)
	}
	if !strings.Contains(errb.String(), "highbdp-w5: ") || !strings.Contains(errb.String(), "records acked") {
		t.Errorf("no progress line on stderr:\n%s", errb.String())
	}
}

func TestInterruptReportsUndelivered(t *testing.T) {
	defer func(g time.Duration) { interruptGrace = g }(interruptGrace)
	interruptGrace = 100 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errw := clitest.NewCancelOnWrite("records acked", cancel)
	var out bytes.Buffer
	// At 5 batches per 50ms this takes ~10 s; the first progress line
	// cancels it.
	code := run(ctx, []string{"--records", "15000", "--progress", "20ms"}, &out, errw)
	if code != cli.ExitInterrupted {
		t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, cli.ExitInterrupted, out.String(), errw.String())
	}
	if !strings.Contains(out.String(), "interrupted: highbdp-w5: ") || !strings.Contains(out.String(), "produced records acknowledged") {
		t.Errorf("no report of what was delivered:\n%s", out.String())
	}
}

// Against an external cluster (here the embedded broker on its own, with
// no emulated delay) the topics are created through CreateTopics with
// their windows and the round trip is measured.
func TestBootstrapServerCreatesTopics(t *testing.T) {
	c := testkit.StartCluster(t, broker.Config{})
	var out, errb bytes.Buffer
	args := []string{"--bootstrap-server", c.Addr(), "--records", "500", "--windows", "5,20", "--topic-prefix", "ext"}
	if code := run(context.Background(), args, &out, &errb); code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errb.String())
	}
	for _, w := range []struct {
		topic string
		want  int
	}{{"ext-w5", 5}, {"ext-w20", 20}} {
		if got := c.Window(w.topic); got != w.want {
			t.Errorf("%s: broker window %d, want %d", w.topic, got, w.want)
		}
		if n := len(c.Records(w.topic, 0)); n != 500 {
			t.Errorf("%s: %d records in the log, want 500", w.topic, n)
		}
	}
	if got := tableRow(t, out.String(), "learned window"); strings.Join(got, " ") != "5 20" {
		t.Errorf("learned window row %v, want [5 20]\n%s", got, out.String())
	}
	tableRow(t, out.String(), "max batches in flight (producer, sampled)")
}

// The log check is what makes "once each, in order" in the table mean
// something: a log with a duplicate or a reordering must fail it.
func TestLogCheckCatchesDuplicatesAndReordering(t *testing.T) {
	for _, tc := range []struct {
		name string
		seqs []uint64
		ok   bool
	}{
		{"clean", []uint64{0, 1, 2}, true},
		{"duplicate", []uint64{0, 1, 1, 2}, false},
		{"reordered", []uint64{0, 2, 1}, false},
		{"missing", []uint64{0, 1}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := testkit.StartCluster(t, broker.Config{Topics: []broker.TopicConfig{{Name: "t", Partitions: 1}}})
			p, err := producer.New(producer.BootstrapServers(c.Addr()))
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close(context.Background())
			var failed atomic.Int32
			for _, s := range tc.seqs {
				v := make([]byte, 8)
				v[7] = byte(s)
				p.Produce(context.Background(), &producer.Record{Topic: "t", Value: v}, func(_ *producer.Record, err error) {
					if err != nil {
						failed.Add(1)
					}
				})
			}
			if err := p.Flush(context.Background()); err != nil || failed.Load() > 0 {
				t.Fatalf("flush: %v, %d failed", err, failed.Load())
			}
			d := &demo{o: options{partitions: 1}, cluster: c}
			got := d.checkLog("t", 3)
			if (got == logOK) != tc.ok {
				t.Errorf("checkLog = %q, want ok=%v", got, tc.ok)
			}
		})
	}
}
