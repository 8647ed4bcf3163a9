package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/longhaul-kafka/longhaul/internal/cli/clitest"
)

func TestBadFlagsExit2(t *testing.T) {
	clitest.BadFlagsExit2(t, run, [][]string{
		{"--nodes", "0"},
		{"--topics", "t"},
		{"--topics", "t:0"},
		{"--topics", "t:3:4"},
		{"--nodes", "2", "--old", "2"},
		{"--rtt", "fast"},
		{"--no-such-flag"},
		{"extra"},
		{"--window", "3"},
	})
}

func TestHelpDocumentsEveryFlag(t *testing.T) {
	clitest.HelpDocuments(t, run, []string{"-addr", "-nodes", "-rtt", "-topics", "-old", "-bandwidth", "-window"})
}

func TestRunServesUntilCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var out, errb bytes.Buffer
	done := make(chan int)
	go func() {
		done <- run(ctx, []string{"--addr", "127.0.0.1:0", "--nodes", "2", "--old", "1", "--topics", "a:3:20,b:1"}, &out, &errb)
	}()
	time.Sleep(100 * time.Millisecond) // let it start; the result does not depend on how long
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	for _, want := range []string{"bootstrap: 127.0.0.1:", "node 1:", "topic a: 3 partitions, producer.state.batches.to.retain=20", "topic b: 1 partitions, producer.state.batches.to.retain=5"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}
