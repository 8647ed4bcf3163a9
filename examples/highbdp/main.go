// Command highbdp shows what KIP-1269 buys on a long, fat link: the same
// idempotent workload is produced to a topic that retains 5 batches per
// producer (every broker before KIP-1269) and to one that retains 50, and
// the two runs are printed side by side: the window the producer learned,
// the most batches the broker saw in flight, MB/s, records/s, and the
// bound in-flight x batch bytes / RTT that the window sets.
//
// Run it with
//
//	go run ./examples/highbdp
//
// With no --bootstrap-server it starts longhaul's embedded broker
// (internal/broker) in-process with an emulated round trip of 50ms and
// creates both topics; the default workload takes 10-20 s, most of it on
// the 5-window topic. With --bootstrap-server it uses a real cluster
// instead (no emulation; the round trip is measured), creating the topics
// with producer.state.batches.to.retain if they do not exist.
//
// The producer runs with max.in.flight.requests.per.connection=100
// (--max-in-flight): a connection cap below the window would cap every
// topic at that value, whatever the broker allows.
//
// go run ./examples/highbdp -h lists every flag. A bad flag prints what is
// wrong and exits with status 2. Ctrl-C stops producing, waits up to 5 s
// for what is in flight, reports what was not delivered and exits with 130.
package main

import (
	"context"
	"io"
	"os"

	"github.com/longhaul-kafka/longhaul/internal/cli"
)

func main() { cli.Main(run) }

// run parses args, runs the demo and returns the exit status. The table
// goes to stdout; progress lines and notes go to stderr.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, err := parseFlags(args, stderr)
	if status, done := cli.FlagsDone("highbdp", err, stderr); done {
		return status
	}
	d := &demo{o: o, stdout: stdout, stderr: stderr, tty: isTerminal(stderr)}
	return d.run(ctx)
}

// isTerminal reports whether w is a terminal, where progress lines
// overwrite each other instead of scrolling.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
