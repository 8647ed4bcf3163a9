// Command broker runs longhaul's embedded KIP-1269 Kafka broker
// (internal/broker) as a standalone process, so any Kafka client or tool
// can be pointed at it: a cluster of one or more loopback nodes whose
// Produce v14 responses announce each topic's
// producer.state.batches.to.retain, optionally behind an emulated long link
// (round-trip delay, bandwidth cap) and with old-mode nodes that speak only
// Produce v13, as in a rolling upgrade.
//
// Run it with
//
//	go run ./examples/broker --nodes 3 --rtt 50ms --topics events:6:20,logs:3
//
// It prints the bootstrap address (and every node's address) and serves
// until SIGINT or SIGTERM. go run ./examples/broker -h lists every flag.
// A bad flag prints what is wrong and exits with status 2.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"

	"github.com/longhaul-kafka/longhaul/internal/broker"
	"github.com/longhaul-kafka/longhaul/internal/cli"
)

func main() { cli.Main(run) }

// run parses args, starts the cluster and serves until ctx is done. It
// returns the exit status: 0 after a clean stop, 1 if the cluster cannot
// start, 2 for bad flags.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, err := parseFlags(args, stderr)
	if status, done := cli.FlagsDone("broker", err, stderr); done {
		return status
	}
	c, err := broker.Start(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "broker: %v\n", err)
		if errors.Is(err, broker.ErrInvalidConfig) {
			return 2
		}
		return 1
	}
	fmt.Fprintf(stdout, "bootstrap: %s\n", c.Addr())
	for i, a := range c.Addrs() {
		fmt.Fprintf(stdout, "node %d: %s\n", i, a)
	}
	for _, t := range cfg.Topics {
		fmt.Fprintf(stdout, "topic %s: %d partitions, producer.state.batches.to.retain=%d\n", t.Name, t.Partitions, c.Window(t.Name))
	}
	<-ctx.Done()
	fmt.Fprintln(stdout, "stopping")
	if err := c.Close(); err != nil {
		fmt.Fprintf(stderr, "broker: close: %v\n", err)
		return 1
	}
	return 0
}

// parseFlags turns the command line into a broker.Config.
func parseFlags(args []string, stderr io.Writer) (broker.Config, error) {
	var cfg broker.Config
	fs := cli.NewFlagSet("broker", "Runs an embedded KIP-1269 Kafka cluster on loopback until interrupted.\n", stderr)
	fs.StringVar(&cfg.Addr, "addr", "127.0.0.1:9092", "listen `host:port` of node 0 (the bootstrap address); other nodes take free loopback ports")
	fs.IntVar(&cfg.Nodes, "nodes", 1, "number of broker `nodes`, ids 0..n-1; partition p is led by node p % n")
	fs.DurationVar(&cfg.RTT, "rtt", 0, "emulated round trip per node, e.g. 50ms: each response is written this long after its request was read (0 = none)")
	fs.Int64Var(&cfg.Bandwidth, "bandwidth", 0, "link cap per node in `bytes/s` per direction (0 = none)")
	fs.IntVar(&cfg.DefaultWindow, "window", broker.DefaultWindow, "server default log.producer.state.batches.to.retain, at least 5")
	fs.DurationVar(&cfg.ProducerIDExpiration, "producer-id-expiration", broker.DefaultProducerIDExpiration, "producer.id.expiration.ms as a duration (KIP-854)")
	fs.BoolVar(&cfg.AutoCreateTopics, "auto-create", false, "create unknown topics (1 partition) when Metadata asks for them")
	topics := fs.String("topics", "", "topics to create, `name:partitions[:window],...`; window is producer.state.batches.to.retain (default: -window)")
	old := fs.String("old", "", "comma-separated `ids` of old-mode nodes (Produce <= v13, no KIP-1269 field, window 5)")
	verbose := fs.Bool("v", false, "log connections and rejected requests to stderr")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if cfg.Nodes < 1 {
		return cfg, fmt.Errorf("-nodes %d: need at least 1", cfg.Nodes)
	}
	var err error
	if cfg.Topics, err = parseTopics(*topics); err != nil {
		return cfg, err
	}
	if cfg.OldNodes, err = parseIDs(*old, cfg.Nodes); err != nil {
		return cfg, err
	}
	if *verbose {
		cfg.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return cfg, nil
}

// parseTopics parses name:partitions[:window],...
func parseTopics(s string) ([]broker.TopicConfig, error) {
	if s == "" {
		return nil, nil
	}
	var out []broker.TopicConfig
	for _, spec := range strings.Split(s, ",") {
		parts := strings.Split(spec, ":")
		if len(parts) < 2 || len(parts) > 3 || parts[0] == "" {
			return nil, fmt.Errorf("-topics %q: want name:partitions[:window]", spec)
		}
		n, err := strconv.Atoi(parts[1])
		if err != nil || n < 1 || n > broker.MaxPartitions {
			return nil, fmt.Errorf("-topics %q: partitions must be 1..%d", spec, broker.MaxPartitions)
		}
		t := broker.TopicConfig{Name: parts[0], Partitions: int32(n)}
		if len(parts) == 3 {
			if t.Window, err = strconv.Atoi(parts[2]); err != nil || t.Window < broker.MinWindow {
				return nil, fmt.Errorf("-topics %q: window must be an integer >= %d", spec, broker.MinWindow)
			}
		}
		out = append(out, t)
	}
	return out, nil
}

// parseIDs parses a comma-separated list of node ids below nodes.
func parseIDs(s string, nodes int) ([]int32, error) {
	if s == "" {
		return nil, nil
	}
	var out []int32
	for _, f := range strings.Split(s, ",") {
		id, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || id < 0 || id >= nodes {
			return nil, fmt.Errorf("-old %q: node ids are 0..%d", f, nodes-1)
		}
		out = append(out, int32(id))
	}
	return out, nil
}
