package soak

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/longhaul-kafka/longhaul/internal/broker"
	"github.com/longhaul-kafka/longhaul/internal/testkit"
	"github.com/longhaul-kafka/longhaul/producer"
	"github.com/longhaul-kafka/longhaul/protocol"
)

// The cluster: four nodes, node 2 in old-broker mode (Produce <= v13, no
// window field, retains 5), node 3 in Kafka 2.4 mode (InitProducerId <= v2,
// so a bump takes a new producer id; Produce <= v8; retains 5), three
// partitions per topic (partition p starts on node p; node 3 leads only
// what moves there), one topic per window.
const (
	clusterNodes = 4
	oldNode      = 2
	kafka24Node  = 3
	partitions   = 3
)

var topicWindows = []struct {
	name   string
	window int
}{{"w5", 5}, {"w20", 20}, {"w200", 200}}

// Result is the outcome of one soak. Its String is the one-line summary.
type Result struct {
	Seed     uint64
	Duration time.Duration // producing time, final flush and checks excluded
	Records  int           // records produced (every one accepted or rejected through its callback)
	Faults   map[string]int

	Acked, Failed, FateUnknown int // outcomes; FateUnknown counts failures that may be in the log
	// OrderLost counts failures with producer.ErrOrderLost (part of
	// Failed): records the producer refused to write after their
	// successors because the broker had lost its state. Not a violation,
	// but expected to be 0 when every expiry follows an idle period.
	OrderLost int
	// Readback sums the producers' Stats.Readback (Config.ReadBack): the
	// records of unknown fate read-back settled, and those that stayed
	// unknown, by reason.
	Readback producer.ReadbackStats

	// Violations; a clean run has all of them 0.
	Lost             int // acknowledged, not in the log
	Dup              int // in the log more than once
	Reorder          int // a producer's records out of Produce order in a partition
	WindowViolations int // a partition above its window as the broker saw it
	// CallbacksOutOfOrder counts callbacks that ran after the callback of
	// a record produced later to the same partition by the same producer.
	CallbacksOutOfOrder int
	// Stuck counts partitions (per producer) that had records outstanding
	// and no callback for longer than the faults explain (stuck.go).
	Stuck          int
	Phantom        int // failed without FateUnknown, yet in the log
	BadOffset      int // acknowledged at another partition or offset than the log's
	Foreign        int // records in the log the soak did not write
	BadCallbacks   int // records whose callback did not run exactly once
	Unexplained    int // failures without a producer.DeliveryError saying why, or blaming a code never answered to their partition
	MemoryOver     int // producers whose accepted, uncalled-back bytes exceeded 2x buffer.memory
	GoroutinesLeft int // goroutines still running after everything closed
	CloseErrors    int // Flush or Close calls that failed

	MemPeak    float64        // largest accepted-not-called-back bytes / buffer.memory, over producers
	FailCauses map[string]int // failed records by cause (error code or producer error; "(fate_unknown)" marks FateUnknown)
	// StuckSamples counts partition samples the stuck check made with work
	// outstanding; MaxSilent is the longest time without a callback it saw.
	StuckSamples int
	MaxSilent    time.Duration
	MaxInFlight  string // largest in-flight count the broker saw, per topic
	Segments     int    // window-check segments
	// WindowChecks counts partition-segments checked against the broker's
	// in-flight count; WindowStrict those checked at exactly the window in
	// force (no recent shrink unlearned, no abandoned connection).
	WindowChecks, WindowStrict int
	Problems                   []string
}

// String is the summary line: seed, duration, records, faults and the
// violation counts, then details.
func (r Result) String() string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "seed=%d duration=%v records=%d faults=", r.Seed, r.Duration.Round(time.Millisecond), r.Records)
	writeCounts(&sb, r.Faults)
	fmt.Fprintf(&sb, " lost=%d dup=%d reorder=%d window_violations=%d callbacks_out_of_order=%d stuck=%d",
		r.Lost, r.Dup, r.Reorder, r.WindowViolations, r.CallbacksOutOfOrder, r.Stuck)
	fmt.Fprintf(&sb, " phantom=%d bad_offset=%d foreign=%d bad_callbacks=%d unexplained=%d mem_over=%d goroutines_left=%d close_errors=%d",
		r.Phantom, r.BadOffset, r.Foreign, r.BadCallbacks, r.Unexplained, r.MemoryOver, r.GoroutinesLeft, r.CloseErrors)
	fmt.Fprintf(&sb, " acked=%d failed=%d fate_unknown=%d order_lost=%d mem_peak=%.2f max_inflight=%s segments=%d window_strict=%d/%d",
		r.Acked, r.Failed, r.FateUnknown, r.OrderLost, r.MemPeak, r.MaxInFlight, r.Segments, r.WindowStrict, r.WindowChecks)
	if rb := r.Readback; rb != (producer.ReadbackStats{}) {
		fmt.Fprintf(&sb, " readback_written=%d readback_not_written=%d readback_written_twice=%d readback_unknown=%d{not_authorized:%d log_start:%d compacted:%d new_producer_id:%d topic_recreated:%d budget:%d no_fence:%d}",
			rb.Written, rb.NotWritten, rb.WrittenTwice, rb.Unknown, rb.NotAuthorized, rb.LogStart, rb.Compacted, rb.NewProducerID, rb.Recreated, rb.Budget, rb.NoFence)
	}
	fmt.Fprintf(&sb, " stuck_samples=%d max_silent=%v fail_causes=", r.StuckSamples, r.MaxSilent.Round(time.Millisecond))
	writeCounts(&sb, r.FailCauses)
	return sb.String()
}

// writeCounts writes m as {k:v k:v}, keys sorted.
func writeCounts(sb *strings.Builder, m map[string]int) {
	sb.WriteByte('{')
	for i, k := range slices.Sorted(maps.Keys(m)) {
		if i > 0 {
			sb.WriteByte(' ')
		}
		fmt.Fprintf(sb, "%s:%d", k, m[k])
	}
	sb.WriteByte('}')
}

// OK reports whether every check passed.
func (r Result) OK() bool {
	return r.Lost == 0 && r.Dup == 0 && r.Reorder == 0 && r.WindowViolations == 0 &&
		r.CallbacksOutOfOrder == 0 && r.Stuck == 0 && r.Phantom == 0 &&
		r.BadOffset == 0 && r.Foreign == 0 && r.BadCallbacks == 0 && r.Unexplained == 0 &&
		r.MemoryOver == 0 && r.GoroutinesLeft == 0 && r.CloseErrors == 0
}

// Err returns nil if every check passed, else a [*CheckError] with the
// summary line and the first problems.
func (r Result) Err() error {
	if r.OK() {
		return nil
	}
	return &CheckError{Line: r.String(), Problems: r.Problems}
}

// Run runs one soak. It returns an error only if the soak could not run
// (invalid config, cluster or producer start failure); check results are in
// the Result, [Result.Err] turning them into an error. Cancelling ctx ends
// the producing phase early; the final flush, close and checks still run.
// Run leaves nothing running when it returns.
func Run(ctx context.Context, cfg Config) (Result, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return Result{}, err
	}
	if cfg.Seed == 0 {
		cfg.Seed = rand.Uint64()
	}
	res := Result{Seed: cfg.Seed, Faults: map[string]int{}}
	goroutinesBefore := runtime.NumGoroutine()

	var tcs []broker.TopicConfig
	windows := map[string]int{}
	names := make([]string, 0, len(topicWindows))
	for _, tw := range topicWindows {
		tcs = append(tcs, broker.TopicConfig{Name: tw.name, Partitions: partitions, Window: tw.window})
		windows[tw.name] = tw.window
		names = append(names, tw.name)
	}
	c, err := broker.Start(broker.Config{Nodes: clusterNodes, Topics: tcs, OldNodes: []int32{oldNode},
		Kafka24Nodes: []int32{kafka24Node}, RTT: cfg.RTT})
	if err != nil {
		return res, fmt.Errorf("soak: starting the cluster: %w", err)
	}
	c.SetRTT(1, 2*cfg.RTT)
	c.SetRTT(2, cfg.RTT/2)

	maxRTT := 2 * cfg.RTT
	grace := 8*maxRTT + 250*time.Millisecond
	w := newWindowTracker(c, grace, windows, partitions, []int32{oldNode, kafka24Node}, time.Now())
	prods := make([]*producer.Producer, cfg.Producers)
	books := make([]*book, cfg.Producers)
	live := make([]atomic.Pointer[producer.Producer], cfg.Producers)
	for i := range prods {
		// The window check must know the producer's in-flight batches of
		// every partition on a connection it gives up (see window.go).
		hook := &lossHook{onLoss: func(node int32, at time.Time) {
			if p := live[i].Load(); p != nil {
				w.connLost(i, node, at, inflightOn(p, node))
			}
		}}
		p, err := producer.New(
			producer.BootstrapServers(c.Addr()),
			producer.ClientID(fmt.Sprintf("soak-%d", i)),
			producer.MaxInFlightRequestsPerConnection(256),
			producer.BatchSize(1024),
			producer.Linger(2*time.Millisecond),
			producer.IdleRearm(idleRearm), // expireIdle waits longer than this
			producer.BufferMemory(cfg.BufferMemory),
			producer.MaxRequestSize(int(min(cfg.BufferMemory, 1<<20))),
			producer.RequestTimeout(cfg.RequestTimeout),
			producer.DeliveryTimeout(cfg.DeliveryTimeout),
			producer.RetryBackoff(10*time.Millisecond),
			producer.RetryBackoffMax(retryBackoffMax),
			producer.MetadataMaxAge(2*time.Second),
			producer.Logger(cfg.Logger.With("producer", i)),
			producer.Hooks(hook),
			producer.ReadBack(cfg.ReadBack),
		)
		if err != nil {
			for _, q := range prods[:i] {
				q.Close(context.Background())
			}
			c.Close()
			return res, fmt.Errorf("soak: producer %d: %w", i, err)
		}
		prods[i], books[i] = p, &book{}
		live[i].Store(p)
	}
	w.views = func() []map[tp]view { return producerViews(prods) }

	sched := &scheduler{
		cfg: cfg, c: c, rng: rand.New(rand.NewPCG(cfg.Seed, 0x50a1c)), log: cfg.Logger,
		w: w, grace: grace,
		nodes: clusterNodes, topics: names, parts: partitions, old: map[int32]bool{oldNode: true},
		producers: prods, pause: &sync.RWMutex{}, faults: res.Faults,
		k24: map[int32]bool{kafka24Node: true}, answered: map[tp]map[int16]bool{},
		watch: newStuckWatch(cfg.RequestTimeout, maxRTT, books, names),
	}

	sched.w.snapshot = func(p tp) string { return producersView(prods, p) }

	start := time.Now()
	end := start.Add(cfg.Duration)
	var stop atomic.Bool
	var wg sync.WaitGroup
	for i := range prods {
		wg.Add(1)
		go func() {
			defer wg.Done()
			produceLoop(prods[i], books[i], i, names, cfg, sched.pause, &stop)
		}()
	}
	sched.run(ctx, end)
	stop.Store(true)
	wg.Wait()
	res.Duration = time.Since(start)

	// Final: flush and close, then read everything back.
	fctx, cancel := context.WithTimeout(context.Background(), cfg.DeliveryTimeout+30*time.Second)
	for i, p := range prods {
		if err := p.Flush(fctx); err != nil {
			res.CloseErrors++
			res.Problems = append(res.Problems, fmt.Sprintf("producer %d: final flush: %v", i, err))
		}
	}
	for i, p := range prods {
		if err := p.Close(fctx); err != nil {
			res.CloseErrors++
			res.Problems = append(res.Problems, fmt.Sprintf("producer %d: close: %v", i, err))
		}
	}
	cancel()
	for _, p := range prods {
		rb := p.Stats().Readback
		r := &res.Readback
		r.Written += rb.Written
		r.NotWritten += rb.NotWritten
		r.WrittenTwice += rb.WrittenTwice
		r.Unknown += rb.Unknown
		r.NotAuthorized += rb.NotAuthorized
		r.LogStart += rb.LogStart
		r.Compacted += rb.Compacted
		r.NewProducerID += rb.NewProducerID
		r.Recreated += rb.Recreated
		r.Budget += rb.Budget
		r.NoFence += rb.NoFence
	}
	sched.w.closeSegment(time.Now())

	logs := map[tp][]logRecord{}
	for _, t := range names {
		for p := range int32(partitions) {
			l := c.Records(t, p)
			if cfg.doctor != nil {
				l = cfg.doctor(t, p, l)
			}
			logs[tp{t, p}] = l
		}
	}
	c.Close()

	ck := checkRecords(books, names, logs)
	res.Acked, res.Failed, res.FateUnknown = ck.acked, ck.failed, ck.fateUnknown
	res.Lost, res.Dup, res.Reorder = ck.lost, ck.dup, ck.reorder
	res.Phantom, res.BadOffset, res.Foreign = ck.phantom, ck.badOffset, ck.foreign
	res.BadCallbacks, res.Unexplained = ck.badCallbacks, ck.unexplained
	res.CallbacksOutOfOrder = ck.outOfOrder
	res.Problems = append(res.Problems, ck.problems...)
	badCodes, codeProblems := checkCodes(books, sched.answered)
	res.Unexplained += badCodes
	res.Problems = append(res.Problems, codeProblems...)
	res.Stuck, res.StuckSamples, res.MaxSilent = sched.watch.stuck, sched.watch.samples, sched.watch.maxSilent
	res.Problems = append(res.Problems, sched.watch.problems...)
	res.WindowViolations = sched.w.violations
	res.Problems = append(res.Problems, sched.w.problems...)
	res.MaxInFlight = sched.w.summary()
	res.Segments = sched.w.segments
	res.WindowChecks, res.WindowStrict = sched.w.checks, sched.w.strict
	res.FailCauses = map[string]int{}
	for i, b := range books {
		for k, n := range b.causes {
			res.FailCauses[k] += n
		}
		res.Records += len(b.recs)
		res.OrderLost += b.orderLost
		ratio := float64(b.peak) / float64(cfg.BufferMemory)
		res.MemPeak = max(res.MemPeak, ratio)
		if ratio > 2 {
			res.MemoryOver++
			res.Problems = append(res.Problems, fmt.Sprintf("producer %d: %d bytes accepted and not called back, buffer.memory %d", i, b.peak, cfg.BufferMemory))
		}
	}
	res.GoroutinesLeft = testkit.GoroutinesLeft(goroutinesBefore, 10*time.Second)
	if res.GoroutinesLeft > 0 {
		res.Problems = append(res.Problems, fmt.Sprintf("%d goroutines left after Close", res.GoroutinesLeft))
	}
	cfg.Logger.Info("soak: done", "result", res.String())
	return res, nil
}

// produceLoop writes bursts of keyed records until stop, at about cfg.Rate
// records per second. It holds pause for reading during a burst, so the
// scheduler can stop all producers.
func produceLoop(p *producer.Producer, b *book, idx int, topics []string, cfg Config, pause *sync.RWMutex, stop *atomic.Bool) {
	rng := rand.New(rand.NewPCG(cfg.Seed, uint64(idx)+1))
	started := time.Now()
	sent := 0
	for !stop.Load() {
		n := 1 + rng.IntN(100)
		hot := rng.IntN(8) == 0 // now and then a long burst to one key fills a window
		if hot {
			n = 200 + rng.IntN(800)
		}
		ti := rng.IntN(len(topics))
		key := rng.IntN(32)
		pause.RLock()
		for range n {
			if !hot {
				ti, key = rng.IntN(len(topics)), rng.IntN(32)
			}
			size := 16 + rng.IntN(120)
			r := &producer.Record{Topic: topics[ti], Key: fmt.Appendf(nil, "k%02d", key)}
			seq := b.add(uint8(ti), keyPartition(r.Key, partitions), 0)
			r.Value = encodeValue(idx, seq, size)
			setSize(b, seq, r)
			p.Produce(context.Background(), r, func(r *producer.Record, err error) { b.done(seq, r, err, topics) })
			b.accepted(seq, time.Now())
		}
		pause.RUnlock()
		sent += n
		// Pace to cfg.Rate on average.
		if ahead := time.Duration(float64(sent)/float64(cfg.Rate)*float64(time.Second)) - time.Since(started); ahead > 0 {
			time.Sleep(ahead)
		}
	}
}

// setSize charges the record's accounted size (what the producer reserves
// from buffer.memory) to the book, now that the value is known.
func setSize(b *book, seq uint64, r *producer.Record) {
	size := int32(protocol.RecordSize(1<<40, 1<<30, r.Key, r.Value, r.Headers))
	b.mu.Lock()
	b.recs[seq].size = size
	b.outstanding += int64(size)
	b.peak = max(b.peak, b.outstanding)
	b.mu.Unlock()
}

// producersView formats each producer's limit, in-flight count and gate
// for p, for the report of a window violation.
func producersView(prods []*producer.Producer, p tp) string {
	var sb strings.Builder
	for i, pr := range prods {
		for _, ps := range pr.Stats().Partitions {
			if ps.Topic == p.topic && ps.Partition == p.part {
				fmt.Fprintf(&sb, "p%d limit=%d inflight=%d gated=%v leader=%d; ", i, ps.Limit, ps.InFlight, ps.Gated, ps.Leader)
			}
		}
	}
	return sb.String()
}

// producerViews samples every producer's view of every partition.
func producerViews(prods []*producer.Producer) []map[tp]view {
	out := make([]map[tp]view, len(prods))
	for i, p := range prods {
		m := map[tp]view{}
		for _, ps := range p.Stats().Partitions {
			m[tp{ps.Topic, ps.Partition}] = view{limit: ps.Limit, inflight: ps.InFlight, leader: ps.Leader}
		}
		out[i] = m
	}
	return out
}

// inflightOn returns p's in-flight count of each partition it has led by
// node.
func inflightOn(p *producer.Producer, node int32) map[tp]int {
	m := map[tp]int{}
	for _, ps := range p.Stats().Partitions {
		if ps.Leader == node && ps.InFlight > 0 {
			m[tp{ps.Topic, ps.Partition}] = ps.InFlight
		}
	}
	return m
}
