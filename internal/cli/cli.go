// Package cli holds what the example programs' main functions share: they
// run until done or interrupted, and exit with the status their run
// function returns.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// Exit statuses of the example programs.
const (
	ExitOK          = 0
	ExitFailed      = 1
	ExitUsage       = 2   // bad flags
	ExitInterrupted = 130 // 128 + SIGINT, as shells report it
)

// Main calls run with the program's arguments and a context that is
// cancelled on SIGINT or SIGTERM, then exits with run's status. A second
// interrupt kills the process at once.
func Main(run func(ctx context.Context, args []string, stdout, stderr io.Writer) int) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop() // restore default handling: the next Ctrl-C ends the process
	}()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// NewFlagSet returns the flag set of program prog: errors are returned,
// not fatal, and it writes to stderr. Its usage (on -h or a bad flag) is
// "Usage: go run ./examples/<prog> [flags]", a blank line, about (a
// description ending in a newline), then "Flags:" and the defaults.
func NewFlagSet(prog, about string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(prog, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: go run ./examples/%s [flags]\n\n%s\nFlags:\n", prog, about)
		fs.PrintDefaults()
	}
	return fs
}

// FlagsDone tells run what to do after parsing its flags: with err nil it
// returns false (carry on); with flag.ErrHelp (-h, the usage already
// printed) it returns ExitOK and true; with any other error it writes
// "prog: err" and a hint to stderr and returns ExitUsage and true.
func FlagsDone(prog string, err error, stderr io.Writer) (status int, done bool) {
	switch {
	case err == nil:
		return 0, false
	case errors.Is(err, flag.ErrHelp):
		return ExitOK, true
	}
	fmt.Fprintf(stderr, "%s: %v\nRun with -h for the flags.\n", prog, err)
	return ExitUsage, true
}
