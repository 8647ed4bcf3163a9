package main

import (
	"bufio"
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/longhaul-kafka/longhaul/producer"
)

// Transactional cases (--txn): every client is transactional and runs one
// transaction after another, each producing as fast as the client accepts
// records for the transaction's duration and then committing (what a
// pipeline committing every T does). No client produces while its commit
// runs: the Java producer refuses a send then, and longhaul's Produce
// between CommitTransaction and the next BeginTransaction fails with
// ErrTransactionState; kgo's loop here flushes and ends the transaction
// in the same goroutine. Throughput counts committed records only: the
// records of each transaction whose commit returned, over the time between
// the first and the last commit inside the measured window (whole
// transactions, so a window edge cuts none). Commit latency is
// CommitTransaction's (kgo: Flush and EndTransaction; java:
// commitTransaction, timed by the Java loop in javatxn/TxnLoop.java), from
// the end of producing to the commit's return: the records still buffered
// draining, then EndTxn.

// txnResult is one measured transactional case.
type txnResult struct {
	rtt        time.Duration
	partitions int
	batch      int
	txn        time.Duration // transaction duration
	client     clientKind
	round      int
	recsPerSec float64
	mbps       float64
	boundMBps  float64
	commits    int // transactions committed inside the window
	p50, p99   time.Duration
	// producing is the fraction of a transaction's time spent producing
	// (the rest is the commit), Go clients only; -1 unknown.
	producing float64
	phases    phaseSummary // --txn-phases, longhaul only
	err       error
}

// txnLoop is a transactional client: begin, produce for d, commit, again.
type txnLoop interface {
	// txn runs one transaction of duration d and returns the records
	// it committed and how long the commit took.
	txn(ctx context.Context, d time.Duration, stop *atomic.Bool) (records int64, commit time.Duration, err error)
	close()
}

// commitLog is what a transactional case records per commit: when it
// returned, the records committed so far, and the commit's latency.
type commitLog struct {
	mu      sync.Mutex
	at      []time.Time
	total   []int64
	latency []time.Duration
	produce []time.Duration // time spent producing in each transaction
	n       int64
}

func (l *commitLog) add(records int64, produced, commit time.Duration) {
	l.addAt(time.Now(), records, produced, commit)
}

// addAt records a commit that returned at at.
func (l *commitLog) addAt(at time.Time, records int64, produced, commit time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.n += records
	l.at = append(l.at, at)
	l.total = append(l.total, l.n)
	l.latency = append(l.latency, commit)
	l.produce = append(l.produce, produced)
}

// window returns the committed records/s between the first and the last
// commit within [from, to], the commits after the first, their latencies
// and the fraction of time spent producing.
func (l *commitLog) window(from, to time.Time) (rate float64, commits int, lat []time.Duration, producing float64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	first, last := -1, -1
	for i, at := range l.at {
		if at.Before(from) || at.After(to) {
			continue
		}
		if first < 0 {
			first = i
		}
		last = i
	}
	if first < 0 || last == first {
		return 0, 0, nil, -1
	}
	secs := l.at[last].Sub(l.at[first]).Seconds()
	var prod, com time.Duration
	for i := first + 1; i <= last; i++ {
		lat = append(lat, l.latency[i])
		prod += l.produce[i]
		com += l.latency[i]
	}
	return float64(l.total[last]-l.total[first]) / secs, last - first, lat, prod.Seconds() / (prod + com).Seconds()
}

// percentile returns the q-quantile of ds (nearest rank), 0 for none.
func percentile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// txnWarmup is a transactional case's warm-up: the usual one, and at
// least two transactions, so that the first (which initializes the
// producer id, lazily for kgo) is never measured.
func txnWarmup(o options, rtt, d time.Duration) time.Duration {
	return max(o.warmupFor(rtt), 2*d)
}

// txnClients are the clients --txn accepts.
func txnClient(k clientKind) bool {
	return !k.cap5 && !k.noCoal && k.split <= 1
}

type lhTxnLoop struct {
	p      *producer.Producer
	topic  string
	value  []byte
	phases *txnPhases // nil without --txn-phases
}

func newLonghaulTxn(cfg clientConfig, k clientKind, id string, phases *txnPhases) (*lhTxnLoop, error) {
	opts := []producer.Opt{}
	if phases != nil {
		opts = append(opts, producer.Hooks(phases))
	}
	p, err := producer.New(append(opts,
		producer.BootstrapServers(cfg.addr),
		producer.BatchSize(cfg.batchSize),
		producer.Linger(cfg.linger),
		producer.BufferMemory(cfg.bufferBytes),
		producer.MaxRequestSize(cfg.requestCap()),
		producer.MaxInFlightRequestsPerConnection(cfg.maxInFlight),
		producer.TransactionalID(id),
	)...)
	if err != nil {
		return nil, err
	}
	ctx, cancel := waitCtx(time.Minute)
	defer cancel()
	if err := p.InitTransactions(ctx); err != nil {
		p.Close(ctx)
		return nil, fmt.Errorf("longhaul InitTransactions: %w", err)
	}
	return &lhTxnLoop{p: p, topic: cfg.topics[0], value: make([]byte, cfg.recordSize), phases: phases}, nil
}

func (l *lhTxnLoop) txn(ctx context.Context, d time.Duration, stop *atomic.Bool) (int64, time.Duration, error) {
	if l.phases != nil {
		l.phases.began()
	}
	if err := l.p.BeginTransaction(); err != nil {
		return 0, 0, err
	}
	var n int64
	end := time.Now().Add(d)
	for time.Now().Before(end) && !stop.Load() {
		l.p.Produce(ctx, &producer.Record{Topic: l.topic, Value: l.value}, nil)
		n++
	}
	if l.phases != nil {
		l.phases.produced()
	}
	began := time.Now()
	err := l.p.CommitTransaction(ctx)
	commit := time.Since(began)
	if l.phases != nil {
		l.phases.committed()
	}
	return n, commit, err
}

func (l *lhTxnLoop) close() {
	ctx, cancel := waitCtx(10 * time.Second)
	defer cancel()
	_ = l.p.Close(ctx)
}

type kgoTxnLoop struct {
	cl    *kgo.Client
	value []byte
}

func newKgoTxn(cfg clientConfig, id string) (*kgoTxnLoop, error) {
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(cfg.addr),
		kgo.DefaultProduceTopic(cfg.topics[0]),
		kgo.TransactionalID(id),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(cfg.linger),
		kgo.ProducerBatchMaxBytes(int32(cfg.batchSize)),
		kgo.BrokerMaxWriteBytes(int32(cfg.requestCap())),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.MaxBufferedBytes(int(cfg.bufferBytes)),
		kgo.MaxBufferedRecords(int(cfg.bufferBytes/int64(cfg.recordSize))+1),
		kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)),
		kgo.DisableClientMetrics(),
	)
	if err != nil {
		return nil, fmt.Errorf("kgo: %w", err)
	}
	return &kgoTxnLoop{cl: cl, value: make([]byte, cfg.recordSize)}, nil
}

func (k *kgoTxnLoop) txn(ctx context.Context, d time.Duration, stop *atomic.Bool) (int64, time.Duration, error) {
	if err := k.cl.BeginTransaction(); err != nil {
		return 0, 0, err
	}
	var n int64
	end := time.Now().Add(d)
	for time.Now().Before(end) && !stop.Load() {
		k.cl.Produce(ctx, &kgo.Record{Value: k.value}, nil)
		n++
	}
	began := time.Now()
	err := k.cl.Flush(ctx)
	if err == nil {
		err = k.cl.EndTransaction(ctx, kgo.TryCommit)
	}
	return n, time.Since(began), err
}

func (k *kgoTxnLoop) close() { k.cl.Close() }

// runTxnCase measures one transactional Go client.
func runTxnCase(ctx context.Context, tg target, o options, rtt time.Duration, parts, batch int, d time.Duration, k clientKind, seq int) txnResult {
	res := txnResult{rtt: rtt, partitions: parts, batch: batch, txn: d, client: k, producing: -1}
	w := k.perPartitionWindow(o.maxInFlight)
	if o.target == "kafka-stock" {
		w = min(w, 5)
	}
	res.boundMBps = boundBytesPerSec(0, w, batch, rtt, parts) / 1e6
	b, err := tg.start(brokerSpec{rtt: rtt, topic: "txn", topics: 1, partitions: parts, window: k.window, kafka40: k.kafka40})
	if err != nil {
		res.err = fmt.Errorf("broker: %w", err)
		return res
	}
	defer b.stop()
	cfg := clientConfig{
		addr: b.addr, topics: topicNames(b.topics), recordSize: o.recordSize, batchSize: batch, linger: o.linger,
		bufferBytes: bufferFor(rtt, parts, w, batch, o.bufferFactor), maxInFlight: o.maxInFlight,
	}
	if o.bufferBytes > 0 {
		cfg.bufferBytes = o.bufferBytes
	}
	id := fmt.Sprintf("bench-%s-%d", k.name, seq)
	var loop txnLoop
	var phases *txnPhases
	if k.kgo {
		loop, err = newKgoTxn(cfg, id)
	} else {
		if o.txnPhases {
			phases = &txnPhases{}
		}
		loop, err = newLonghaulTxn(cfg, k, id, phases)
	}
	if err != nil {
		res.err = err
		return res
	}
	defer loop.close()
	var (
		log     commitLog
		stop    atomic.Bool
		loopErr error
		done    = make(chan struct{})
	)
	go func() {
		defer close(done)
		for !stop.Load() {
			began := time.Now()
			n, commit, err := loop.txn(ctx, d, &stop)
			if err != nil {
				loopErr = err
				return
			}
			log.add(n, time.Since(began)-commit, commit)
		}
	}()
	from := time.Now().Add(txnWarmup(o, rtt, d))
	to := from.Add(o.duration)
	sleep(ctx, time.Until(to))
	stop.Store(true)
	<-done
	if loopErr != nil && !errors.Is(loopErr, context.Canceled) {
		res.err = loopErr
		return res
	}
	rate, commits, lat, producing := log.window(from, to)
	res.recsPerSec, res.commits, res.producing = rate, commits, producing
	res.mbps = rate * float64(o.recordSize) / 1e6
	res.p50, res.p99 = percentile(lat, 0.5), percentile(lat, 0.99)
	if phases != nil {
		res.phases = phases.summary(from, to, parts*w)
	}
	if commits < 1 {
		res.err = fmt.Errorf("fewer than 2 commits in the %v window: make --duration longer than 2 transactions", o.duration)
	}
	return res
}

// txnLoopJava is the java client's transactional loop: the Go clients'
// loop with the Java producer, compiled with javac against the cluster's
// classpath once per run (ProducerPerformance does not report commit
// latency).
//
//go:embed javatxn/TxnLoop.java
var txnLoopJava []byte

// javaTxnClasses compiles TxnLoop into a directory once per run.
var javaTxnClasses struct {
	sync.Mutex
	dir string
}

func compileTxnLoop(classpath string) (string, error) {
	javaTxnClasses.Lock()
	defer javaTxnClasses.Unlock()
	if javaTxnClasses.dir != "" {
		return javaTxnClasses.dir, nil
	}
	dir, err := os.MkdirTemp("", "bench-txnloop-")
	if err != nil {
		return "", err
	}
	src := filepath.Join(dir, "TxnLoop.java")
	if err := os.WriteFile(src, txnLoopJava, 0o644); err != nil {
		return "", err
	}
	out, err := exec.Command("javac", "-cp", classpath, "-d", dir, src).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("javac TxnLoop.java: %w\n%s", err, out)
	}
	javaTxnClasses.dir = dir
	return dir, nil
}

// runJavaTxnCase measures the Java producer in TxnLoop, as runTxnCase
// measures a Go client: the same loop, the same commit log.
func runJavaTxnCase(ctx context.Context, kt *kafkaTarget, o options, rtt time.Duration, parts, batch int, d time.Duration, k clientKind, seq int) txnResult {
	res := txnResult{rtt: rtt, partitions: parts, batch: batch, txn: d, client: k, producing: -1}
	w := k.perPartitionWindow(o.maxInFlight)
	res.boundMBps = boundBytesPerSec(0, w, batch, rtt, parts) / 1e6
	classes, err := compileTxnLoop(kt.c.Classpath())
	if err != nil {
		res.err = err
		return res
	}
	b, err := kt.start(brokerSpec{rtt: rtt, topic: "txn", partitions: parts, window: k.window})
	if err != nil {
		res.err = fmt.Errorf("broker: %w", err)
		return res
	}
	defer b.stop()
	args := []string{"-Xms1g", "-Xmx1g", "-XX:+UseG1GC", "-cp", kt.c.Classpath() + string(os.PathListSeparator) + classes, "TxnLoop",
		b.addr, b.topics[0].name, strconv.Itoa(o.recordSize), strconv.FormatInt(d.Milliseconds(), 10), fmt.Sprintf("bench-java-%d", seq),
		"batch.size=" + strconv.Itoa(batch),
		"linger.ms=" + strconv.FormatInt(o.linger.Milliseconds(), 10),
		"buffer.memory=" + strconv.FormatInt(bufferFor(rtt, parts, w, batch, o.bufferFactor), 10),
		"max.in.flight.requests.per.connection=5",
		"compression.type=none",
	}
	cmd := exec.Command("java", args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		res.err = err
		return res
	}
	if err := cmd.Start(); err != nil {
		res.err = fmt.Errorf("java TxnLoop: %w", err)
		return res
	}
	var log commitLog
	first := make(chan struct{})
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		sc := bufio.NewScanner(stdout)
		once := sync.Once{}
		for sc.Scan() {
			var ns, records, produced, commit int64
			if n, _ := fmt.Sscanf(sc.Text(), "commit %d %d %d %d", &ns, &records, &produced, &commit); n != 4 {
				continue
			}
			log.addAt(time.Unix(0, ns), records, time.Duration(produced), time.Duration(commit))
			once.Do(func() { close(first) })
		}
	}()
	defer func() {
		_ = cmd.Process.Kill()
		<-exited
		_ = cmd.Wait()
	}()
	select {
	case <-first:
	case <-exited:
		res.err = fmt.Errorf("java TxnLoop exited before its first commit:\n%s", tail(stderr.String(), 20))
		return res
	case <-time.After(2 * time.Minute):
		res.err = fmt.Errorf("java TxnLoop committed nothing within 2 minutes:\n%s", tail(stderr.String(), 20))
		return res
	case <-ctx.Done():
		res.err = ctx.Err()
		return res
	}
	from := time.Now().Add(txnWarmup(o, rtt, d))
	to := from.Add(o.duration)
	sleep(ctx, time.Until(to))
	select {
	case <-exited:
		res.err = fmt.Errorf("java TxnLoop exited during the case:\n%s", tail(stderr.String(), 20))
		return res
	default:
	}
	rate, commits, lat, producing := log.window(from, to)
	res.recsPerSec, res.commits, res.producing = rate, commits, producing
	res.mbps = rate * float64(o.recordSize) / 1e6
	res.p50, res.p99 = percentile(lat, 0.5), percentile(lat, 0.99)
	if commits < 1 {
		res.err = fmt.Errorf("fewer than 2 commits in the %v window: make --duration longer than 2 transactions", o.duration)
	}
	return res
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(len(lines)-n, 0):], "\n")
}

// runTxnMatrix runs every transactional case, clients alternating and
// rotating per round, and prints the rows and the summary.
func runTxnMatrix(ctx context.Context, tg target, kt *kafkaTarget, o options, stdout, stderr io.Writer) int {
	fmt.Fprintf(stdout, "transactional clients: each transaction produces for its duration, then commits; committed records only; %d-byte records, linger %v\n\n", o.recordSize, o.linger)
	fmt.Fprintln(stdout, "| RTT | parts | batch | txn | client | records/s | MB/s | of bound | commits | commit p50 | commit p99 | producing | error |")
	fmt.Fprintln(stdout, "|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---|")
	var rs []txnResult
	status, seq := 0, 0
	for _, rtt := range o.rtts {
		for _, parts := range o.partitions {
			for _, batch := range o.batches {
				for _, d := range o.txns {
					first := 1
					if o.warmRound {
						first = 0
					}
					for round := first; round <= o.repeat; round++ {
						for _, k := range roundOrder(o.clients, max(round, 1)) {
							if ctx.Err() != nil {
								return 1
							}
							seq++
							var r txnResult
							if k.java {
								r = runJavaTxnCase(ctx, kt, o, rtt, parts, batch, d, k, seq)
							} else {
								r = runTxnCase(ctx, tg, o, rtt, parts, batch, d, k, seq)
							}
							r.round = round
							if r.err != nil {
								status = 1
							}
							printTxnRow(stdout, r)
							if round > 0 && r.err == nil {
								rs = append(rs, r)
							}
						}
					}
				}
			}
		}
	}
	printTxnRatios(stdout, o, rs)
	if javaTxnClasses.dir != "" {
		_ = os.RemoveAll(javaTxnClasses.dir)
		javaTxnClasses.dir = ""
	}
	if o.txnPhases {
		var rows []phaseRow
		for _, r := range rs {
			if r.phases.n > 0 {
				rows = append(rows, phaseRow{parts: r.partitions, txn: r.txn, client: r.client.name, round: r.round, s: r.phases})
			}
		}
		printPhases(stdout, rows)
	}
	return status
}

func printTxnRow(w io.Writer, r txnResult) {
	name := fmt.Sprintf("%s #%d", r.client.name, r.round)
	errs := ""
	if r.err != nil {
		errs = r.err.Error()
	}
	p50, p99, prod := "-", "-", "-"
	if r.commits > 0 {
		p50, p99 = fmtDur(r.p50), fmtDur(r.p99)
		prod = fmt.Sprintf("%.0f %%", 100*r.producing)
	}
	fmt.Fprintf(w, "| %v | %d | %s | %v | %s | %.0f | %.1f | %.0f %% | %d | %s | %s | %s | %s |\n",
		r.rtt, r.partitions, fmtBytes(r.batch), r.txn, name, r.recsPerSec, r.mbps, 100*r.mbps/r.boundMBps, r.commits, p50, p99, prod, errs)
}

// printTxnRatios summarises the rounds: records/s over kgo's and java's
// of the same round, the fraction of the bound, commit latency.
func printTxnRatios(w io.Writer, o options, rs []txnResult) {
	type group struct {
		rtt   time.Duration
		parts int
		batch int
		txn   time.Duration
	}
	var order []group
	by := map[group]map[string]map[int]txnResult{}
	for _, r := range rs {
		g := group{r.rtt, r.partitions, r.batch, r.txn}
		if by[g] == nil {
			by[g] = map[string]map[int]txnResult{}
			order = append(order, g)
		}
		if by[g][r.client.name] == nil {
			by[g][r.client.name] = map[int]txnResult{}
		}
		by[g][r.client.name][r.round] = r
	}
	if len(order) == 0 {
		return
	}
	fmt.Fprintf(w, "\nTransactional ratios over %d round(s): mean (min-max); x kgo and x java divide committed records/s by theirs in the same round:\n\n", o.repeat)
	fmt.Fprintln(w, "| RTT | parts | batch | txn | client | records/s | x kgo | x java | of bound | commit p50 | commit p99 | producing |")
	fmt.Fprintln(w, "|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|")
	for _, g := range order {
		for _, k := range o.clients {
			runs := by[g][k.name]
			if len(runs) == 0 {
				continue
			}
			var rps, xKgo, xJava, ofBound, p50, p99, prod []float64
			for round, r := range runs {
				rps = append(rps, r.recsPerSec)
				ofBound = append(ofBound, 100*r.mbps/r.boundMBps)
				if kg, ok := by[g]["kgo"][round]; ok && kg.recsPerSec > 0 {
					xKgo = append(xKgo, r.recsPerSec/kg.recsPerSec)
				}
				if j, ok := by[g]["java"][round]; ok && j.recsPerSec > 0 {
					xJava = append(xJava, r.recsPerSec/j.recsPerSec)
				}
				p50 = append(p50, float64(r.p50)/1e6)
				p99 = append(p99, float64(r.p99)/1e6)
				prod = append(prod, 100*r.producing)
			}
			ms := func(s spread) string {
				if f := s.format(0); f != "-" {
					return f + " ms"
				}
				return "-"
			}
			pct := func(s spread) string {
				if f := s.format(0); f != "-" {
					return f + " %"
				}
				return "-"
			}
			fmt.Fprintf(w, "| %v | %d | %s | %v | %s | %s | %s | %s | %s | %s | %s | %s |\n",
				g.rtt, g.parts, fmtBytes(g.batch), g.txn, k.name, spreadOf(rps).format(0),
				spreadOf(xKgo).format(2), spreadOf(xJava).format(2), pct(spreadOf(ofBound)),
				ms(spreadOf(p50)), ms(spreadOf(p99)), pct(spreadOf(prod)))
		}
	}
}
