package cli

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestFlagsDone shows each of FlagsDone's three answers: carry on, -h
// (exit 0, nothing more printed) and a bad flag (exit 2 with the program's
// name, the error and a hint).
func TestFlagsDone(t *testing.T) {
	var errb bytes.Buffer
	status, done := FlagsDone("prog", nil, &errb)
	assert.False(t, done)
	assert.Zero(t, status)
	assert.Empty(t, errb.String())

	status, done = FlagsDone("prog", fmt.Errorf("parse: %w", flag.ErrHelp), &errb)
	assert.True(t, done)
	assert.Equal(t, ExitOK, status)
	assert.Empty(t, errb.String())

	status, done = FlagsDone("prog", errors.New("-rtt: bad duration"), &errb)
	assert.True(t, done)
	assert.Equal(t, ExitUsage, status)
	assert.Equal(t, "prog: -rtt: bad duration\nRun with -h for the flags.\n", errb.String())
}

// TestNewFlagSet: -h prints the usage line, the description and the flags
// to stderr and returns flag.ErrHelp instead of exiting; a bad flag is an
// error too.
func TestNewFlagSet(t *testing.T) {
	var errb bytes.Buffer
	fs := NewFlagSet("prog", "Does a thing.\n", &errb)
	fs.Int("n", 3, "how many")
	assert.ErrorIs(t, fs.Parse([]string{"-h"}), flag.ErrHelp)
	assert.Equal(t, "Usage: go run ./examples/prog [flags]\n\nDoes a thing.\n\nFlags:\n  -n int\n    \thow many (default 3)\n", errb.String())
	assert.Error(t, NewFlagSet("prog", "", &errb).Parse([]string{"-nope"}))
}
