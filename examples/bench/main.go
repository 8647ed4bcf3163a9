// Command bench compares, in one process and one run, the throughput,
// latency, CPU and allocations of producing the same workload through
//
//   - longhaul against a topic whose KIP-1269 window is 5, 20 or 50
//     (lh-w5, lh-w20, lh-w50);
//   - longhaul capped to 5 batches in flight per partition with MaxWindow(5),
//     which is what every client does without KIP-1269 (lh-cap5);
//   - franz-go's kgo with idempotence and its best settings (kgo);
//   - with --target kafka, also Kafka's own Java producer through its
//     ProducerPerformance tool in a child JVM (java);
//
// over an emulated round trip, against longhaul's embedded broker (the
// quick variant, default) or Apache Kafka (--target kafka: with the
// KIP-1269 agent; --target kafka-stock: without). Every embedded case gets
// a fresh broker, by default in a child process (examples/broker, built
// once) so that the client's CPU and allocations are measured apart from
// the broker's; every Kafka case gets a fresh topic on one Kafka node
// started by internal/kafkatest (needs java, javac and mvn). Each case produces 1 KiB records as fast as the client
// accepts them for a fixed time and measures only after a warm-up, so slow
// cases cost no more time than fast ones.
//
// Run the full matrix (80 cases, about 8 minutes) with
//
//	go run ./examples/bench
//
// a few-second smoke run with
//
//	go run ./examples/bench --quick
//
// or a subset, for example
//
//	go run ./examples/bench --rtt 50ms --partitions 1 --batch 16384 --clients lh-w20,kgo
//
// On Apache Kafka, two alternating rounds of each case:
//
//	go run ./examples/bench --target kafka --rtt 0,50ms --batch 16384 --repeat 2 --warmup 2s --duration 5s
//
// go run ./examples/bench -h lists every flag. The table it prints, and
// what each column means, is in README.md beside this file.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/longhaul-kafka/longhaul/internal/cli"
)

func main() { cli.Main(run) }

// options are the parsed flags.
type options struct {
	rtts       []time.Duration
	partitions []int
	// topics is how many topics each case's partitions are spread over.
	topics      int
	batches     []int
	clients     []clientKind
	recordSize  int
	duration    time.Duration
	warmup      time.Duration // 0 = max(1s, 6 RTT)
	linger      time.Duration
	bandwidth   int64
	maxInFlight int
	// bufferFactor scales buffer.memory: factor x what the client can
	// have in flight (RTT > 0).
	bufferFactor float64
	bufferBytes  int64 // --buffer-bytes: buffer.memory for every case, 0 = bufferFor's rule
	brokerMode   string
	// target is where cases run: embedded, kafka (with the KIP-1269
	// agent) or kafka-stock.
	target string
	// repeat is how many rounds of each case run, alternating clients.
	repeat int
	// kafkaConfig are broker properties for the Kafka node (--kafka-config).
	kafkaConfig map[string]string
	// direct: RTT 0 cases on Kafka bypass the harness proxy (--direct).
	direct bool
	// brokerTimes: read Kafka's request log per case (--broker-times).
	brokerTimes bool
	// proxyTimer: how the Kafka target's harness proxy waits for release
	// times: precise, timer, or alternate (--proxy-timer).
	proxyTimer string
	// warmRound: run one round 0 of every client first, printed but left
	// out of the summaries (--warm-round).
	warmRound bool
	// primeKafka is how long a throwaway kgo case runs on a fresh Kafka
	// node before the measured cases.
	primeKafka time.Duration
	// rate, if > 0, is the offered load in records/s (open loop).
	rate float64
	// txns, if set, are transaction durations: every client is
	// transactional (--txn, txn.go).
	txns []time.Duration
	// txnPhases: with txns, trace where each longhaul transaction's time
	// goes (txnphases.go).
	txnPhases bool
	// keyed gives every record an 8-byte key (a counter), so records
	// spread over every partition by hash; else keyless (sticky).
	keyed bool
	// ownValues gives every record its own value buffer (--own-values).
	ownValues bool
	// heap measures the live heap of each case (--heap).
	heap       bool
	shape      bool // --shape: print the request-shape table
	cpuProfile string
	memProfile string
	// memProfileRate is runtime.MemProfileRate when set; 1 records every
	// allocation, which the default sampling misses for small objects.
	memProfileRate int
}

// printShape prints how full each case's requests and batches were.
func printShape(w io.Writer, rs []result) {
	fmt.Fprint(w, "\nRequest shape (measured window):\n\n")
	fmt.Fprintln(w, "| RTT | parts | batch | client | requests/s | batches/request | records/batch |")
	fmt.Fprintln(w, "|---:|---:|---:|---|---:|---:|---:|")
	for _, r := range rs {
		sh := r.shape
		if sh.requests <= 0 || sh.batches <= 0 {
			continue
		}
		name := r.client.name
		if r.round > 0 {
			name += fmt.Sprintf(" #%d", r.round)
		}
		fmt.Fprintf(w, "| %v | %d | %s | %s | %.0f | %.1f | %.1f |\n", r.rtt, r.partitions, fmtBytes(r.batch), name,
			float64(sh.requests)/r.seconds, float64(sh.batches)/float64(sh.requests), float64(sh.records)/float64(sh.batches))
	}
}

// result is one measured case.
type result struct {
	rtt        time.Duration
	partitions int
	batch      int
	client     clientKind
	round      int // 1-based, of --repeat
	seconds    float64
	records    int64
	failed     int64
	firstErr   error
	mbps       float64 // payload (record value) MB/s, 1 MB = 1e6 bytes
	recsPerSec float64
	p50, p99   time.Duration
	p999       time.Duration
	cpuPerGB   float64 // client process CPU seconds per GB of payload, -1 if unknown
	brokerPerG float64 // child broker CPU seconds per GB, -1 if in-process
	allocsRec  float64 // -1 if unknown (java)
	// With --heap: live heap (after a GC) above the case's baseline,
	// while producing (every partition active) and once everything is
	// acknowledged (idle), in bytes; the buffer.memory both clients got.
	heapActive, heapIdle int64
	bufferBytes          int64
	// idleCPU is the client's CPU seconds per second while idle (--heap),
	// measured over idleWindow once everything is acknowledged; -1 if
	// unknown (no getrusage).
	idleCPU   float64
	boundMBps float64    // +Inf when nothing but CPU bounds it
	shape     reqShape   // sent while measured (--shape)
	pipe      pipeWindow // the pipeline while measured (--shape)
	// proxyChunks and proxyLate are the chunks the link proxy wrote while
	// measured and their summed lateness past the emulated delay (Kafka
	// target; 0 chunks when unknown).
	proxyChunks  int64
	proxyLate    time.Duration
	proxyInWrite time.Duration // time the proxy's writes took (linkproxy.Stats.InWrite)
	brokerTimes  brokerTimes   // --broker-times
	window       int           // batches in flight per partition the bound assumes
}

// run parses args, runs the cases and prints the table. It returns the
// exit status: 0, 1 when a case failed, 2 for bad flags.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, err := parseFlags(args, stderr)
	if status, done := cli.FlagsDone("bench", err, stderr); done {
		return status
	}
	dir, err := os.MkdirTemp("", "longhaul-bench-")
	if err != nil {
		fmt.Fprintf(stderr, "bench: %v\n", err)
		return 1
	}
	defer os.RemoveAll(dir)
	var (
		tg    target
		kafka *kafkaTarget
	)
	if o.target == "embedded" {
		bs, err := newBrokerStarter(o.brokerMode, dir)
		if err != nil {
			fmt.Fprintf(stderr, "bench: %v\n", err)
			return 1
		}
		tg = bs
	} else {
		kafka, err = startKafka(o.target == "kafka", o.kafkaConfig, stderr)
		if err != nil {
			fmt.Fprintf(stderr, "bench: %v\n", err)
			return 1
		}
		kafka.direct = o.direct
		if o.brokerTimes {
			ectx, cancel := context.WithTimeout(ctx, time.Minute)
			err := enableRequestLog(ectx, kafka.c.Bootstrap())
			cancel()
			if err != nil {
				fmt.Fprintf(stderr, "bench: --broker-times: %v\n", err)
				return 1
			}
		}
		defer kafka.close()
		tg = kafka
		// A fresh JVM is slow until its JIT has compiled the produce
		// path: the first cases would be measured against a colder
		// broker than the last. Run a throwaway case first.
		po := o
		po.warmup, po.duration, po.rate, po.topics = time.Second, o.primeKafka, 0, 1
		if po.duration > 0 {
			if _, err := runCase(ctx, tg, po, 0, 16, 16384, clientKind{name: "prime", window: 50, kgo: true}); err != nil {
				fmt.Fprintf(stderr, "bench: priming Kafka: %v\n", err)
				return 1
			}
		}
	}
	if o.memProfileRate > 0 {
		runtime.MemProfileRate = o.memProfileRate
	}
	if o.cpuProfile != "" {
		f, err := os.Create(o.cpuProfile)
		if err != nil {
			fmt.Fprintf(stderr, "bench: %v\n", err)
			return 1
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintf(stderr, "bench: %v\n", err)
			return 1
		}
		defer pprof.StopCPUProfile()
	}
	if len(o.txns) > 0 {
		fmt.Fprintf(stdout, "broker: %s\n", tg.describe())
		return runTxnMatrix(ctx, tg, kafka, o, stdout, stderr)
	}
	where := tg.describe()
	if kafka != nil {
		where += "; proxy timer " + o.proxyTimer
		if o.proxyTimer == "alternate" {
			where += " (runtime timer in odd rounds, precise in even ones)"
		}
	}
	if o.topics > 1 {
		where += fmt.Sprintf("; each case's partitions over %d topics", o.topics)
	}
	fmt.Fprintf(stdout, "broker: %s; %d-byte records, linger %v, longhaul max.in.flight.requests.per.connection=%d, bandwidth %s, %v per case after warm-up\n\n",
		where, o.recordSize, o.linger, o.maxInFlight, fmtBandwidth(o.bandwidth), o.duration)
	printHeader(stdout)
	var results []result
	status := 0
	for _, rtt := range o.rtts {
		for _, parts := range o.partitions {
			for _, batch := range o.batches {
				// Rounds alternate the clients and each round starts
				// one client later (A B C, B C A, C A B), so a change
				// in machine load hits every client alike and no
				// client always runs first, against a colder broker.
				first := 1
				if o.warmRound {
					first = 0 // round 0: run and printed, not counted
				}
				for round := first; round <= o.repeat; round++ {
					if kafka != nil {
						kafka.setPreciseTimers(o.proxyTimer == "precise" || o.proxyTimer == "alternate" && round%2 == 0)
					}
					for _, k := range roundOrder(o.clients, max(round, 1)) {
						if ctx.Err() != nil {
							return 1
						}
						var r result
						var err error
						if k.java {
							r, err = runJavaCase(ctx, kafka, o, rtt, parts, batch, k)
						} else {
							r, err = runCase(ctx, tg, o, rtt, parts, batch, k)
						}
						r.round = round
						if err != nil {
							fmt.Fprintf(stderr, "bench: rtt %v, %d partitions, batch %d, %s, round %d: %v\n", rtt, parts, batch, k.name, round, err)
							status = 1
							continue
						}
						if r.records == 0 || r.failed > 0 {
							status = 1
						}
						printRow(stdout, r, o.repeat > 1 || o.warmRound)
						if round > 0 {
							results = append(results, r)
						}
					}
				}
			}
		}
	}
	fmt.Fprintln(stdout)
	printTargets(stdout, results)
	printRatios(stdout, o, results)
	if o.heap {
		printMemory(stdout, o, results)
	}
	printLatency(stdout, o, results)
	if o.shape {
		printShape(stdout, results)
		printPipe(stdout, results)
	}
	if o.brokerTimes {
		printBrokerTimes(stdout, results)
	}
	if o.memProfile != "" {
		if f, err := os.Create(o.memProfile); err == nil {
			_ = pprof.Lookup("allocs").WriteTo(f, 0)
			f.Close()
		}
	}
	return status
}

// runCase measures one client over one broker configuration.
func runCase(ctx context.Context, tg target, o options, rtt time.Duration, parts, batch int, k clientKind) (result, error) {
	res := result{rtt: rtt, partitions: parts, batch: batch, client: k}
	w := k.perPartitionWindow(o.maxInFlight)
	if o.target == "kafka-stock" {
		w = min(w, 5) // stock Kafka keeps 5 batches per producer and partition
	}
	res.window = w
	res.boundMBps = boundBytesPerSec(o.bandwidth, w, batch, rtt, parts) / 1e6

	b, err := tg.start(brokerSpec{rtt: rtt, bandwidth: o.bandwidth, topic: "bench", topics: o.topics, partitions: parts, window: k.window})
	if err != nil {
		return res, fmt.Errorf("broker: %w", err)
	}
	defer b.stop()

	cfg := clientConfig{
		addr:        b.addr,
		topics:      topicNames(b.topics),
		recordSize:  o.recordSize,
		batchSize:   batch,
		linger:      o.linger,
		bufferBytes: cmp.Or(o.bufferBytes, bufferFor(rtt, parts, w, batch, o.bufferFactor)),
		maxInFlight: o.maxInFlight,
		rate:        o.rate,
		keyed:       o.keyed,
		ownValues:   o.ownValues,
		trace:       o.shape,
		heap:        o.heap,
	}
	res.bufferBytes = cfg.bufferBytes
	var base runtime.MemStats
	if o.heap {
		runtime.GC()
		runtime.ReadMemStats(&base)
	}
	var loop produceLoop
	if k.kgo {
		loop, err = newKgo(cfg)
	} else if k.split > 1 {
		loop, err = newSplitLonghaul(cfg, k, parts)
	} else {
		loop, err = newLonghaul(cfg, k)
	}
	if err != nil {
		return res, err
	}
	runtime.GC()
	debug.FreeOSMemory()

	st := new(caseState)
	pctx, stopProducing := context.WithCancel(ctx)
	loopDone := make(chan struct{})
	go func() {
		defer close(loopDone)
		loop.run(pctx, st)
	}()
	sleep(ctx, o.warmupFor(rtt))
	start, shape0 := sample(b.pid, st), loop.shape()
	pipe0, _ := loop.pipe()
	px0 := b.proxyStats()
	var btErr error
	log0 := int64(-1)
	if o.brokerTimes && b.logFile != "" {
		log0 = logSize(b.logFile)
	}
	sleep(ctx, o.duration)
	end, shape1 := sample(b.pid, st), loop.shape()
	pipe1, resp := loop.pipe()
	px1 := b.proxyStats()
	if log0 >= 0 {
		// Lines of requests answered just before the edge may land a
		// moment later; one line more or less in thousands.
		res.brokerTimes, btErr = readBrokerTimes(b.logFile, log0, logSize(b.logFile), end.at.Sub(start.at).Seconds())
	}
	res.proxyChunks, res.proxyLate, res.proxyInWrite = px1.Chunks-px0.Chunks, px1.Late-px0.Late, px1.InWrite-px0.InWrite
	res.shape = reqShape{shape1.requests - shape0.requests, shape1.batches - shape0.batches, shape1.records - shape0.records}
	if o.shape {
		res.pipe = pipeBetween(pipe0, pipe1, resp)
	}
	if o.heap {
		loop.dropFree()
		res.heapActive = liveHeap(base)
	}
	st.stopping.Store(true)
	stopProducing()
	<-loopDone
	if o.heap {
		fctx, cancel := waitCtx(30 * time.Second)
		loop.flush(fctx)
		cancel()
		loop.dropFree()
		// A second collection empties sync.Pool's victim caches (both
		// clients pool buffers): what stays is what a client keeps per
		// partition while idle, as a long-idle service would see it.
		runtime.GC()
		res.heapIdle = liveHeap(base)
		// What an idle client costs per second: its timers, metadata
		// refreshes and any loop that visits idle partitions.
		before := readUsage(0)
		sleep(ctx, idleWindow)
		after := readUsage(0)
		res.idleCPU = -1
		if before.cpu >= 0 && after.cpu >= 0 {
			res.idleCPU = (after.cpu - before.cpu).Seconds() / after.at.Sub(before.at).Seconds()
		}
	}
	loop.close()
	if btErr != nil {
		return res, fmt.Errorf("--broker-times: %w", btErr)
	}

	res.seconds = end.at.Sub(start.at).Seconds()
	res.records = end.acked - start.acked
	res.failed = end.failed - start.failed
	if e := st.firstErr.Load(); e != nil {
		res.firstErr = *e
	}
	payload := float64(res.records) * float64(o.recordSize)
	res.mbps = payload / res.seconds / 1e6
	res.recsPerSec = float64(res.records) / res.seconds
	res.p50 = quantile(start.hist, end.hist, 0.50)
	res.p99 = quantile(start.hist, end.hist, 0.99)
	res.p999 = quantile(start.hist, end.hist, 0.999)
	if payload > 0 {
		res.cpuPerGB = -1
		if end.cpu >= 0 && start.cpu >= 0 {
			res.cpuPerGB = (end.cpu - start.cpu).Seconds() / (payload / 1e9)
		}
		res.brokerPerG = -1
		if end.brokerCPU >= 0 && start.brokerCPU >= 0 {
			res.brokerPerG = (end.brokerCPU - start.brokerCPU).Seconds() / (payload / 1e9)
		}
		res.allocsRec = float64(end.mallocs-start.mallocs) / float64(res.records)
	}
	return res, nil
}

// idleWindow is how long --heap measures an idle client's CPU.
const idleWindow = time.Second

// liveHeap collects garbage and returns the live heap above base. The
// bench's spare records are dropped first (dropFree); records a client
// still holds count for it.
func liveHeap(base runtime.MemStats) int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc) - int64(base.HeapAlloc)
}

// sample reads resource usage together with the case's counters.
func sample(brokerPID int, st *caseState) usage {
	u := readUsage(brokerPID)
	u.failed = st.failed.Load()
	u.hist = st.hist.snapshot()
	u.acked = total(u.hist)
	return u
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// boundBytesPerSec is the physical bound of a case in bytes/s:
// min(link bandwidth, partitions x window x batch.size / RTT), window being
// the batches in flight per partition, already limited by
// max.in.flight.requests.per.connection (one node, one connection, and at
// most one batch per partition per request). +Inf when neither applies
// (RTT 0 and no bandwidth cap).
func boundBytesPerSec(bandwidth int64, window, batch int, rtt time.Duration, partitions int) float64 {
	bound := math.Inf(1)
	if rtt > 0 {
		bound = float64(partitions) * float64(window) * float64(batch) / rtt.Seconds()
	}
	if bandwidth > 0 {
		bound = math.Min(bound, float64(bandwidth))
	}
	return bound
}

// bufferFor sizes buffer.memory (kgo: MaxBufferedBytes) for a case: factor
// (default 2) times what the client can have in flight, so the pipe stays full while latency
// stays about two round trips instead of however long a fixed 32 MiB takes
// to drain over a slow window; 32 MiB (Kafka's default) at RTT 0, and never
// more than 256 MiB. Both clients get the same rule.
func bufferFor(rtt time.Duration, partitions, window, batch int, factor float64) int64 {
	if rtt == 0 {
		return 32 << 20
	}
	b := int64(factor*float64(partitions)) * int64(window) * int64(batch)
	return min(max(b, 256<<10), 256<<20)
}

func fmtBandwidth(bw int64) string {
	if bw == 0 {
		return "uncapped"
	}
	return fmt.Sprintf("%.1f MB/s per direction", float64(bw)/1e6)
}

func printHeader(w io.Writer) {
	fmt.Fprintln(w, "| RTT | parts | batch | client | MB/s | records/s | p50 | p99 | client CPU s/GB | broker CPU s/GB | allocs/rec | bound MB/s | of bound | errors |")
	fmt.Fprintln(w, "|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
}

func printRow(w io.Writer, r result, showRound bool) {
	bound, ratio := "-", "-"
	if !math.IsInf(r.boundMBps, 1) {
		bound = fmt.Sprintf("%.1f", r.boundMBps)
		ratio = fmt.Sprintf("%.0f%%", 100*r.mbps/r.boundMBps)
	}
	broker, client, allocs := "-", "-", "-"
	if r.brokerPerG >= 0 {
		broker = fmt.Sprintf("%.2f", r.brokerPerG)
	}
	if r.cpuPerGB >= 0 {
		client = fmt.Sprintf("%.2f", r.cpuPerGB)
	}
	if r.allocsRec >= 0 {
		allocs = fmt.Sprintf("%.2f", r.allocsRec)
	}
	name := r.client.name
	if showRound {
		name += fmt.Sprintf(" #%d", r.round)
	}
	errs := strconv.FormatInt(r.failed, 10)
	if r.firstErr != nil {
		errs += " (" + r.firstErr.Error() + ")"
	}
	fmt.Fprintf(w, "| %v | %d | %s | %s | %.1f | %.0f | %s | %s | %s | %s | %s | %s | %s | %s |\n",
		r.rtt, r.partitions, fmtBytes(r.batch), name, r.mbps, r.recsPerSec,
		fmtDur(r.p50), fmtDur(r.p99), client, broker, allocs, bound, ratio, errs)
}

func fmtBytes(n int) string {
	if n%1024 == 0 {
		return fmt.Sprintf("%dK", n/1024)
	}
	return strconv.Itoa(n)
}

// printTargets checks the results against the performance targets the
// producer is held to (each line names its target), for the cases that
// were run.
func printTargets(w io.Writer, rs []result) {
	find := func(rtt time.Duration, parts, batch int, client string) *result {
		for i := range rs {
			r := &rs[i]
			if r.rtt == rtt && r.partitions == parts && r.batch == batch && r.client.name == client {
				return r
			}
		}
		return nil
	}
	fmt.Fprintln(w, "Targets:")
	if lh, kg := find(50*time.Millisecond, 1, 16384, "lh-w20"), find(50*time.Millisecond, 1, 16384, "kgo"); lh != nil {
		line := fmt.Sprintf("- RTT 50ms, 1 partition, W=20, 16K: %.1f MB/s = %.0f%% of the %.1f MB/s bound (target >= 90%%)",
			lh.mbps, 100*lh.mbps/lh.boundMBps, lh.boundMBps)
		if kg != nil && kg.mbps > 0 {
			line += fmt.Sprintf(", %.2fx kgo's %.1f MB/s (target >= 3.5x)", lh.mbps/kg.mbps, kg.mbps)
		}
		fmt.Fprintln(w, line)
	}
	for _, batch := range []int{16384, 262144} {
		kg := find(0, 16, batch, "kgo")
		if kg == nil {
			continue
		}
		for _, name := range []string{"lh-w5", "lh-w20", "lh-w50", "lh-cap5"} {
			lh := find(0, 16, batch, name)
			if lh == nil || kg.recsPerSec == 0 || kg.cpuPerGB <= 0 || lh.cpuPerGB < 0 {
				continue
			}
			fmt.Fprintf(w, "- RTT 0, 16 partitions, %s, %s: %.2fx kgo's records/s (target >= 1), CPU/GB %.2fx kgo's (target <= 1)\n",
				fmtBytes(batch), name, lh.recsPerSec/kg.recsPerSec, lh.cpuPerGB/kg.cpuPerGB)
		}
	}
	worst := -1.0
	for _, r := range rs {
		if !r.client.kgo && !r.client.java && r.records > 0 {
			worst = math.Max(worst, r.allocsRec)
		}
	}
	if worst >= 0 {
		fmt.Fprintf(w, "- longhaul allocations per record, worst case run: %.2f (target <= 1)\n", worst)
	}
}

// parseFlags turns the command line into options.
func parseFlags(args []string, stderr io.Writer) (options, error) {
	o := options{}
	fs := cli.NewFlagSet("bench", "Compares longhaul (KIP-1269 windows 5/20/50, capped at 5) with kgo over emulated round trips.\n", stderr)
	rtts := fs.String("rtt", "0,10ms,50ms,150ms", "comma-separated emulated round trips")
	parts := fs.String("partitions", "1,16", "comma-separated partition counts")
	batches := fs.String("batch", "16384,262144", "comma-separated batch.size values in bytes")
	clients := fs.String("clients", "lh-w5,lh-w20,lh-w50,lh-cap5,kgo", "comma-separated clients: lh-w5, lh-w20, lh-w50 (longhaul, topic window 5/20/50), lh-cap5 (longhaul with MaxWindow(5)), lh-w5-nc and lh-w50-nc (lh-w5, lh-w50 without request coalescing: longhaul.coalesce.requests=0), lh-w50x2 (two lh-w50 producers, each with its own connection, on alternate partitions and half the buffer: what several connections per broker could buy), lh-w5-k40 (lh-w5 against the embedded broker behaving as Kafka 4.0: Produce v12, so under -txn the first-batch gate re-arms at every transaction's start; --broker inproc only), kgo, java (Kafka's ProducerPerformance; --target kafka* only, and added to the default there)")
	fs.StringVar(&o.target, "target", "embedded", "where cases run: embedded (longhaul's embedded broker, the quick variant), kafka (Apache Kafka from internal/kafkatest with the KIP-1269 agent) or kafka-stock (without the agent)")
	kafkaConfig := fs.String("kafka-config", "", "with -target kafka*: broker properties for the Kafka node, `k=v,...` (e.g. log.index.size.max.bytes=262144)")
	fs.BoolVar(&o.direct, "direct", false, "with -target kafka*: RTT 0 cases connect to the node's DIRECT listener instead of through the harness proxy, which runs in this process and at RTT 0 only copies bytes (its CPU counts as the Go clients' and not java's, and all share 2 cores)")
	fs.BoolVar(&o.brokerTimes, "broker-times", false, "with -target kafka*: turn Kafka's request logger to DEBUG and print, per case of a Go client, the broker's own time per produce request (total, handler queue, local, response queue, send) and how busy the client's connection kept it; the logging costs broker CPU, so not for headline figures")
	fs.StringVar(&o.proxyTimer, "proxy-timer", "precise", "with -target kafka*: how the harness proxy waits to release delayed bytes: precise (a timerfd, on time to about 0.1 ms), timer (Go's runtime timer, which on Linux wakes in whole milliseconds: up to 1 ms late per direction, as before session 6), or alternate (timer in odd rounds, precise in even ones, to compare them in one run)")
	fs.DurationVar(&o.primeKafka, "prime", 10*time.Second, "with -target kafka*: how long a throwaway kgo case (RTT 0, 16 partitions) warms the fresh broker JVM before the measured cases (0 = none)")
	fs.Float64Var(&o.rate, "rate", 0, "open loop: offer this many `records/s` (latency from the intended send time) instead of producing as fast as the client accepts (java: ProducerPerformance --throughput, its latency from send() over the records after --warmup)")
	fs.BoolVar(&o.warmRound, "warm-round", false, "run a round 0 of every client (in round 1's order) before the measured rounds; its rows print as #0 and are left out of the ratio and other summary tables (on Kafka the first round after the prime runs against a slower broker)")
	fs.IntVar(&o.repeat, "repeat", 1, "rounds of every case, clients alternating within each round")
	fs.IntVar(&o.recordSize, "record", 1024, "record value size in `bytes`")
	fs.IntVar(&o.topics, "topics", 1, "spread each case's partitions over this many topics (as evenly as they go); records go to the topics in turn")
	fs.BoolVar(&o.keyed, "keyed", false, "give every record an 8-byte key (a counter): records spread over every partition by hash (default: keyless, sticky)")
	fs.BoolVar(&o.ownValues, "own-values", false, "give every record its own value buffer (recycled with the record) and write a counter into its first 8 bytes before each produce, as an application serializing each value would; default: every record carries the same value slice, which stays in the CPU cache and spares a client that copies values late (kgo, at request time) the cache misses of reading them")
	fs.BoolVar(&o.shape, "shape", false, "print a request-shape table: produce requests/s, batches per request, records per batch of each case (Go clients)")
	fs.BoolVar(&o.heap, "heap", false, "measure each case's live heap (after a GC) while producing and once idle, and print a memory table")
	fs.DurationVar(&o.duration, "duration", 4*time.Second, "measured time per case, after the warm-up")
	fs.DurationVar(&o.warmup, "warmup", 0, "warm-up per case before measuring (0 = max(1s, 6 x RTT))")
	fs.DurationVar(&o.linger, "linger", 5*time.Millisecond, "linger.ms for both clients")
	fs.Int64Var(&o.bandwidth, "bandwidth", 0, "emulated link cap in `bytes/s` per direction (0 = none)")
	fs.Float64Var(&o.bufferFactor, "buffer-factor", 2, "buffer.memory (kgo: MaxBufferedBytes) at RTT > 0 as a multiple of partitions x window x batch.size, clamped to 256 KiB..256 MiB; 32 MiB at RTT 0")
	fs.Int64Var(&o.bufferBytes, "buffer-bytes", 0, "buffer.memory (kgo: MaxBufferedBytes, and MaxBufferedRecords = this / record size) for every case instead of the rule of --buffer-factor and 32 MiB at RTT 0 (0 = that rule)")
	fs.IntVar(&o.maxInFlight, "max-in-flight", 64, "longhaul max.in.flight.requests.per.connection")
	fs.StringVar(&o.brokerMode, "broker", "child", "where brokers run: child (build examples/broker, run it per case), inproc, or the `path` of an examples/broker binary")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run to `file`")
	fs.StringVar(&o.memProfile, "memprofile", "", "write an allocation profile to `file` at the end")
	fs.IntVar(&o.memProfileRate, "memprofilerate", 0, "runtime.MemProfileRate for --memprofile, set when the run starts (1 = every allocation; 0 = Go's default). Counts can fall short of MemStats; for exact per-call-site counts use go test -memprofilerate=1 on BenchmarkProduce")
	txns := fs.String("txn", "", "comma-separated transaction `durations` (e.g. 100ms,1s): every client is transactional, producing for the duration and then committing, one transaction after another; clients lh-w5, lh-w20, lh-w50, lh-w5-k40, kgo, java (the Java producer in the same loop, examples/bench/javatxn); committed records/s and commit latency (txn.go)")
	fs.BoolVar(&o.txnPhases, "txn-phases", false, "with -txn: trace longhaul's transactions (producer hooks) and print where their time goes: ramp, produce, flush, tail, EndTxn, return, gap, with the link's use in each")
	quick := fs.Bool("quick", false, "a few-second smoke run: RTT 0 and 10ms, 1 partition, 16K batches, lh-w20, lh-cap5, kgo, 300ms per case, in-process broker unless --broker is given")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	switch o.target {
	case "embedded":
	case "kafka", "kafka-stock":
	default:
		return o, fmt.Errorf("-target %q: want embedded, kafka or kafka-stock", o.target)
	}
	switch o.proxyTimer {
	case "precise", "timer", "alternate":
	default:
		return o, fmt.Errorf("-proxy-timer %q: want precise, timer or alternate", o.proxyTimer)
	}
	if set["proxy-timer"] && o.target == "embedded" {
		return o, errors.New("-proxy-timer: needs -target kafka or kafka-stock")
	}
	if *quick {
		defaults := map[string]func(){
			"rtt":        func() { *rtts = "0,10ms" },
			"partitions": func() { *parts = "1" },
			"batch":      func() { *batches = "16384" },
			"clients":    func() { *clients = "lh-w20,lh-cap5,kgo" },
			"duration":   func() { o.duration = 300 * time.Millisecond },
			"warmup":     func() { o.warmup = 200 * time.Millisecond },
			"broker":     func() { o.brokerMode = "inproc" },
		}
		for name, f := range defaults {
			if !set[name] {
				f()
			}
		}
	}
	if o.target != "embedded" && !set["clients"] && o.topics <= 1 {
		// After --quick's defaults, which replace the list; not with
		// --topics > 1: ProducerPerformance writes one topic.
		*clients += ",java"
	}
	var err error
	if o.kafkaConfig, err = parseProps(*kafkaConfig); err != nil {
		return o, err
	}
	if len(o.kafkaConfig) > 0 && o.target == "embedded" {
		return o, errors.New("-kafka-config: needs -target kafka or kafka-stock")
	}
	if o.rtts, err = parseList(*rtts, "rtt", func(s string) (time.Duration, error) {
		if s == "0" {
			return 0, nil
		}
		d, err := time.ParseDuration(s)
		if err == nil && d < 0 {
			err = errors.New("must be >= 0")
		}
		return d, err
	}); err != nil {
		return o, err
	}
	positive := func(s string) (int, error) {
		n, err := strconv.Atoi(s)
		if err == nil && n < 1 {
			err = errors.New("must be >= 1")
		}
		return n, err
	}
	if o.partitions, err = parseList(*parts, "partitions", positive); err != nil {
		return o, err
	}
	if o.batches, err = parseList(*batches, "batch", positive); err != nil {
		return o, err
	}
	if o.clients, err = parseList(*clients, "clients", func(s string) (clientKind, error) {
		for _, k := range allClients {
			if k.name == s {
				return k, nil
			}
		}
		return clientKind{}, errors.New("unknown client")
	}); err != nil {
		return o, err
	}
	for _, k := range o.clients {
		if k.split > 1 && (o.topics > 1 || o.rate > 0 || o.keyed) {
			return o, fmt.Errorf("-clients %s: not with -topics > 1, -rate or -keyed (it places records itself)", k.name)
		}
	}
	switch {
	case o.recordSize < 1:
		return o, fmt.Errorf("-record %d: must be >= 1", o.recordSize)
	case o.duration <= 0:
		return o, fmt.Errorf("-duration %v: must be > 0", o.duration)
	case o.warmup < 0:
		return o, fmt.Errorf("-warmup %v: must be >= 0", o.warmup)
	case o.maxInFlight < 1:
		return o, fmt.Errorf("-max-in-flight %d: must be >= 1", o.maxInFlight)
	case o.bufferFactor <= 0:
		return o, fmt.Errorf("-buffer-factor %v: must be > 0", o.bufferFactor)
	case o.bandwidth < 0:
		return o, fmt.Errorf("-bandwidth %d: must be >= 0", o.bandwidth)
	case o.rate < 0:
		return o, fmt.Errorf("-rate %v: must be >= 0", o.rate)
	case o.repeat < 1:
		return o, fmt.Errorf("-repeat %d: must be >= 1", o.repeat)
	case o.topics < 1:
		return o, fmt.Errorf("-topics %d: must be >= 1", o.topics)
	case o.topics > slices.Min(o.partitions):
		return o, fmt.Errorf("-topics %d: more topics than partitions (%d)", o.topics, slices.Min(o.partitions))
	case o.brokerTimes && o.target == "embedded":
		return o, errors.New("-broker-times: needs -target kafka or kafka-stock")
	case o.direct && o.target == "embedded":
		return o, errors.New("-direct: needs -target kafka or kafka-stock")
	case o.target != "embedded" && o.bandwidth > 0:
		return o, fmt.Errorf("-bandwidth: not supported with -target %s (the harness proxy has no bandwidth cap)", o.target)
	}
	if *txns != "" {
		if o.txns, err = parseList(*txns, "txn", func(s string) (time.Duration, error) {
			d, err := time.ParseDuration(s)
			if err == nil && d < time.Millisecond {
				err = errors.New("must be >= 1ms")
			}
			return d, err
		}); err != nil {
			return o, err
		}
		for _, k := range o.clients {
			if k.kafka40 && (o.target != "embedded" || o.brokerMode != "inproc") {
				return o, fmt.Errorf("-clients %s: needs the embedded broker in this process (--target embedded --broker inproc)", k.name)
			}
			if !txnClient(k) {
				return o, fmt.Errorf("-clients %s: not with -txn (lh-w5, lh-w20, lh-w50, lh-w5-k40, kgo, java)", k.name)
			}
		}
		if o.rate > 0 || o.topics > 1 || o.keyed || o.shape || o.heap || o.brokerTimes || o.bandwidth > 0 {
			return o, errors.New("-txn: not with -rate, -topics, -keyed, -shape, -heap, -broker-times or -bandwidth")
		}
	}
	for _, k := range o.clients {
		if k.kafka40 && len(o.txns) == 0 {
			return o, fmt.Errorf("-clients %s: only with -txn (it measures the gate re-armed at each transaction)", k.name)
		}
		if k.java && o.target == "embedded" {
			return o, errors.New("-clients java: needs -target kafka or kafka-stock (the embedded broker has no Java client runner)")
		}
		if k.java && o.topics > 1 {
			return o, errors.New("-clients java: ProducerPerformance writes one topic; drop it or use -topics 1")
		}
	}
	return o, nil
}

// parseList parses a comma-separated flag value, naming the flag and the
// bad element on error.
func parseList[T any](s, name string, parse func(string) (T, error)) ([]T, error) {
	var out []T
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		v, err := parse(f)
		if err != nil {
			return nil, fmt.Errorf("-%s %q: %v", name, f, err)
		}
		out = append(out, v)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("-%s: empty", name)
	}
	return out, nil
}

// parseProps parses --kafka-config: comma-separated key=value pairs, each
// key once; "" is none.
func parseProps(s string) (map[string]string, error) {
	if s == "" {
		return nil, nil
	}
	out := map[string]string{}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("-kafka-config %q: want key=value", kv)
		}
		if _, dup := out[k]; dup {
			return nil, fmt.Errorf("-kafka-config: %s given twice", k)
		}
		out[k] = v
	}
	return out, nil
}

// roundOrder is clients rotated left by round-1: round 1 keeps the given
// order, round 2 starts with the second client, and so on.
func roundOrder[T any](clients []T, round int) []T {
	if len(clients) == 0 {
		return nil
	}
	k := (round - 1) % len(clients)
	out := make([]T, 0, len(clients))
	out = append(out, clients[k:]...)
	return append(out, clients[:k]...)
}

// warmupFor is the warm-up of a case over rtt: --warmup, or by default
// max(1 s, 6 x RTT), long enough for windows to be learned and filled.
func (o options) warmupFor(rtt time.Duration) time.Duration {
	if o.warmup > 0 {
		return o.warmup
	}
	return max(time.Second, 6*rtt)
}
