// Command perf is a drop-in for Kafka's kafka-producer-perf-test, driving
// longhaul's idempotent producer. It takes the Java tool's flags
// (--topic, --num-records, --record-size, --throughput,
// --producer-props k=v ..., --producer.config FILE, --bootstrap-server),
// prints a progress line every 5 s and ends with the same summary line:
//
//	20000 records sent, 190476.190476 records/sec (18.17 MB/sec), 2.41 ms avg latency, 11.00 ms max latency, 2 ms 50th, 6 ms 95th, 9 ms 99th, 11 ms 99.9th.
//
// Run it with
//
//	go run ./examples/perf --num-records 20000 --record-size 100 --throughput -1
//
// With no bootstrap server (neither --bootstrap-server nor
// bootstrap.servers in the properties) it starts longhaul's embedded
// KIP-1269 broker in-process, with a topic whose
// producer.state.batches.to.retain is --window, behind an emulated round
// trip of --rtt. Against a real cluster a missing topic is created with
// the broker's defaults. --json prints the summary as one JSON object on
// stdout instead (progress lines then go to stderr).
//
// Producer properties are Kafka's names (see the README's table); Java-only
// ones such as key.serializer are accepted and ignored. Latency runs from
// the Produce call to the record's callback, as in the Java tool; MB/sec
// divides by 1024*1024, as the Java tool does.
//
// go run ./examples/perf -h lists every flag. A bad flag or property prints
// what is wrong and exits with status 2; failed records exit with 1.
// Ctrl-C stops sending, waits up to 5 s for what is in flight, prints the
// summary of what was acknowledged and what was not, and exits with 130.
package main

import (
	"context"
	"io"

	"github.com/longhaul-kafka/longhaul/internal/cli"
)

func main() { cli.Main(run) }

// run parses args, runs the test and returns the exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, err := parseFlags(args, stderr)
	if status, done := cli.FlagsDone("perf", err, stderr); done {
		return status
	}
	t := &perfTest{o: o, stdout: stdout, stderr: stderr}
	return t.run(ctx)
}
