package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/longhaul-kafka/longhaul/internal/broker"
	"github.com/longhaul-kafka/longhaul/internal/topicadmin"
	"github.com/longhaul-kafka/longhaul/protocol"

	"github.com/longhaul-kafka/longhaul/internal/cli"
)

// demo is one invocation: where it produces and what it found.
type demo struct {
	o      options
	stdout io.Writer
	stderr io.Writer
	tty    bool

	cluster   *broker.Cluster // nil against a real cluster
	bootstrap []string
	rtt       time.Duration // emulated, given or measured
}

func (d *demo) run(ctx context.Context) int {
	if err := d.setup(ctx); err != nil {
		if ctx.Err() != nil {
			fmt.Fprintln(d.stderr, "highbdp: interrupted before producing")
			return cli.ExitInterrupted
		}
		fmt.Fprintf(d.stderr, "highbdp: %v\n", err)
		return cli.ExitFailed
	}
	if d.cluster != nil {
		defer d.cluster.Close()
	}
	fmt.Fprintf(d.stdout, "producer: batch.size=%d linger.ms=%d max.in.flight.requests.per.connection=%d (>= every window, so only the window limits)\n",
		d.o.batchSize, d.o.linger.Milliseconds(), d.o.maxInFlight)
	fmt.Fprintf(d.stdout, "workload: %d records of %d bytes per topic, %d partition(s) each\n", d.o.records, d.o.recordSize, d.o.partitions)

	var results []result
	for _, w := range d.o.windows {
		r, err := d.produce(ctx, w)
		results = append(results, r)
		if err != nil {
			fmt.Fprintf(d.stderr, "highbdp: %s: %v\n", r.topic, err)
			if ctx.Err() != nil {
				fmt.Fprintf(d.stdout, "\ninterrupted: %s\n", r.undelivered())
				d.printTable(results)
				return cli.ExitInterrupted
			}
			return cli.ExitFailed
		}
	}
	fmt.Fprintln(d.stdout)
	d.printTable(results)
	failed := false
	for _, r := range results {
		if r.logCheck != "" && r.logCheck != logOK {
			failed = true
		}
	}
	if failed {
		return cli.ExitFailed
	}
	return cli.ExitOK
}

// setup starts the embedded broker, or makes sure the topics exist on the
// real cluster, and settles the RTT used for the bound.
func (d *demo) setup(ctx context.Context) error {
	if d.o.bootstrap == "" {
		cfg := broker.Config{RTT: d.o.rtt}
		for _, w := range d.o.windows {
			cfg.Topics = append(cfg.Topics, broker.TopicConfig{Name: d.o.topicName(w), Partitions: int32(d.o.partitions), Window: w})
		}
		c, err := broker.Start(cfg)
		if err != nil {
			return fmt.Errorf("start embedded broker: %w", err)
		}
		d.cluster, d.bootstrap, d.rtt = c, []string{c.Addr()}, d.o.rtt
		fmt.Fprintf(d.stdout, "embedded KIP-1269 broker on %s, emulated round trip %v\n", c.Addr(), d.o.rtt)
		return nil
	}
	d.bootstrap = strings.Split(d.o.bootstrap, ",")
	if err := d.ensureTopics(ctx); err != nil {
		return err
	}
	d.rtt = d.o.rtt
	if !d.o.rttSet {
		rtt, err := measureRTT(ctx, d.bootstrap[0])
		if err != nil {
			return fmt.Errorf("measure round trip: %w", err)
		}
		d.rtt = rtt
	}
	fmt.Fprintf(d.stdout, "cluster %s, round trip %v\n", d.o.bootstrap, d.rtt.Round(10*time.Microsecond))
	return nil
}

// ensureTopics creates the topics with their windows. A broker without
// KIP-1269 rejects the unknown config; the topic is then created without
// it and the run shows what such a broker gives (window 5).
func (d *demo) ensureTopics(ctx context.Context) error {
	cfg := topicadmin.Config{Bootstrap: d.bootstrap, Dial: protocol.DialConfig{ClientID: "longhaul-highbdp"}}
	for _, w := range d.o.windows {
		t := topicadmin.Topic{Name: d.o.topicName(w), Partitions: int32(d.o.partitions),
			Configs: map[string]string{"producer.state.batches.to.retain": strconv.Itoa(w)}}
		res, err := topicadmin.Ensure(ctx, cfg, []topicadmin.Topic{t})
		if errors.Is(err, kerr.InvalidConfig) {
			fmt.Fprintf(d.stderr, "highbdp: %s: broker rejected producer.state.batches.to.retain=%d (no KIP-1269?); creating it without\n", t.Name, w)
			t.Configs = nil
			res, err = topicadmin.Ensure(ctx, cfg, []topicadmin.Topic{t})
		}
		if err != nil {
			return err
		}
		if !res[0].Created {
			fmt.Fprintf(d.stderr, "highbdp: topic %s exists (%d partitions); its window is whatever it was configured with\n", t.Name, res[0].Partitions)
		}
	}
	return nil
}

// measureRTT returns the fastest of five Metadata round trips to addr.
func measureRTT(ctx context.Context, addr string) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	c, err := protocol.Dial(ctx, addr, protocol.DialConfig{ClientID: "longhaul-highbdp"})
	if err != nil {
		return 0, err
	}
	defer c.Close()
	best := time.Duration(-1)
	for range 5 {
		start := time.Now()
		if _, err := protocol.Metadata(ctx, c, []string{}); err != nil {
			return 0, err
		}
		if rt := time.Since(start); best < 0 || rt < best {
			best = rt
		}
	}
	return best, nil
}
