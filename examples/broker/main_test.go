package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

func TestBadFlagsExit2(t *testing.T) {
	for _, args := range [][]string{
		{"--nodes", "0"},
		{"--topics", "t"},
		{"--topics", "t:0"},
		{"--topics", "t:3:4"},
		{"--nodes", "2", "--old", "2"},
		{"--rtt", "fast"},
		{"--no-such-flag"},
		{"extra"},
		{"--window", "3"},
	} {
		var out, errb bytes.Buffer
		if code := run(context.Background(), args, &out, &errb); code != 2 {
			t.Errorf("%v: exit %d, want 2 (stderr %q)", args, code, errb.String())
		}
		if errb.Len() == 0 {
			t.Errorf("%v: no message", args)
		}
	}
}

func TestHelpDocumentsEveryFlag(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"-h"}, &out, &errb); code != 0 {
		t.Fatalf("-h: exit %d", code)
	}
	for _, f := range []string{"-addr", "-nodes", "-rtt", "-topics", "-old", "-bandwidth", "-window"} {
		if !strings.Contains(errb.String(), f) {
			t.Errorf("-h does not document %s", f)
		}
	}
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
