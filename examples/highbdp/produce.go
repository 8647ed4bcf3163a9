package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/longhaul-kafka/longhaul/internal/logcheck"
	"github.com/longhaul-kafka/longhaul/producer"
)

// interruptGrace is how long Close may keep delivering after an interrupt
// before the rest fails; tests shorten it.
var interruptGrace = 5 * time.Second

// result is one topic's run.
type result struct {
	topic      string
	window     int // configured producer.state.batches.to.retain
	recordSize int // value bytes per record
	produced   int // records passed to Produce
	acked      int64
	failed     int64
	firstErr   error
	elapsed    time.Duration

	learnedMin, learnedMax int // producer's limit over the partitions
	maxInFlight            int // broker-side (embedded) or sampled producer-side
	logCheck               string
}

func (r result) mbps() float64 {
	if r.elapsed <= 0 {
		return 0
	}
	return float64(r.acked) * float64(r.recordSize) / 1e6 / r.elapsed.Seconds()
}

func (r result) rps() float64 {
	if r.elapsed <= 0 {
		return 0
	}
	return float64(r.acked) / r.elapsed.Seconds()
}

func (r result) undelivered() string {
	s := fmt.Sprintf("%s: %d of %d produced records acknowledged, %d not delivered", r.topic, r.acked, r.produced, int64(r.produced)-r.acked)
	if r.firstErr != nil {
		s += fmt.Sprintf(" (first error: %v)", r.firstErr)
	}
	return s
}

// produce runs the workload against one window's topic with a producer of
// its own, so each run starts from the default window of 5 and learns.
func (d *demo) produce(ctx context.Context, window int) (result, error) {
	o := d.o
	res := result{topic: o.topicName(window), window: window, recordSize: o.recordSize}
	p, err := producer.New(
		producer.BootstrapServers(d.bootstrap...),
		producer.ClientID("longhaul-highbdp"),
		producer.MaxInFlightRequestsPerConnection(o.maxInFlight),
		producer.BatchSize(o.batchSize),
		producer.Linger(o.linger),
	)
	if err != nil {
		return res, err
	}
	if d.cluster != nil {
		d.cluster.ResetStats()
	}

	var (
		acked, failed atomic.Int64
		errOnce       sync.Once
		firstErr      error
		done          = make(chan struct{})
	)
	cb := func(_ *producer.Record, err error) {
		if err != nil {
			failed.Add(1)
			errOnce.Do(func() { firstErr = err })
			return
		}
		acked.Add(1)
	}

	// The sampler prints progress and, against a real cluster, tracks the
	// most batches in flight the producer reports (the broker's own count
	// is only available from the embedded broker).
	var samplerWG sync.WaitGroup
	maxSeen := 0
	start := time.Now()
	samplerWG.Add(1)
	go func() {
		defer samplerWG.Done()
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		lastPrint := start
		for {
			select {
			case <-done:
				return
			case now := <-tick.C:
				st := p.Stats()
				inflight, limit := 0, 0
				for _, ps := range st.Partitions {
					if ps.Topic == res.topic {
						inflight += ps.InFlight
						maxSeen = max(maxSeen, ps.InFlight)
						limit = max(limit, ps.Limit)
					}
				}
				if d.o.progress > 0 && now.Sub(lastPrint) >= d.o.progress {
					lastPrint = now
					d.progressLine(res.topic, acked.Load(), now.Sub(start), inflight, limit)
				}
			}
		}
	}()

	payload := make([]byte, o.recordSize)
	for i := range payload[8:] {
		payload[8+i] = byte('a' + i%26)
	}
	for i := 0; i < o.records && ctx.Err() == nil; i++ {
		v := make([]byte, len(payload))
		copy(v, payload)
		// The sequence number lets the log check prove order and
		// exactly-once; the rest of the value is shared filler.
		binary.BigEndian.PutUint64(v, uint64(i))
		r := &producer.Record{Topic: res.topic, Value: v}
		r.SetPartition(int32(i % o.partitions))
		p.Produce(ctx, r, cb)
		res.produced++
	}
	var runErr error
	if ctx.Err() == nil {
		runErr = p.Flush(ctx)
	}
	res.learnedMin, res.learnedMax = 1<<30, 0
	for part := 0; part < o.partitions; part++ {
		l := p.InFlightLimit(res.topic, int32(part))
		res.learnedMin, res.learnedMax = min(res.learnedMin, l), max(res.learnedMax, l)
	}
	closeCtx, cancel := context.WithTimeout(context.Background(), interruptGrace)
	defer cancel()
	if err := p.Close(closeCtx); err != nil && runErr == nil {
		runErr = err
	}
	// After Close, so that records acknowledged in the grace period after an
	// interrupt are counted over the time they took.
	res.elapsed = time.Since(start)
	close(done)
	samplerWG.Wait()
	if d.tty && d.o.progress > 0 {
		fmt.Fprint(d.stderr, "\r\033[K")
	}
	res.acked, res.failed, res.firstErr = acked.Load(), failed.Load(), firstErr
	res.maxInFlight = maxSeen
	if d.cluster != nil {
		res.maxInFlight = 0
		for part := 0; part < o.partitions; part++ {
			res.maxInFlight = max(res.maxInFlight, d.cluster.PartitionStats(res.topic, int32(part)).MaxInFlight)
		}
	}
	if ctx.Err() != nil {
		return res, fmt.Errorf("interrupted: %w", ctx.Err())
	}
	if runErr != nil {
		return res, runErr
	}
	if res.failed > 0 {
		return res, fmt.Errorf("%d records failed, first: %w", res.failed, firstErr)
	}
	if d.cluster != nil {
		res.logCheck = d.checkLog(res.topic, res.produced)
	}
	return res, nil
}

// progressLine reports a run in progress; on a terminal it overwrites the
// previous one.
func (d *demo) progressLine(topic string, acked int64, elapsed time.Duration, inflight, limit int) {
	mbps := float64(acked) * float64(d.o.recordSize) / 1e6 / elapsed.Seconds()
	line := fmt.Sprintf("%s: %d/%d records acked, %.2f MB/s, %d batches in flight (limit %d)",
		topic, acked, d.o.records, mbps, inflight, limit)
	if d.tty {
		fmt.Fprintf(d.stderr, "\r\033[K%s", line)
		return
	}
	fmt.Fprintln(d.stderr, line)
}

// checkLog reads the embedded broker's log and checks that every record
// produced is there exactly once and in order within its partition (record
// i goes to partition i mod partitions; its first 8 bytes are i), by
// package logcheck's rules. It returns logOK or what is wrong.
func (d *demo) checkLog(topic string, produced int) string {
	sent := map[int32][]logcheck.Sent{}
	logs := map[int32][]logcheck.Entry{}
	for i := range produced {
		part := int32(i % d.o.partitions)
		sent[part] = append(sent[part], logcheck.Sent{Value: binary.BigEndian.AppendUint64(nil, uint64(i)), Outcome: logcheck.Acked})
	}
	for part := range int32(d.o.partitions) {
		for _, rec := range d.cluster.Records(topic, part) {
			if len(rec.Value) < 8 {
				return fmt.Sprintf("partition %d has a %d-byte record", part, len(rec.Value))
			}
			logs[part] = append(logs[part], logcheck.Entry{Value: rec.Value[:8], Offset: rec.Offset})
		}
	}
	if err := logcheck.Partitions(sent, logs).Err(); err != nil {
		return err.Error()
	}
	return logOK
}

// logOK is checkLog's answer when the log holds every record once, in
// order.
const logOK = "ok"
