// Command quickstart is the smallest complete use of longhaul's producer:
// it produces N keyed records idempotently, waits for every callback, and
// prints where they landed (partition, offset range) and the in-flight
// window the producer learned for each partition from the broker's
// ProduceResponses (KIP-1269).
//
// Run it with
//
//	go run ./examples/quickstart
//
// to start longhaul's embedded broker in-process (a topic with 3
// partitions and producer.state.batches.to.retain=20), or point it at a
// cluster, where a missing topic is created with --partitions:
//
//	go run ./examples/quickstart --bootstrap-server localhost:9092 --topic quickstart
//
// go run ./examples/quickstart -h lists every flag. A bad flag prints what
// is wrong and exits with status 2; undelivered records exit with 1.
// Ctrl-C stops producing, waits up to 5 s for what is in flight, reports
// what was not delivered and exits with 130.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/longhaul-kafka/longhaul/internal/cli"
	"github.com/longhaul-kafka/longhaul/internal/topicadmin"
	"github.com/longhaul-kafka/longhaul/producer"
	"github.com/longhaul-kafka/longhaul/producer/producertest"
)

func main() { cli.Main(run) }

// interruptGrace is how long Close may keep delivering after an interrupt.
var interruptGrace = 5 * time.Second

type options struct {
	bootstrap  string
	topic      string
	records    int
	partitions int
	window     int
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := cli.NewFlagSet("quickstart", "Produces records idempotently and prints partitions, offsets and learned windows.\n", stderr)
	fs.StringVar(&o.bootstrap, "bootstrap-server", "", "`host:port[,...]` of a cluster; empty starts the embedded broker in-process")
	fs.StringVar(&o.topic, "topic", "quickstart", "topic to produce to")
	fs.IntVar(&o.records, "records", 1000, "number of records")
	fs.IntVar(&o.partitions, "partitions", 3, "partitions of the topic when it is created")
	fs.IntVar(&o.window, "window", 20, "embedded broker only: the topic's producer.state.batches.to.retain (>= 5)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	switch {
	case fs.NArg() > 0:
		return o, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	case o.topic == "":
		return o, fmt.Errorf("-topic: must not be empty")
	case o.records < 1:
		return o, fmt.Errorf("-records %d: must be at least 1", o.records)
	case o.partitions < 1 || o.partitions > 1000:
		return o, fmt.Errorf("-partitions %d: must be 1..1000", o.partitions)
	case o.window < 5:
		return o, fmt.Errorf("-window %d: must be at least 5", o.window)
	}
	return o, nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, err := parseFlags(args, stderr)
	if status, done := cli.FlagsDone("quickstart", err, stderr); done {
		return status
	}
	bootstrap, stopBroker, err := connectTo(ctx, o, stdout)
	if err != nil {
		fmt.Fprintf(stderr, "quickstart: %v\n", err)
		if ctx.Err() != nil {
			return cli.ExitInterrupted
		}
		return cli.ExitFailed
	}
	defer stopBroker()

	// The whole client side: a producer, records with callbacks, a flush.
	p, err := producer.New(
		producer.BootstrapServers(bootstrap...),
		producer.ClientID("longhaul-quickstart"),
		// Allow as many requests per connection as the window lets the
		// partitions have in flight; Kafka's default of 5 would cap them.
		producer.MaxInFlightRequestsPerConnection(100),
	)
	if err != nil {
		fmt.Fprintf(stderr, "quickstart: %v\n", err)
		return cli.ExitUsage
	}
	var (
		mu       sync.Mutex
		ranges   = make(map[int32]*offsetRange)
		failed   int
		firstErr error
	)
	onDone := func(r *producer.Record, err error) {
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			if failed++; firstErr == nil {
				firstErr = err
			}
			return
		}
		ranges[r.Partition()] = ranges[r.Partition()].add(r.Offset)
	}
	produced := 0
	for i := 0; i < o.records && ctx.Err() == nil; i++ {
		p.Produce(ctx, &producer.Record{
			Topic: o.topic,
			Key:   fmt.Appendf(nil, "key-%d", i), // the key picks the partition (murmur2, as in Java)
			Value: fmt.Appendf(nil, "record %d from longhaul's quickstart", i),
		}, onDone)
		produced++
	}
	flushErr := p.Flush(ctx)
	stats := p.Stats()
	closeCtx, cancel := context.WithTimeout(context.Background(), interruptGrace)
	defer cancel()
	closeErr := p.Close(closeCtx) // every callback has run when Close returns

	acked := produced - failed
	fmt.Fprintf(stdout, "produced %d records to %s idempotently (producer id %d, epoch %d)\n",
		acked, o.topic, stats.ProducerID, stats.ProducerEpoch)
	for _, ps := range stats.Partitions {
		if ps.Topic != o.topic {
			continue
		}
		line := fmt.Sprintf("partition %d: ", ps.Partition)
		if r := ranges[ps.Partition]; r != nil {
			line += fmt.Sprintf("%d records, offsets %d..%d", r.n, r.first, r.last)
		} else {
			line += "no records"
		}
		fmt.Fprintf(stdout, "%s, learned window %d, %d batches sent\n", line, ps.Limit, ps.BatchesSent)
	}
	switch {
	case ctx.Err() != nil:
		fmt.Fprintf(stdout, "interrupted: %d of %d records delivered, %d not delivered, %d never produced\n",
			acked, o.records, failed, o.records-produced)
		return cli.ExitInterrupted
	case failed > 0:
		fmt.Fprintf(stderr, "quickstart: %d records not delivered; first error: %v\n", failed, firstErr)
		return cli.ExitFailed
	case flushErr != nil || closeErr != nil:
		fmt.Fprintf(stderr, "quickstart: %v\n", errors.Join(flushErr, closeErr))
		return cli.ExitFailed
	}
	return cli.ExitOK
}

// offsetRange is what one partition received.
type offsetRange struct{ first, last, n int64 }

// add extends r (nil for a partition's first record) by one offset.
// Offsets arrive in order within a partition, but -1 (a duplicate that an
// old broker acknowledged without its offset) must not move the range.
func (r *offsetRange) add(off int64) *offsetRange {
	if r == nil {
		r = &offsetRange{first: off, last: off}
	}
	r.n++
	if off >= 0 {
		if r.first < 0 {
			r.first = off
		}
		r.last = max(r.last, off)
	}
	return r
}

// connectTo returns the bootstrap servers: the embedded broker's address,
// started here, or the given cluster's, where the topic is made to exist.
// stop shuts down what was started.
func connectTo(ctx context.Context, o options, stdout io.Writer) (bootstrap []string, stop func(), err error) {
	if o.bootstrap == "" {
		c, err := producertest.Start(1, producertest.Topic{Name: o.topic, Partitions: int32(o.partitions), Window: o.window})
		if err != nil {
			return nil, nil, fmt.Errorf("start embedded broker: %w", err)
		}
		fmt.Fprintf(stdout, "embedded KIP-1269 broker on %s: topic %s, %d partitions, producer.state.batches.to.retain=%d\n",
			c.Addr(), o.topic, o.partitions, o.window)
		return []string{c.Addr()}, func() { c.Close() }, nil
	}
	bootstrap = strings.Split(o.bootstrap, ",")
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	res, err := topicadmin.Ensure(ctx, topicadmin.Config{Bootstrap: bootstrap},
		[]topicadmin.Topic{{Name: o.topic, Partitions: int32(o.partitions)}})
	if err != nil {
		return nil, nil, err
	}
	verb := "exists"
	if res[0].Created {
		verb = "created"
	}
	fmt.Fprintf(stdout, "cluster %s: topic %s %s, %d partitions\n", o.bootstrap, o.topic, verb, res[0].Partitions)
	return bootstrap, func() {}, nil
}
