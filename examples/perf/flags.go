package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/longhaul-kafka/longhaul/internal/cli"
)

// options are the parsed command line.
type options struct {
	topic       string
	numRecords  int64
	recordSize  int
	throughput  float64 // records/s; <= 0 is unlimited
	props       map[string]string
	bootstrap   string // effective bootstrap.servers; "" = embedded broker
	jsonOut     bool
	reportEvery time.Duration

	// Embedded broker only.
	rtt        time.Duration
	window     int
	partitions int
}

// propsFlag collects --producer-props values, each key=value.
type propsFlag struct{ kv [][2]string }

func (p *propsFlag) String() string { return "" }

func (p *propsFlag) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || strings.TrimSpace(k) == "" {
		return fmt.Errorf("%q: want key=value", s)
	}
	p.kv = append(p.kv, [2]string{strings.TrimSpace(k), v})
	return nil
}

// expandProducerProps rewrites "--producer-props a=1 b=2" (several values
// after one flag, as the Java tool takes them) into repeated
// "--producer-props a=1 --producer-props b=2", which package flag parses.
// Values are taken while they look like key=value and not like a flag.
func expandProducerProps(args []string) []string {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return append(out, args[i:]...)
		}
		if a != "--producer-props" && a != "-producer-props" {
			out = append(out, a)
			continue
		}
		j := i + 1
		for j < len(args) && !strings.HasPrefix(args[j], "-") && strings.Contains(args[j], "=") {
			out = append(out, a, args[j])
			j++
		}
		if j == i+1 {
			out = append(out, a) // no key=value: let flag report it
			continue
		}
		i = j - 1
	}
	return out
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	var props propsFlag
	fs := cli.NewFlagSet("perf", "A drop-in for kafka-producer-perf-test using longhaul's idempotent producer.\n"+
		"Without a bootstrap server it starts the embedded KIP-1269 broker in-process.\n", stderr)
	fs.StringVar(&o.topic, "topic", "longhaul-perf", "topic to produce to")
	fs.Int64Var(&o.numRecords, "num-records", 100000, "number of records to produce")
	fs.IntVar(&o.recordSize, "record-size", 100, "value size of each record in `bytes`")
	fs.Float64Var(&o.throughput, "throughput", -1, "maximum `records/sec`; -1 = unlimited")
	fs.Var(&props, "producer-props", "producer properties `key=value ...`; several may follow one flag, as in the Java tool; they override --producer.config")
	config := fs.String("producer.config", "", "Java properties `file` of producer properties")
	bootstrap := fs.String("bootstrap-server", "", "`host:port[,...]` of the cluster; overrides bootstrap.servers. None: start the embedded broker")
	fs.BoolVar(&o.jsonOut, "json", false, "print the summary as one JSON object on stdout (progress goes to stderr)")
	reportMs := fs.Int64("reporting-interval", 5000, "interval between progress lines in `ms`")
	fs.DurationVar(&o.rtt, "rtt", 0, "embedded broker only: emulated round trip, e.g. 50ms")
	fs.IntVar(&o.window, "window", 50, "embedded broker only: the topic's producer.state.batches.to.retain (>= 5)")
	fs.IntVar(&o.partitions, "partitions", 1, "embedded broker only: the topic's partition count")
	if err := fs.Parse(expandProducerProps(args)); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	switch {
	case o.topic == "":
		return o, fmt.Errorf("--topic: must not be empty")
	case o.numRecords < 1:
		return o, fmt.Errorf("--num-records %d: must be at least 1", o.numRecords)
	case o.recordSize < 0:
		return o, fmt.Errorf("--record-size %d: must be >= 0", o.recordSize)
	case o.throughput == 0:
		return o, fmt.Errorf("--throughput 0: give a positive records/sec or -1 for unlimited")
	case *reportMs < 1:
		return o, fmt.Errorf("--reporting-interval %d: must be at least 1 ms", *reportMs)
	case o.rtt < 0:
		return o, fmt.Errorf("--rtt %v: must be >= 0", o.rtt)
	case o.window < 5:
		return o, fmt.Errorf("--window %d: must be at least 5", o.window)
	case o.partitions < 1 || o.partitions > 1000:
		return o, fmt.Errorf("--partitions %d: must be 1..1000", o.partitions)
	}
	o.reportEvery = time.Duration(*reportMs) * time.Millisecond

	// Precedence as in the Java tool: the file, then --producer-props,
	// then --bootstrap-server.
	o.props = make(map[string]string)
	if *config != "" {
		f, err := os.Open(*config)
		if err != nil {
			return o, fmt.Errorf("--producer.config: %w", err)
		}
		fileProps, err := parseProperties(f)
		f.Close()
		if err != nil {
			return o, fmt.Errorf("--producer.config %s: %w", *config, err)
		}
		for k, v := range fileProps {
			o.props[k] = v
		}
	}
	for _, kv := range props.kv {
		o.props[kv[0]] = kv[1]
	}
	if *bootstrap != "" {
		o.props["bootstrap.servers"] = *bootstrap
	}
	o.bootstrap = strings.TrimSpace(o.props["bootstrap.servers"])
	return o, nil
}
