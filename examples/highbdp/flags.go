package main

import (
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/longhaul-kafka/longhaul/internal/cli"
)

// options are the parsed command line.
type options struct {
	bootstrap   string
	rtt         time.Duration
	rttSet      bool // --rtt given explicitly
	windows     []int
	partitions  int
	records     int
	recordSize  int
	batchSize   int
	linger      time.Duration
	maxInFlight int
	topicPrefix string
	progress    time.Duration
}

// minWindow is the smallest producer.state.batches.to.retain a broker
// accepts (KIP-1269).
const minWindow = 5

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := cli.NewFlagSet("highbdp", "Produces the same idempotent workload to a topic per window (default 5 and 50)\n"+
		"over an emulated long link and prints the runs side by side.\n", stderr)
	fs.StringVar(&o.bootstrap, "bootstrap-server", "", "`host:port[,...]` of a real cluster; empty starts the embedded broker in-process")
	fs.DurationVar(&o.rtt, "rtt", 50*time.Millisecond, "embedded broker: emulated round trip; real cluster: the round trip used for the bound (default: measured)")
	windows := fs.String("windows", "5,50", "comma-separated producer.state.batches.to.retain of the topics, one topic each, each >= 5")
	fs.IntVar(&o.partitions, "partitions", 1, "partitions per topic; records are spread round-robin")
	fs.IntVar(&o.records, "records", 15000, "records produced to each topic")
	fs.IntVar(&o.recordSize, "record-size", 1000, "value size of each record in `bytes` (at least 8: the first 8 carry a sequence number)")
	fs.IntVar(&o.batchSize, "batch-size", 16384, "producer batch.size in `bytes`")
	fs.DurationVar(&o.linger, "linger", 5*time.Millisecond, "producer linger.ms, as a duration")
	fs.IntVar(&o.maxInFlight, "max-in-flight", 100, "producer max.in.flight.requests.per.connection; must be >= the largest window, or it caps every topic")
	fs.StringVar(&o.topicPrefix, "topic-prefix", "highbdp", "topics are named `prefix`-w<window>")
	fs.DurationVar(&o.progress, "progress", time.Second, "interval between progress lines on stderr (0 = none)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "rtt" {
			o.rttSet = true
		}
	})
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	var err error
	if o.windows, err = parseWindows(*windows); err != nil {
		return o, err
	}
	switch {
	case o.rtt < 0:
		return o, fmt.Errorf("-rtt %v: must be >= 0", o.rtt)
	case o.partitions < 1 || o.partitions > 1000:
		return o, fmt.Errorf("-partitions %d: must be 1..1000", o.partitions)
	case o.records < 1:
		return o, fmt.Errorf("-records %d: must be at least 1", o.records)
	case o.recordSize < 8 || o.recordSize > 900000:
		return o, fmt.Errorf("-record-size %d: must be 8..900000 bytes", o.recordSize)
	case o.batchSize < 1:
		return o, fmt.Errorf("-batch-size %d: must be at least 1", o.batchSize)
	case o.linger < 0:
		return o, fmt.Errorf("-linger %v: must be >= 0", o.linger)
	case o.maxInFlight < 1:
		return o, fmt.Errorf("-max-in-flight %d: must be at least 1", o.maxInFlight)
	case o.topicPrefix == "":
		return o, fmt.Errorf("-topic-prefix: must not be empty")
	case o.progress < 0:
		return o, fmt.Errorf("-progress %v: must be >= 0", o.progress)
	}
	return o, nil
}

func parseWindows(s string) ([]int, error) {
	var out []int
	seen := make(map[int]bool)
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < minWindow {
			return nil, fmt.Errorf("-windows %q: each window must be an integer >= %d", s, minWindow)
		}
		if seen[n] {
			return nil, fmt.Errorf("-windows %q: window %d given twice", s, n)
		}
		seen[n] = true
		out = append(out, n)
	}
	return out, nil
}

// topicName is the topic of a window.
func (o options) topicName(window int) string {
	return fmt.Sprintf("%s-w%d", o.topicPrefix, window)
}
