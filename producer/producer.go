package producer

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/longhaul-kafka/longhaul/inflight"
	"github.com/longhaul-kafka/longhaul/internal/testhooks"
	"github.com/longhaul-kafka/longhaul/protocol"
)

// Producer is an idempotent Kafka producer. It is safe for concurrent use.
// Create one with [New] or [NewFromProperties] and Close it when done.
type Producer struct {
	cfg     config
	log     *slog.Logger
	limiter *inflight.Limiter // admits batches: windows per partition, slots per node
	mem     *memBudget

	// acc holds the records not yet handed to the sender goroutine, under
	// its own lock (accumulator.go): Produce takes that lock alone.
	acc accumulator

	closing    atomic.Bool   // acc.closed, readable without a lock
	tel        *telemetry    // client metrics push; nil with enable.metrics.push=false
	leadersGen atomic.Uint64 // moves when a partition's leader or a broker's rack changes (stickyAmong)
	closeDone  chan struct{} // closed when the first Close returns

	mu    sync.Mutex           // guards the following
	nodes map[int32]*nodeState // the sender's nodes, for Stats

	wake chan struct{} // buffered(1): tells the sender to look again
	evMu sync.Mutex    // guards events
	evs  []func()      // work for the sender goroutine, from conn goroutines

	cbs *callbackQueue

	quit       chan struct{} // closed by Close to stop the sender
	senderDone chan struct{}
	s          *sender
}

// New returns a producer configured by opts. It does not connect: the
// first connection is made in the background, and errors then surface
// through record callbacks. New fails with a [*ConfigError] for an invalid
// option or a missing bootstrap.servers.
func New(opts ...Opt) (*Producer, error) {
	return NewFromProperties(nil, opts...)
}

// NewFromProperties returns a producer configured by Kafka producer
// properties, as a Java client would be (for example "bootstrap.servers",
// "linger.ms", "max.in.flight.requests.per.connection"), then by opts.
// [PropertyNames] lists the properties read. So that a pasted Java config
// works, Java producer properties that cannot change what is written (such
// as client.dns.lookup, metric.reporters, key.serializer) and consumer or
// serializer properties shared with it (group.id, session.timeout.ms,
// schema.registry.url) are accepted and ignored, as the Java producer ignores
// unused ones; [IgnoredProperty] says which and why, and each one given is
// logged through the [Logger] option, consumer and serializer ones at Warn.
// Java producer properties longhaul cannot honour
// (transaction.two.phase.commit.enable, interceptor.classes, Java classes) are accepted only at their Java
// default; another value is a [*ConfigError] saying what to do instead.
// librdkafka's sasl.mechanisms is read as sasl.mechanism. Any other name is
// a [*ConfigError] suggesting the closest known name, and an invalid value
// one naming the property and the allowed range.
func NewFromProperties(props map[string]string, opts ...Opt) (*Producer, error) {
	cfg := defaultConfig()
	// Sorted, so the first error reported does not depend on map order.
	for _, name := range sortedKeys(props) {
		if err := cfg.setProperty(name, props[name]); err != nil {
			return nil, err
		}
	}
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o.apply(&cfg); err != nil {
			return nil, err
		}
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return newProducer(cfg)
}

func newProducer(cfg config) (*Producer, error) {
	log := cfg.logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	p := &Producer{
		cfg:        cfg,
		log:        log,
		mem:        newMemBudget(cfg.bufferMemory),
		nodes:      make(map[int32]*nodeState),
		closeDone:  make(chan struct{}),
		wake:       make(chan struct{}, 1),
		quit:       make(chan struct{}),
		senderDone: make(chan struct{}),
	}
	invalidSeen := make(map[string]bool) // log each broker bug once
	var invalidMu sync.Mutex
	var onLimit func(string, int32, int, int, inflight.Cause)
	if len(cfg.hooks.window) > 0 {
		// Called on the sender goroutine only, once p.s is set.
		onLimit = func(topic string, partition int32, old, new int, why inflight.Cause) {
			p.s.limitChanged(topic, partition, old, new, why)
		}
	}
	lim, err := inflight.New(inflight.Config{
		MaxRequestsPerConn: cfg.maxInFlightPerConn,
		MaxWindow:          cfg.windowCap,
		OnLimitChange:      onLimit,
		OnInvalidWindow: func(topic string, partition int32, value int32) {
			key := fmt.Sprintf("%s/%d/%d", topic, partition, value)
			invalidMu.Lock()
			seen := invalidSeen[key]
			invalidSeen[key] = true
			invalidMu.Unlock()
			if !seen {
				log.Warn("broker sent an invalid ProducerStateBatchesToRetain; using 5",
					"topic", topic, "partition", partition, "value", value)
			}
		},
	})
	if err != nil {
		return nil, &ConfigError{Property: "max.in.flight.requests.per.connection", Reason: err.Error()}
	}
	if n := cfg.regress.fixedWindow(); n > 0 {
		testhooks.FixedWindow(lim, n)
	}
	p.limiter = lim
	p.cbs = newCallbackQueue()
	p.s = newSender(p)
	p.acc = accumulator{
		cfg: &p.cfg, mem: p.mem, limiter: lim, leadersGen: &p.leadersGen,
		base: p.s.base, sleepUntil: &p.s.sleepUntil, metaWanted: &p.s.metaWanted,
		wake: p.wakeSender,
		fail: func(pr pendingRecord, err error) {
			p.s.stats.recordsFailed.Add(1) // Stats.RecordsFailed counts every accepted record that failed
			p.cbs.pushCounted(completion{rec: pr.rec, cb: pr.cb, err: err, gen: pr.gen, memory: int64(pr.size)}, p)
		},
		topics:   make(map[string]*topicBuf),
		active:   bufSet{bit: activeBufBit},
		sealedIn: bufSet{bit: sealedInBit},
	}
	if cfg.transactionalID != "" {
		p.acc.txn = &txnMirror{}
	}
	if cfg.metricsPush {
		p.tel = newTelemetry(p)
		p.cfg.hooks.tel = p.tel
		go p.tel.run()
	}
	go p.cbs.run()
	go p.s.run()
	return p, nil
}

// Produce buffers r for sending and calls cb exactly once with the outcome.
//
// Blocking: Produce does not wait for the broker or for metadata. It blocks
// only while buffer.memory is full, until room frees up or ctx is done; if
// ctx ends first, cb gets ctx's error (wrapped) and the record is not sent,
// as it does when ctx is already done at the call, room or not. ctx has no
// other effect: cancelling it after Produce returned does not touch the
// record. A record that is nil, has no topic, is larger than
// max.request.size or buffer.memory, or is produced after Close fails at
// once through cb ([ErrInvalidRecord], [ErrRecordTooLarge], [ErrClosed]).
//
// Ownership: the bytes of r.Key, r.Value and the header values are copied
// before Produce returns, so their buffers may be reused at once. The
// Record itself belongs to the producer until cb runs: do not change or
// read it meanwhile. Produce sets r.Offset to -1; cb sees r.Offset and
// [Record.Partition] set on success, r.Offset -1 on failure.
//
// Callbacks run one at a time on one goroutine owned by the producer (not
// the caller's), in Produce order within each partition among the records
// Produce accepted. Records it refused, failing before being placed in a
// partition (invalid, closed, no metadata), are called back from the same
// goroutine, except after Close has returned, when Produce calls cb itself
// before returning; they are in no set order with the accepted ones: a
// record refused because Close has begun may be called back before
// records of its partition accepted earlier. A callback must not block:
// hand slow work to another goroutine. It may call Produce and TryProduce (there
// Produce does not wait for buffer.memory, which callbacks give back: when
// it is full the record fails at once with [ErrBufferFull]), but
// [Producer.Flush], [Producer.ProduceSync] and [Producer.Close], which wait
// for callbacks, return [ErrInCallback] from a callback instead of
// deadlocking. The same holds in a hook (see [Hook]): Produce there fails
// the record with [ErrBufferFull] rather than wait when buffer.memory is
// full, and Flush, ProduceSync and Close return [ErrInCallback]. A nil cb ignores the outcome.
//
// ctx must not be nil (pass context.Background() for no deadline): the
// context package asks callers never to pass one, so a nil ctx is a bug
// in the caller, and Produce panics at once with "producer: nil Context",
// before taking the record, rather than fail later where ctx is first
// used.
func (p *Producer) Produce(ctx context.Context, r *Record, cb Callback) {
	mustContext(ctx)
	p.produce(ctx, r, cb, true)
}

// mustContext panics on a nil ctx, before anything is done with the call.
func mustContext(ctx context.Context) {
	if ctx == nil {
		panic("producer: nil Context")
	}
}

// TryProduce is like Produce but never blocks: when buffer.memory is full
// cb gets [ErrBufferFull] (from the callback goroutine) and the record is
// not sent.
func (p *Producer) TryProduce(r *Record, cb Callback) {
	p.produce(context.Background(), r, cb, false)
}

func (p *Producer) produce(ctx context.Context, r *Record, cb Callback, block bool) {
	if cb == nil {
		cb = func(*Record, error) {}
	}
	if r == nil {
		p.reject(r, cb, fmt.Errorf("%w: nil record", ErrInvalidRecord)) // on the callback goroutine, as the doc says
		return
	}
	if !r.fixedPartition {
		r.hasPartition = false // a reused Record: the partitioner picks again
	}
	r.Offset = -1 // until written
	// accepted is an accepted record's callback; cb is for refusals.
	accepted := cb
	if p.cfg.hooks.recordProduced(r) {
		// A record a HookRecordProduced saw gets its HookRecordDone,
		// also when refused below.
		cb = func(r *Record, err error) { p.cfg.hooks.recordDone(r, err); accepted(r, err) }
	}
	if r.Topic == "" {
		p.reject(r, cb, fmt.Errorf("%w: empty topic", ErrInvalidRecord))
		return
	}
	size := recordMemory(r)
	if size > p.cfg.maxRequestSize-protocol.RecordBatchOverhead || int64(size) > p.cfg.bufferMemory {
		p.reject(r, cb, fmt.Errorf("%w: %d bytes encoded, max.request.size is %d and buffer.memory %d",
			ErrRecordTooLarge, size, p.cfg.maxRequestSize, p.cfg.bufferMemory))
		return
	}
	if p.closing.Load() { // lock-free; checked again under acc.mu below
		p.reject(r, cb, ErrClosed)
		return
	}
	if block {
		err := ctx.Err()
		if err == nil && !p.mem.TryAcquire(int64(size)) {
			if p.onOwnGoroutine() {
				// Callbacks give buffer.memory back, after the sender
				// queued them: waiting here would wait for itself.
				p.reject(r, cb, fmt.Errorf("%w: Produce from a callback or hook does not wait for it", ErrBufferFull))
				return
			}
			err = p.mem.Acquire(ctx, int64(size))
		}
		if err != nil {
			p.reject(r, cb, fmt.Errorf("producer: waiting for buffer.memory: %w", err))
			return
		}
	} else if !p.mem.TryAcquire(int64(size)) {
		p.reject(r, cb, ErrBufferFull)
		return
	}
	ahead, err := p.acc.produce(r, accepted, size)
	prefetch(ahead)
	if err != nil {
		p.mem.Release(int64(size))
		p.reject(r, cb, err)
	}
}

// reject fails a record that was never accepted. Before Close returns the
// callback runs on the callback goroutine, keeping callbacks one at a time.
func (p *Producer) reject(r *Record, cb Callback, err error) {
	if !p.cbs.push(completion{rec: r, cb: cb, err: err}) {
		cb(r, err) // Close finished: nothing else can be running callbacks
	}
}

// Flush seals every batch holding records produced before the call, so
// they are sent without waiting for linger.ms, and waits until each of those
// records has been called back, or ctx is done. Records produced after the
// call, by any goroutine, are not waited for and keep their linger.ms, so
// Flush returns under steady load. It returns nil once the records are
// called back, whatever their outcomes (the callbacks tell those), and
// ctx's error, wrapped, if ctx ended first: cancelling stops the wait only,
// the records stay buffered and keep going. It returns [ErrInCallback],
// without waiting, when called from a record callback or a hook. A nil
// ctx panics at once, before any batch is sealed, as in Produce.
func (p *Producer) Flush(ctx context.Context) error {
	mustContext(ctx)
	if p.onOwnGoroutine() {
		return ErrInCallback
	}
	done := p.acc.flush()
	p.wakeSender()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("producer: flush: %w", ctx.Err())
	}
}

// Close stops the producer: it stops accepting records (later Produce calls
// fail with [ErrClosed] through their callback), flushes as Flush does,
// waiting until ctx is done at most, then fails what is still undelivered
// with [ErrClosed] (as a [*DeliveryError] marked FateUnknown when it had
// been sent), closes the connections and ends the producer's goroutines.
// Every record's callback has run when Close returns. It returns nil when
// everything was delivered before ctx ended, else an error wrapping ctx's.
// When the producer pushes client metrics (enable.metrics.push, a cluster
// that subscribed to them), Close then sends the terminating push with the
// final figures and waits for its answer at most request.timeout.ms, and
// not past ctx.
//
// Close may be called more than once and from several goroutines: a later
// call waits until the first has finished and returns nil, or returns
// ctx's error, wrapped, if its own ctx ends first. It returns
// [ErrInCallback], without closing, when called from a record callback or
// a hook.
func (p *Producer) Close(ctx context.Context) error {
	if p.onOwnGoroutine() {
		return ErrInCallback
	}
	if p.acc.transactional() {
		p.closeTransaction(ctx)
	}
	done, first := p.acc.close() // no record is accepted from now on
	if !first {
		select {
		case <-p.closeDone:
			return nil
		case <-ctx.Done():
			return fmt.Errorf("producer: close: waiting for another Close: %w", ctx.Err())
		}
	}
	p.closing.Store(true)
	p.wakeSender()

	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = ctx.Err()
	}
	close(p.quit)
	p.wakeSender()
	<-p.senderDone
	p.cbs.close()
	if p.tel != nil {
		p.tel.close(ctx) // the terminating push, with the final figures
	}
	close(p.closeDone)
	if err != nil {
		return fmt.Errorf("producer: close: undelivered records failed: %w", err)
	}
	return nil
}

func (p *Producer) wakeSender() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// post hands f to the sender goroutine. It never blocks, so connection
// goroutines can call it from their callbacks.
func (p *Producer) post(f func()) {
	p.evMu.Lock()
	p.evs = append(p.evs, f)
	p.evMu.Unlock()
	p.wakeSender()
}

func (p *Producer) takeEvents(dst []func()) []func() {
	p.evMu.Lock()
	dst = append(dst[:0], p.evs...)
	clear(p.evs)
	p.evs = p.evs[:0]
	p.evMu.Unlock()
	return dst
}
