// Command serve produces records while serving the producer's Prometheus
// metrics on /metrics, so the learned window, throughput and latency can be
// watched (curl, or a Prometheus scraping it) as they happen.
//
// Without --bootstrap-server it starts a fake KIP-1269 cluster
// (producer/producertest) whose topic retains --window batches, so the
// window gauge shows what the producer learned from the broker:
//
//	go run ./examples/serve --listen 127.0.0.1:9464 --duration 30s
//	curl -s 127.0.0.1:9464/metrics | grep longhaul_producer_window
//
// It stops after --duration, or at Ctrl-C.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/longhaul-kafka/longhaul/internal/cli"
	"github.com/longhaul-kafka/longhaul/producer"
	"github.com/longhaul-kafka/longhaul/producer/plugin/lhprom"
	"github.com/longhaul-kafka/longhaul/producer/producertest"
)

func main() { cli.Main(run) }

type options struct {
	listen     string
	bootstrap  string
	topic      string
	partitions int
	window     int
	duration   time.Duration
	recordSize int
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := cli.NewFlagSet("serve", "Produces records while serving the producer's Prometheus metrics on /metrics.\n", stderr)
	var o options
	fs.StringVar(&o.listen, "listen", "127.0.0.1:9464", "`address` to serve /metrics on")
	fs.StringVar(&o.bootstrap, "bootstrap-server", "", "comma-separated Kafka brokers; empty: start a fake KIP-1269 cluster in the process")
	fs.StringVar(&o.topic, "topic", "metrics-demo", "topic to produce to (it must exist on a real cluster)")
	fs.IntVar(&o.partitions, "partitions", 4, "partitions of the fake cluster's topic")
	fs.IntVar(&o.window, "window", 50, "producer.state.batches.to.retain of the fake cluster's topic")
	fs.DurationVar(&o.duration, "duration", 30*time.Second, "how long to produce (0: until Ctrl-C)")
	fs.IntVar(&o.recordSize, "record-size", 1024, "record value size in `bytes`")
	err := fs.Parse(args)
	if err == nil && (fs.NArg() > 0 || o.partitions < 1 || o.window < 1 || o.recordSize < 0) {
		err = errors.New("bad arguments: unexpected argument, or --partitions/--window below 1, or --record-size below 0")
	}
	if status, done := cli.FlagsDone("serve", err, stderr); done {
		return status
	}
	if err := serve(ctx, o, stdout); err != nil {
		fmt.Fprintln(stderr, "serve:", err)
		return 1
	}
	return 0
}

func serve(ctx context.Context, o options, stdout io.Writer) error {
	bootstrap := strings.Split(o.bootstrap, ",")
	if o.bootstrap == "" {
		c, err := producertest.Start(1, producertest.Topic{Name: o.topic, Partitions: int32(o.partitions), Window: o.window})
		if err != nil {
			return err
		}
		defer c.Close()
		bootstrap = []string{c.Addr()}
		fmt.Fprintf(stdout, "fake cluster on %s: topic %s, %d partitions, window %d\n", c.Addr(), o.topic, o.partitions, o.window)
	}

	metrics := lhprom.New()
	reg := prometheus.NewRegistry()
	if err := reg.Register(metrics); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", o.listen)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	defer srv.Close()
	fmt.Fprintf(stdout, "serving http://%s/metrics\n", ln.Addr())

	p, err := producer.New(producer.BootstrapServers(bootstrap...),
		producer.MaxInFlightRequestsPerConnection(100), // at least the window
		producer.Hooks(metrics))
	if err != nil {
		return err
	}
	defer p.Close(context.Background())
	defer metrics.Watch(p)() // buffered_bytes and buffered_records

	if o.duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.duration)
		defer cancel()
	}
	var firstErr atomic.Pointer[error]
	failed := func(_ *producer.Record, err error) {
		// A record refused because ctx ended while Produce waited for
		// buffer.memory is the normal end of the run, not a failure.
		if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
			firstErr.CompareAndSwap(nil, &err)
		}
	}
	value := make([]byte, o.recordSize) // Produce copies it
	for ctx.Err() == nil {
		p.Produce(ctx, &producer.Record{Topic: o.topic, Value: value}, failed)
	}
	flushCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.Flush(flushCtx); err != nil {
		return err
	}
	if err := firstErr.Load(); err != nil {
		return *err
	}
	fmt.Fprintln(stdout, "done")
	return nil
}
