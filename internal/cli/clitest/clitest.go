// Package clitest checks the command-line contract every example program
// keeps: bad flags exit 2 with a message, and -h documents every flag.
package clitest

import (
	"bytes"
	"context"
	"io"
	"strings"
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
