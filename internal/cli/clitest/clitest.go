// Package clitest checks the command-line contract every example program
// keeps: bad flags exit 2 with a message, and -h documents every flag.
package clitest

import (
	"bytes"
	"context"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/longhaul-kafka/longhaul/internal/cli"
)

// Run is an example program's run function, as passed to [cli.Main].
type Run func(ctx context.Context, args []string, stdout, stderr io.Writer) int

// BadFlagsExit2 runs each argument list and fails the test unless it exits
// with [cli.ExitUsage] and says why on stderr.
func BadFlagsExit2(t *testing.T, run Run, cases [][]string) {
	t.Helper()
	for _, args := range cases {
		var out, errb bytes.Buffer
		if code := run(context.Background(), args, &out, &errb); code != cli.ExitUsage {
			t.Errorf("%v: exit %d, want %d (stderr %q)", args, code, cli.ExitUsage, errb.String())
		}
		if errb.Len() == 0 {
			t.Errorf("%v: no message", args)
		}
	}
}

// HelpDocuments runs -h and fails the test unless it exits 0 and its text
// names every flag in flags (spelled "-name").
func HelpDocuments(t *testing.T, run Run, flags []string) {
	t.Helper()
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"-h"}, &out, &errb); code != cli.ExitOK {
		t.Fatalf("-h: exit %d", code)
	}
	for _, f := range flags {
		if !strings.Contains(errb.String(), f) {
			t.Errorf("-h does not document %s", f)
		}
	}
}

// CancelOnWrite is an io.Writer that keeps what is written and cancels a
// context at the first write containing a given text: a test interrupts a
// program's run once its output shows it is under way. It is safe for
// concurrent use.
type CancelOnWrite struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	want   string
	cancel context.CancelFunc
}

// NewCancelOnWrite returns a writer that calls cancel at the first write
// containing want.
func NewCancelOnWrite(want string, cancel context.CancelFunc) *CancelOnWrite {
	return &CancelOnWrite{want: want, cancel: cancel}
}

// Write keeps p and cancels the context if p contains the wanted text.
func (w *CancelOnWrite) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if strings.Contains(string(p), w.want) {
		w.cancel()
	}
	return w.buf.Write(p)
}

// String returns everything written so far.
func (w *CancelOnWrite) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}
