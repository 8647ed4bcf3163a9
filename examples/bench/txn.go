package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/longhaul-kafka/longhaul/internal/kafkatest"
	"github.com/longhaul-kafka/longhaul/producer"
)

// Transactional cases (--txn): every client is transactional and runs one
// transaction after another, each producing as fast as the client accepts
// records for the transaction's duration and then committing (the Java
// tool's --transaction-duration-ms loop, and what a pipeline committing
// every T does). Throughput counts committed records only: for the Go
// clients the records of each transaction whose commit returned, over the
// time between the first and the last commit inside the measured window
// (whole transactions, so a window edge cuts none); for java the growth of
// the topic's last stable offsets (read_committed ListOffsets, sampled every
// 10 ms) between its first and last change inside the window, less one
// transaction marker per partition and commit. Commit latency is
// CommitTransaction's (kgo: Flush and EndTransaction), from the end of
// producing to the commit's return: the records still buffered draining,
// then EndTxn; java does not report it.

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
	l.mu.Lock()
	defer l.mu.Unlock()
	l.n += records
	l.at = append(l.at, time.Now())
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
	p     *producer.Producer
	topic string
	value []byte
}

func newLonghaulTxn(cfg clientConfig, k clientKind, id string) (*lhTxnLoop, error) {
	idle := producer.IdleRearm(5 * time.Minute) // the default
	if k.idleRearm > 0 {
		idle = producer.IdleRearm(k.idleRearm)
	}
	p, err := producer.New(
		idle,
		producer.BootstrapServers(cfg.addr),
		producer.BatchSize(cfg.batchSize),
		producer.Linger(cfg.linger),
		producer.BufferMemory(cfg.bufferBytes),
		producer.MaxRequestSize(cfg.requestCap()),
		producer.MaxInFlightRequestsPerConnection(cfg.maxInFlight),
		producer.TransactionalID(id),
	)
	if err != nil {
		return nil, err
	}
	ctx, cancel := waitCtx(time.Minute)
	defer cancel()
	if err := p.InitTransactions(ctx); err != nil {
		p.Close(ctx)
		return nil, fmt.Errorf("longhaul InitTransactions: %w", err)
	}
	return &lhTxnLoop{p: p, topic: cfg.topics[0], value: make([]byte, cfg.recordSize)}, nil
}

func (l *lhTxnLoop) txn(ctx context.Context, d time.Duration, stop *atomic.Bool) (int64, time.Duration, error) {
	if err := l.p.BeginTransaction(); err != nil {
		return 0, 0, err
	}
	var n int64
	end := time.Now().Add(d)
	for time.Now().Before(end) && !stop.Load() {
		l.p.Produce(ctx, &producer.Record{Topic: l.topic, Value: l.value}, nil)
		n++
	}
	began := time.Now()
	err := l.p.CommitTransaction(ctx)
	return n, time.Since(began), err
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
	b, err := tg.start(brokerSpec{rtt: rtt, topic: "txn", topics: 1, partitions: parts, window: k.window})
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
	if k.kgo {
		loop, err = newKgoTxn(cfg, id)
	} else {
		loop, err = newLonghaulTxn(cfg, k, id)
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
	if commits < 1 {
		res.err = fmt.Errorf("fewer than 2 commits in the %v window: make --duration longer than 2 transactions", o.duration)
	}
	return res
}

// runJavaTxnCase measures ProducerPerformance with --transactional-id
// and --transaction-duration-ms.
func runJavaTxnCase(ctx context.Context, kt *kafkaTarget, o options, rtt time.Duration, parts, batch int, d time.Duration, k clientKind, seq int) txnResult {
	res := txnResult{rtt: rtt, partitions: parts, batch: batch, txn: d, client: k, producing: -1}
	w := k.perPartitionWindow(o.maxInFlight)
	res.boundMBps = boundBytesPerSec(0, w, batch, rtt, parts) / 1e6
	b, err := kt.start(brokerSpec{rtt: rtt, topic: "txn", partitions: parts, window: k.window})
	if err != nil {
		res.err = fmt.Errorf("broker: %w", err)
		return res
	}
	defer b.stop()
	perf := kafkatest.JavaPerf{
		Topic: b.topics[0].name, NumRecords: javaRecords, RecordSize: o.recordSize, Bootstrap: b.addr,
		Props: map[string]string{
			"batch.size":                            strconv.Itoa(batch),
			"linger.ms":                             strconv.FormatInt(o.linger.Milliseconds(), 10),
			"buffer.memory":                         strconv.FormatInt(bufferFor(rtt, parts, w, batch, o.bufferFactor), 10),
			"max.in.flight.requests.per.connection": "5",
			"compression.type":                      "none",
		},
	}
	args := append([]string{
		"--transactional-id", fmt.Sprintf("bench-java-%d", seq),
		"--transaction-duration-ms", strconv.FormatInt(d.Milliseconds(), 10),
	}, perf.Args(kt.c)...)
	jp, err := kt.c.StartJavaPerf(args...)
	if err != nil {
		res.err = err
		return res
	}
	defer jp.Stop()
	stable := func() ([]int64, error) {
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		return kt.c.StableOffsets(sctx, b.topics[0].name, int32(parts))
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if done, err := jp.Exited(); done {
			res.err = fmt.Errorf("ProducerPerformance exited early: %v\n%s", err, jp.Stop())
			return res
		}
		offs, err := stable()
		if err == nil && slices.Max(offs) > 0 {
			break
		} else if time.Now().After(deadline) {
			res.err = fmt.Errorf("ProducerPerformance committed nothing within 2 minutes (last error: %v)", err)
			return res
		}
		sleep(ctx, 100*time.Millisecond)
	}
	sleep(ctx, txnWarmup(o, rtt, d))
	// A partition's last stable offset moves once per commit, past the
	// transaction's records and its marker: between the first and the
	// last move inside the window lie whole transactions.
	type move struct {
		at  time.Time
		lso int64
	}
	moves := make([][]move, parts)
	last := make([]int64, parts)
	for i := range last {
		last[i] = -1
	}
	end := time.Now().Add(o.duration)
	for time.Now().Before(end) && ctx.Err() == nil {
		offs, err := stable()
		if err != nil {
			res.err = err
			return res
		}
		now := time.Now()
		for p, n := range offs {
			if n != last[p] {
				if last[p] >= 0 {
					moves[p] = append(moves[p], move{now, n})
				}
				last[p] = n
			}
		}
		sleep(ctx, 10*time.Millisecond)
	}
	if done, err := jp.Exited(); done {
		res.err = fmt.Errorf("ProducerPerformance exited during the case: %v\n%s", err, jp.Stop())
		return res
	}
	for p, ms := range moves {
		if len(ms) < 2 {
			continue // a partition the sticky partitioner left alone
		}
		first, lastMove := ms[0], ms[len(ms)-1]
		commits := len(ms) - 1
		records := lastMove.lso - first.lso - int64(commits) // one marker per commit
		res.recsPerSec += float64(records) / lastMove.at.Sub(first.at).Seconds()
		if p == 0 || commits > res.commits {
			res.commits = commits
		}
	}
	if res.commits < 1 {
		res.err = fmt.Errorf("no partition's last stable offset moved twice in the %v window: make --duration longer than 2 transactions", o.duration)
		return res
	}
	res.mbps = res.recsPerSec * float64(o.recordSize) / 1e6
	return res
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
	return status
}

func printTxnRow(w io.Writer, r txnResult) {
	name := fmt.Sprintf("%s #%d", r.client.name, r.round)
	errs := ""
	if r.err != nil {
		errs = r.err.Error()
	}
	p50, p99, prod := "-", "-", "-"
	if !r.client.java && r.commits > 0 {
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
				if !k.java {
					p50 = append(p50, float64(r.p50)/1e6)
					p99 = append(p99, float64(r.p99)/1e6)
					prod = append(prod, 100*r.producing)
				}
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
