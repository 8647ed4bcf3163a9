package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestServesWindowWhileProducing runs the program as a user would, scrapes
// /metrics over HTTP while it produces, and checks that every partition's
// window gauge is the fake topic's window (30, not the default 5).
func TestServesWindowWhileProducing(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan int, 1)
	args := []string{"--listen", "127.0.0.1:0", "--partitions", "3", "--window", "30", "--duration", "0", "--record-size", "100"}
	go func() {
		var stderr strings.Builder
		code := run(ctx, args, pw, &stderr)
		if code != 0 {
			t.Logf("stderr: %s", stderr.String())
		}
		pw.Close()
		done <- code
	}()

	url := ""
	lines := bufio.NewScanner(pr)
	for url == "" && lines.Scan() {
		if m := regexp.MustCompile(`serving (http://\S+/metrics)`).FindStringSubmatch(lines.Text()); m != nil {
			url = m[1]
		}
	}
	require.NotEmpty(t, url, "the program never said where it serves")
	go io.Copy(io.Discard, pr)

	gauge := regexp.MustCompile(`(?m)^longhaul_producer_window\{partition="(\d)",topic="metrics-demo"\} (\d+)$`)
	var windows map[string]string
	require.Eventually(t, func() bool {
		resp, err := http.Get(url)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		windows = map[string]string{}
		for _, m := range gauge.FindAllStringSubmatch(string(body), -1) {
			windows[m[1]] = m[2]
		}
		return len(windows) == 3 && windows["0"] == "30" && windows["1"] == "30" && windows["2"] == "30"
	}, 20*time.Second, 50*time.Millisecond, "window gauges never reached the topic's window")
	assert.Equal(t, map[string]string{"0": "30", "1": "30", "2": "30"}, windows)

	cancel()
	select {
	case code := <-done:
		assert.Equal(t, 0, code, "the run ends cleanly when interrupted")
	case <-time.After(40 * time.Second):
		t.Fatal("the program did not stop after its context ended")
	}
}

func TestBadArguments(t *testing.T) {
	var out, errb strings.Builder
	assert.Equal(t, 2, run(context.Background(), []string{"--window", "0"}, &out, &errb))
	assert.Equal(t, 2, run(context.Background(), []string{"extra"}, &out, &errb))
	assert.Equal(t, 2, run(context.Background(), []string{"--no-such-flag"}, &out, &errb))
	assert.Contains(t, errb.String(), "Run with -h for the flags.")
	errb.Reset()
	assert.Equal(t, 0, run(context.Background(), []string{"-h"}, &out, &errb), "-h is not an error")
	assert.Contains(t, errb.String(), "-listen address")
}
