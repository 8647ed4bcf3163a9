//go:build linux

package kafkatest

import (
	"os/exec"
	"syscall"
)

// setDeathSignal makes the kernel kill the JVM if the test binary dies
// (for example on a go test -timeout panic, when no cleanup runs), so no
// broker outlives its test.
func setDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
