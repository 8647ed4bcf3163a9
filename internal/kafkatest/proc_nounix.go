//go:build !unix

package kafkatest

import (
	"errors"
	"os"
	"os/exec"
)

func lockFile(path string) (func(), error) { return func() {}, nil }

func terminate(cmd *exec.Cmd) error { return cmd.Process.Signal(os.Interrupt) }

var errNoPause = errors.New("kafkatest: pausing a process needs SIGSTOP (unix)")

func pause(*exec.Cmd) error { return errNoPause }

func resume(*exec.Cmd) error { return errNoPause }
