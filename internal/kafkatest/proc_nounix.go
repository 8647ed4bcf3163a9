//go:build !unix

package kafkatest

import (
	"os"
	"os/exec"
)

func lockFile(path string) (func(), error) { return func() {}, nil }

func terminate(cmd *exec.Cmd) error { return cmd.Process.Signal(os.Interrupt) }
