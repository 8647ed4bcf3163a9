//go:build !linux

package kafkatest

import "os/exec"

// setDeathSignal is a no-op where the kernel has no parent-death signal;
// t.Cleanup still stops the JVMs on a normal test exit.
func setDeathSignal(cmd *exec.Cmd) {}
