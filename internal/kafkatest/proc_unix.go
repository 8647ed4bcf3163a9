//go:build unix

package kafkatest

import (
	"os"
	"os/exec"
	"syscall"
)

// lockFile takes an exclusive flock on path, blocking until it is free.
func lockFile(path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}

// terminate asks the process to shut down (SIGTERM).
func terminate(cmd *exec.Cmd) error { return cmd.Process.Signal(syscall.SIGTERM) }

// pause stops the process (SIGSTOP): it keeps its sockets and answers
// nothing until resume.
func pause(cmd *exec.Cmd) error { return cmd.Process.Signal(syscall.SIGSTOP) }

// resume continues a paused process (SIGCONT).
func resume(cmd *exec.Cmd) error { return cmd.Process.Signal(syscall.SIGCONT) }
