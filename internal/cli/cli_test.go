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
