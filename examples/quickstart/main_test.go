package main

import (
	"bytes"
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/longhaul-kafka/longhaul/internal/cli"
	"github.com/longhaul-kafka/longhaul/internal/cli/clitest"
	"github.com/longhaul-kafka/longhaul/producer/producertest"
)

func TestBadFlagsExit2(t *testing.T) {
	clitest.BadFlagsExit2(t, run, [][]string{
		{"--records", "0"},
		{"--partitions", "0"},
		{"--window", "4"},
		{"--topic", ""},
		{"--no-such-flag"},
		{"extra"},
	})
}

func TestHelpDocumentsEveryFlag(t *testing.T) {
	clitest.HelpDocuments(t, run, []string{"-bootstrap-server", "-topic", "-records", "-partitions", "-window"})
}

var partitionLine = regexp.MustCompile(`(?m)^partition (\d+): (\d+) records, offsets (\d+)\.\.(\d+), learned window (\d+),`)

// checkPartitions checks that the printed partitions account for every
// record with contiguous offsets from 0, and returns the learned windows.
func checkPartitions(t *testing.T, out string, records, partitions int) []int {
	t.Helper()
	ms := partitionLine.FindAllStringSubmatch(out, -1)
	if len(ms) != partitions {
		t.Fatalf("%d partition lines, want %d:\n%s", len(ms), partitions, out)
	}
	total := 0
	var windows []int
	for _, m := range ms {
		n, _ := strconv.Atoi(m[2])
		first, _ := strconv.Atoi(m[3])
		last, _ := strconv.Atoi(m[4])
		w, _ := strconv.Atoi(m[5])
		if first != 0 || last != n-1 {
			t.Errorf("partition %s: %d records at offsets %d..%d, want 0..%d", m[1], n, first, last, n-1)
		}
		total += n
		windows = append(windows, w)
	}
	if total != records {
		t.Errorf("partitions hold %d records, want %d", total, records)
	}
	return windows
}

func TestEmbeddedRunPrintsOffsetsAndWindows(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run(context.Background(), nil, &out, &errb); code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errb.String())
	}
	if !strings.Contains(out.String(), "produced 1000 records to quickstart idempotently") {
		t.Errorf("no summary line:\n%s", out.String())
	}
	for i, w := range checkPartitions(t, out.String(), 1000, 3) {
		if w != 20 {
			t.Errorf("partition %d: learned window %d, want 20", i, w)
		}
	}
}

func TestBootstrapServerCreatesTopic(t *testing.T) {
	c := producertest.NewCluster(t, 2)
	var out, errb bytes.Buffer
	args := []string{"--bootstrap-server", c.Addr(), "--topic", "qs", "--records", "300", "--partitions", "2"}
	if code := run(context.Background(), args, &out, &errb); code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errb.String())
	}
	if !strings.Contains(out.String(), "topic qs created, 2 partitions") {
		t.Errorf("no note of the created topic:\n%s", out.String())
	}
	// The cluster's default window is 5: that is what the producer learns.
	for i, w := range checkPartitions(t, out.String(), 300, 2) {
		if w != 5 {
			t.Errorf("partition %d: learned window %d, want 5", i, w)
		}
	}
	if n := len(c.Records("qs", 0)) + len(c.Records("qs", 1)); n != 300 {
		t.Errorf("broker log holds %d records, want 300", n)
	}
}

func TestInterruptedRunReportsUndelivered(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // interrupted before the first record
	var out, errb bytes.Buffer
	if code := run(ctx, nil, &out, &errb); code != cli.ExitInterrupted {
		t.Fatalf("exit %d, want %d\n%s%s", code, cli.ExitInterrupted, out.String(), errb.String())
	}
	if !strings.Contains(out.String(), "interrupted: 0 of 1000 records delivered") {
		t.Errorf("no report of what was not delivered:\n%s", out.String())
	}
}

func TestOffsetRangeIgnoresUnknownOffsets(t *testing.T) {
	var r *offsetRange
	for _, off := range []int64{-1, 4, 5, -1, 6} {
		r = r.add(off)
	}
	if *r != (offsetRange{first: 4, last: 6, n: 5}) {
		t.Errorf("range %+v, want first 4, last 6, n 5", *r)
	}
}
