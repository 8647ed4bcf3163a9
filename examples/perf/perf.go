package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/longhaul-kafka/longhaul/internal/broker"
	"github.com/longhaul-kafka/longhaul/internal/perfstat"
	"github.com/longhaul-kafka/longhaul/internal/topicadmin"
	"github.com/longhaul-kafka/longhaul/producer"

	"github.com/longhaul-kafka/longhaul/internal/cli"
)

// interruptGrace is how long Close may keep delivering after an interrupt
// before the rest fails; tests shorten it.
var interruptGrace = 5 * time.Second

// perfTest is one run.
type perfTest struct {
	o      options
	stdout io.Writer
	stderr io.Writer
}

// jsonSummary is what --json prints: Kafka's summary plus what longhaul
// adds.
type jsonSummary struct {
	perfstat.Summary
	Topic         string `json:"topic"`
	FailedRecords int64  `json:"failed_records"`
	NotSent       int64  `json:"not_sent"`              // not produced because of an interrupt
	LearnedWindow int    `json:"learned_window"`        // largest in-flight limit over the partitions
	Interrupted   bool   `json:"interrupted,omitempty"` // Ctrl-C or SIGTERM
	Embedded      bool   `json:"embedded_broker"`
}

func (t *perfTest) run(ctx context.Context) int {
	o := t.o
	progress := t.stdout
	if o.jsonOut {
		progress = t.stderr
	}
	var cluster *broker.Cluster
	bootstrap := o.bootstrap
	if bootstrap == "" {
		c, err := broker.Start(broker.Config{RTT: o.rtt, Topics: []broker.TopicConfig{
			{Name: o.topic, Partitions: int32(o.partitions), Window: o.window}}})
		if err != nil {
			fmt.Fprintf(t.stderr, "perf: start embedded broker: %v\n", err)
			return cli.ExitFailed
		}
		defer c.Close()
		cluster, bootstrap = c, c.Addr()
		fmt.Fprintf(t.stderr, "perf: embedded KIP-1269 broker on %s, topic %s (%d partitions, producer.state.batches.to.retain=%d), round trip %v\n",
			c.Addr(), o.topic, o.partitions, o.window, o.rtt)
	}
	props := make(map[string]string, len(o.props)+2)
	for k, v := range o.props {
		props[k] = v
	}
	props["bootstrap.servers"] = bootstrap
	if _, ok := props["client.id"]; !ok {
		props["client.id"] = "perf-producer-client" // the Java tool's default
	}
	p, err := producer.NewFromProperties(props)
	if err != nil {
		fmt.Fprintf(t.stderr, "perf: %v\n", err)
		var ce *producer.ConfigError
		if errors.As(err, &ce) {
			return cli.ExitUsage
		}
		return cli.ExitFailed
	}
	if cluster == nil {
		if err := t.ensureTopic(ctx, bootstrap); err != nil {
			p.Close(context.Background())
			if ctx.Err() != nil {
				return cli.ExitInterrupted
			}
			fmt.Fprintf(t.stderr, "perf: %v\n", err)
			return cli.ExitFailed
		}
	}

	var (
		failed   atomic.Int64
		errMu    sync.Mutex
		firstErr error
	)
	start := time.Now()
	rec := perfstat.NewRecorder(start)
	cb := func(r *producer.Record, err error) {
		if err != nil {
			failed.Add(1)
			errMu.Lock()
			if firstErr == nil {
				firstErr = err
			}
			errMu.Unlock()
			return
		}
		// Timestamp was set just before Produce: it is the send time.
		rec.Record(time.Since(r.Timestamp), len(r.Value))
	}
	stopReports := t.reportLoop(rec, progress)

	payload := make([]byte, o.recordSize)
	rng := rand.New(rand.NewPCG(uint64(start.UnixNano()), 1))
	for i := range payload {
		payload[i] = byte('A' + rng.IntN(26)) // as the Java tool: random upper-case letters
	}
	th := newThrottler(o.throughput, start)
	var sent int64
	for sent < o.numRecords && ctx.Err() == nil {
		r := &producer.Record{Topic: o.topic, Value: payload, Timestamp: time.Now()}
		p.Produce(ctx, r, cb)
		sent++
		if err := th.wait(ctx, sent); err != nil {
			break
		}
	}
	interrupted := ctx.Err() != nil
	var flushErr error
	if !interrupted {
		flushErr = p.Flush(ctx)
		interrupted = ctx.Err() != nil
	}
	closeCtx, cancel := context.WithTimeout(context.Background(), interruptGrace)
	defer cancel()
	closeErr := p.Close(closeCtx)
	end := time.Now()
	stopReports()

	learned := 0
	for _, ps := range p.Stats().Partitions {
		if ps.Topic == o.topic {
			learned = max(learned, ps.Limit)
		}
	}
	sum := rec.Summary(end)
	if o.jsonOut {
		js := jsonSummary{Summary: sum, Topic: o.topic, FailedRecords: failed.Load(), NotSent: o.numRecords - sent,
			LearnedWindow: learned, Interrupted: interrupted, Embedded: cluster != nil}
		enc := json.NewEncoder(t.stdout)
		if err := enc.Encode(js); err != nil {
			fmt.Fprintf(t.stderr, "perf: %v\n", err)
			return cli.ExitFailed
		}
	} else {
		fmt.Fprintln(t.stdout, sum.String())
	}
	if interrupted {
		fmt.Fprintf(t.stderr, "perf: interrupted: %d of %d records sent and acknowledged, %d failed, %d never sent\n",
			sum.Records, o.numRecords, failed.Load(), o.numRecords-sent)
	}
	if n := failed.Load(); n > 0 {
		fmt.Fprintf(t.stderr, "perf: %d records failed; first error: %v\n", n, firstErr)
	}
	switch {
	case interrupted:
		return cli.ExitInterrupted
	case failed.Load() > 0 || flushErr != nil || closeErr != nil:
		if flushErr != nil || closeErr != nil {
			fmt.Fprintf(t.stderr, "perf: %v\n", errors.Join(flushErr, closeErr))
		}
		return cli.ExitFailed
	}
	return cli.ExitOK
}

// reportLoop prints a progress window every reporting interval until the
// returned function is called.
func (t *perfTest) reportLoop(rec *perfstat.Recorder, w io.Writer) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(t.o.reportEvery)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case now := <-tick.C:
				fmt.Fprintln(w, rec.Window(now).String())
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// ensureTopic creates the topic on a real cluster if it is missing, with
// the broker's default partitions and replication, as auto-creation would.
func (t *perfTest) ensureTopic(ctx context.Context, bootstrap string) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	res, err := topicadmin.Ensure(ctx, topicadmin.Config{Bootstrap: strings.Split(bootstrap, ",")},
		[]topicadmin.Topic{{Name: t.o.topic}})
	if err != nil {
		return err
	}
	if res[0].Created {
		fmt.Fprintf(t.stderr, "perf: created topic %s (%d partitions)\n", t.o.topic, res[0].Partitions)
	}
	return nil
}

// throttler keeps the send rate at or below a target, like the Java tool's
// ThroughputThrottler: after n records it sleeps until n/rate seconds have
// passed since the start.
type throttler struct {
	rate  float64 // records/s; <= 0 = unlimited
	start time.Time
}

func newThrottler(rate float64, start time.Time) *throttler {
	return &throttler{rate: rate, start: start}
}

// wait blocks until n records are within the rate, or ctx is done.
func (th *throttler) wait(ctx context.Context, n int64) error {
	if th.rate <= 0 {
		return nil
	}
	due := th.start.Add(time.Duration(float64(n) / th.rate * float64(time.Second)))
	d := time.Until(due)
	if d < time.Millisecond { // sleeping less is mostly overhead; catch up later
		return nil
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-tm.C:
		return nil
	}
}
