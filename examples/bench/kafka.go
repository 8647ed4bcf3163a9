package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/longhaul-kafka/longhaul/internal/kafkatest"
)

// kafkaTarget runs every case against one Apache Kafka node started by
// internal/kafkatest (the version it pins), stock or with the KIP-1269
// agent: a fresh topic per case, created with the case's window
// (producer.state.batches.to.retain, agent only) and deleted after it, and
// the round trip emulated by the harness proxy in front of the node's
// PROXIED listener, which is the only address clients are given.
type kafkaTarget struct {
	tb    *harnessTB
	c     *kafkatest.Cluster
	agent bool
	seq   atomic.Int64
	log   io.Writer
	// baseFDs is the node's open files once started, before any case.
	baseFDs int
	// direct: cases at RTT 0 connect to the node's DIRECT listener, not
	// through the harness proxy (--direct).
	direct bool
}

// startKafka starts the node. The harness needs java and mvn (javac for
// the agent); without them it is an error here, not a skip.
func startKafka(agent bool, config map[string]string, log io.Writer) (*kafkaTarget, error) {
	kt := &kafkaTarget{tb: newHarnessTB(log), agent: agent, log: log}
	// A deleted topic's files are removed (and closed) after
	// log.segment.delete.delay.ms, 60 s by default: with 10,000 partitions per
	// case, the next case's would exceed the open-files limit meanwhile.
	o := kafkatest.Options{HeapMB: 1024, BrokerConfig: map[string]string{"log.segment.delete.delay.ms": "0"}}
	maps.Copy(o.BrokerConfig, config) // --kafka-config
	if agent {
		o.Agent = kafkatest.AgentOnAll
	}
	err := kt.tb.do(func() { kt.c = kafkatest.Start(kt.tb, o) })
	if err != nil {
		kt.tb.cleanup()
		return nil, fmt.Errorf("starting Kafka %s: %w", kafkatest.Version, err)
	}
	kt.baseFDs = openFiles(kt.c.NodePID(0))
	return kt, nil
}

func (kt *kafkaTarget) close() { kt.tb.cleanup() }

func (kt *kafkaTarget) describe() string {
	link := "RTT by the harness proxy"
	if kt.direct {
		link += " (RTT 0: direct, no proxy)"
	}
	if kt.agent {
		return fmt.Sprintf("Apache Kafka %s with the KIP-1269 agent, one node, JVM heap 1 GiB, %s, a fresh topic per case", kafkatest.Version, link)
	}
	return fmt.Sprintf("Apache Kafka %s (stock: no KIP-1269, every client holds 5 batches in flight per partition), one node, JVM heap 1 GiB, %s, a fresh topic per case", kafkatest.Version, link)
}

// start creates the case's topic and sets the proxy's delay; stop deletes
// the topic.
func (kt *kafkaTarget) start(spec brokerSpec) (*runningBroker, error) {
	if spec.bandwidth > 0 {
		return nil, errors.New("--bandwidth is not supported with --target kafka (the harness proxy has no bandwidth cap)")
	}
	topics := spec.topicList(fmt.Sprintf("%s-%d", spec.topic, kt.seq.Add(1)))
	var cfg map[string]string
	if kt.agent {
		cfg = map[string]string{"producer.state.batches.to.retain": strconv.Itoa(spec.window)}
	}
	deleteTopics := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		var errs []error
		for _, t := range topics {
			if err := kt.c.DeleteTopic(ctx, t.name); err != nil {
				errs = append(errs, err)
			}
		}
		kt.waitFilesClosed(spec.partitions)
		return errors.Join(errs...)
	}
	for _, t := range topics {
		if err := kt.tb.do(func() { kt.c.CreateTopic(kt.tb, t.name, int32(t.partitions), 1, cfg) }); err != nil {
			_ = deleteTopics()
			return nil, err
		}
	}
	kt.c.SetDelay(spec.rtt / 2)
	pid := kt.c.NodePID(0)
	if pid == 0 {
		_ = deleteTopics()
		return nil, errors.New("the Kafka node is not running")
	}
	addr := caseAddr(kt.direct, spec.rtt, kt.c.ProxiedBootstrap(), kt.c.Bootstrap())
	rb := &runningBroker{addr: addr, pid: pid, topics: topics, stop: deleteTopics, logFile: kt.c.LogFile(0)}
	if px := kt.c.Proxy(0); px != nil {
		rb.proxy = px.Stats
	}
	return rb, nil
}

// setPreciseTimers sets how the harness proxy releases delayed bytes for
// the connections of the cases to come (--proxy-timer).
func (kt *kafkaTarget) setPreciseTimers(on bool) {
	if px := kt.c.Proxy(0); px != nil {
		px.SetPreciseTimers(on)
	}
}

// caseAddr is the bootstrap address a case's clients get: the proxied one,
// or with --direct at RTT 0 the node's direct listener. The proxy runs in
// this process: at RTT 0 it adds nothing but two copies of every byte,
// charged to the Go clients' CPU (not to java's) and taken from the cores
// every client shares.
func caseAddr(direct bool, rtt time.Duration, proxied, directAddr string) string {
	if direct && rtt == 0 {
		return directAddr
	}
	return proxied
}

// waitFilesClosed waits, after a case deleted its topics, until the node
// holds at most its starting open files plus a margin (at most 2
// minutes), so that the next case neither pays for the deletion of this
// one's partitions nor runs out of files (each partition holds its log
// segment open). Cases of a few partitions do not wait.
func (kt *kafkaTarget) waitFilesClosed(partitions int) {
	pid := kt.c.NodePID(0)
	if partitions < 1000 || pid == 0 || kt.baseFDs <= 0 {
		return
	}
	start := time.Now()
	limit := kt.baseFDs + 200
	for time.Since(start) < 2*time.Minute {
		if n := openFiles(pid); n < 0 || n <= limit {
			fmt.Fprintf(kt.log, "bench: Kafka closed the deleted partitions' files in %v\n", time.Since(start).Round(100*time.Millisecond))
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	fmt.Fprintf(kt.log, "bench: Kafka still holds %d open files (started with %d) 2 minutes after the deletion\n", openFiles(pid), kt.baseFDs)
}

// openFiles counts pid's open file descriptors, -1 if unknown (not Linux).
func openFiles(pid int) int {
	ents, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
	if err != nil {
		return -1
	}
	return len(ents)
}

// javaRecords is ProducerPerformance's --num-records: more than any case
// sends; the process is killed when the case ends.
const javaRecords = 1 << 40

// runJavaCase measures Kafka's ProducerPerformance (the Java producer) as a
// child JVM over the same workload: it produces unthrottled until killed;
// acknowledged records are the growth of the topic's end offsets (high
// watermark, acks=all) over the measured window, and its CPU is read from
// /proc of its JVM. Latency and allocations are not observable from
// outside and print as "-".
func runJavaCase(ctx context.Context, kt *kafkaTarget, o options, rtt time.Duration, parts, batch int, k clientKind) (result, error) {
	res := result{rtt: rtt, partitions: parts, batch: batch, client: k, allocsRec: -1}
	w := k.perPartitionWindow(o.maxInFlight)
	res.window = w
	res.boundMBps = boundBytesPerSec(0, w, batch, rtt, parts) / 1e6
	b, err := kt.start(brokerSpec{rtt: rtt, topic: "bench", partitions: parts, window: k.window})
	if err != nil {
		return res, fmt.Errorf("broker: %w", err)
	}
	defer b.stop()
	perf := kafkatest.JavaPerf{
		Topic:      b.topics[0].name, // parseFlags refuses java with --topics > 1
		NumRecords: javaRecords,
		RecordSize: o.recordSize,
		Bootstrap:  b.addr,
		Props: map[string]string{
			"batch.size":                            strconv.Itoa(batch),
			"linger.ms":                             strconv.FormatInt(o.linger.Milliseconds(), 10),
			"buffer.memory":                         strconv.FormatInt(bufferFor(rtt, parts, w, batch, o.bufferFactor), 10),
			"max.in.flight.requests.per.connection": "5",
			"compression.type":                      "none",
		},
	}
	if o.rate > 0 {
		return runJavaOpenLoop(ctx, kt, o, perf, rtt, res)
	}
	jp, err := kt.c.StartJavaPerf(perf.Args(kt.c)...)
	if err != nil {
		return res, err
	}
	defer jp.Stop()
	acked := func() (int64, error) {
		actx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		return kt.c.SumEndOffsets(actx, b.topics[0].name, int32(parts))
	}
	// The JVM takes seconds to start: the warm-up begins with the first
	// acknowledged record.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
		if done, err := jp.Exited(); done {
			return res, fmt.Errorf("ProducerPerformance exited early: %v\n%s", err, jp.Stop())
		}
		// A fresh topic's partitions can answer NOT_LEADER for a moment
		// after its metadata shows leaders: retry until the deadline.
		n, err := acked()
		if err == nil && n > 0 {
			break
		}
		if time.Now().After(deadline) {
			return res, fmt.Errorf("ProducerPerformance acknowledged nothing within 2 minutes (last error: %v)", err)
		}
		sleep(ctx, 100*time.Millisecond)
	}
	warm := o.warmupFor(rtt)
	sleep(ctx, warm)
	type javaSample struct {
		at                   time.Time
		acked                int64
		clientCPU, brokerCPU time.Duration
	}
	take := func() (javaSample, error) {
		s := javaSample{clientCPU: procCPU(jp.Pid()), brokerCPU: procCPU(b.pid)}
		var err error
		s.acked, err = acked()
		s.at = time.Now()
		return s, err
	}
	start, err := take()
	if err != nil {
		return res, err
	}
	sleep(ctx, o.duration)
	end, err := take()
	if err != nil {
		return res, err
	}
	if done, err := jp.Exited(); done {
		return res, fmt.Errorf("ProducerPerformance exited during the case: %v\n%s", err, jp.Stop())
	}
	res.seconds = end.at.Sub(start.at).Seconds()
	res.records = end.acked - start.acked
	payload := float64(res.records) * float64(o.recordSize)
	res.mbps = payload / res.seconds / 1e6
	res.recsPerSec = float64(res.records) / res.seconds
	res.cpuPerGB, res.brokerPerG = -1, -1
	if payload > 0 {
		if start.clientCPU >= 0 && end.clientCPU >= 0 {
			res.cpuPerGB = (end.clientCPU - start.clientCPU).Seconds() / (payload / 1e9)
		}
		if start.brokerCPU >= 0 && end.brokerCPU >= 0 {
			res.brokerPerG = (end.brokerCPU - start.brokerCPU).Seconds() / (payload / 1e9)
		}
	}
	return res, nil
}

// runJavaOpenLoop is runJavaCase under --rate: ProducerPerformance offers
// the rate itself (--throughput) for warm-up + duration worth of records
// and reports latency over the records after the warm-up (its " steady
// state" line, --warmup-records). Its latency starts when send() is
// called, not at the intended send time: time send() spends blocked on a
// full buffer.memory is not counted, so its percentiles are a lower bound
// once it falls behind the offered rate (served MB/s then shows that).
// Client CPU is not reported: the JVM's start would be in it.
func runJavaOpenLoop(ctx context.Context, kt *kafkaTarget, o options, perf kafkatest.JavaPerf, rtt time.Duration, res result) (result, error) {
	warm := o.warmupFor(rtt)
	perf.Throughput = max(1, int64(math.Round(o.rate))) // 0 would mean unthrottled
	perf.WarmupRecords = max(1, int64(o.rate*warm.Seconds()))
	perf.NumRecords = perf.WarmupRecords + max(1, int64(o.rate*o.duration.Seconds()))
	jp, err := kt.c.StartJavaPerf(perf.Args(kt.c)...)
	if err != nil {
		return res, err
	}
	defer jp.Stop()
	deadline := time.Now().Add(warm + o.duration + 3*time.Minute) // JVM start and the last acks
	for {
		if done, err := jp.Exited(); done {
			if err != nil {
				return res, err
			}
			break
		}
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
		if time.Now().After(deadline) {
			return res, fmt.Errorf("ProducerPerformance still running %v after it should have finished", time.Since(deadline.Add(-3*time.Minute)))
		}
		sleep(ctx, 100*time.Millisecond)
	}
	s, err := kafkatest.ParsePerfSteadyState(jp.Stop())
	if err != nil {
		return res, fmt.Errorf("ProducerPerformance: %w", err)
	}
	res.records = s.Records
	res.recsPerSec = s.RecordsPerSec
	res.seconds = float64(s.Records) / s.RecordsPerSec
	res.mbps = s.RecordsPerSec * float64(o.recordSize) / 1e6
	res.p50, res.p99, res.p999 = s.P50, s.P99, s.P999
	res.cpuPerGB, res.brokerPerG = -1, -1
	return res, nil
}
