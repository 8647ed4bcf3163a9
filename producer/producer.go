package producer

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/longhaul-kafka/longhaul/inflight"
	"github.com/longhaul-kafka/longhaul/internal/testhooks"
	"github.com/longhaul-kafka/longhaul/protocol"
)

// Producer is an idempotent Kafka producer. It is safe for concurrent use.
// Create one with [New] or [NewFromProperties] and Close it when done.
type Producer struct {
	cfg config
	log *slog.Logger
	lim *inflight.Limiter
	mem *semaphore.Weighted

	mu          sync.Mutex // guards the following
	topics      map[string]*topicState
	active      []*partitionState // partitions holding buffered batches
	closed      bool
	closing     atomic.Bool   // closed, readable without mu
	outstanding int64         // records accepted and not yet called back
	idle        chan struct{} // closed while outstanding == 0
	flushing    int           // Flush calls waiting: linger is skipped
	nodes       map[int32]*nodeState

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
// [PropertyNames] lists what is accepted; a few Java-only properties such as
// key.serializer are accepted and ignored. An unknown property or an invalid
// value is a [*ConfigError] naming the property and the allowed range.
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
		mem:        semaphore.NewWeighted(cfg.bufferMemory),
		topics:     make(map[string]*topicState),
		nodes:      make(map[int32]*nodeState),
		idle:       make(chan struct{}),
		wake:       make(chan struct{}, 1),
		quit:       make(chan struct{}),
		senderDone: make(chan struct{}),
	}
	close(p.idle)
	invalidSeen := make(map[string]bool) // log each broker bug once
	var invalidMu sync.Mutex
	lim, err := inflight.New(inflight.Config{
		MaxRequestsPerConn: cfg.maxInFlightPerConn,
		MaxWindow:          cfg.windowCap,
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
	if cfg.unsafeFixedWindow > 0 {
		testhooks.FixedWindow(lim, cfg.unsafeFixedWindow)
	}
	p.lim = lim
	p.cbs = newCallbackQueue()
	p.s = newSender(p)
	go p.cbs.run()
	go p.s.run()
	return p, nil
}

// Produce buffers r for sending and calls cb exactly once with the outcome.
//
// It does not wait for the broker. It blocks only while buffer.memory is
// full, until ctx is done; then cb gets ctx's error and the record is not
// sent. A record that is invalid or too large, or produced after Close,
// fails at once through cb.
//
// Callbacks run one at a time on one goroutine, in order within each
// partition; they must not block (hand slow work to another goroutine). A
// nil cb ignores the outcome. On success r.Partition and r.Offset are set.
// Cancelling ctx after Produce returned has no effect on r: a buffered
// record is never failed because of its Produce context.
func (p *Producer) Produce(ctx context.Context, r *Record, cb Callback) {
	p.produce(ctx, r, cb, true)
}

// TryProduce is like Produce but never blocks: when buffer.memory is full
// cb gets [ErrBufferFull] at once.
func (p *Producer) TryProduce(r *Record, cb Callback) {
	p.produce(context.Background(), r, cb, false)
}

func (p *Producer) produce(ctx context.Context, r *Record, cb Callback, block bool) {
	if cb == nil {
		cb = func(*Record, error) {}
	}
	if r == nil {
		cb(r, fmt.Errorf("%w: nil record", ErrInvalidRecord))
		return
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
	if p.closing.Load() { // lock-free; checked again under mu below
		p.reject(r, cb, ErrClosed)
		return
	}
	if block {
		if err := p.mem.Acquire(ctx, int64(size)); err != nil {
			p.reject(r, cb, fmt.Errorf("producer: waiting for buffer.memory: %w", err))
			return
		}
	} else if !p.mem.TryAcquire(int64(size)) {
		p.reject(r, cb, ErrBufferFull)
		return
	}
	if r.Timestamp.IsZero() {
		r.Timestamp = time.Now()
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		p.mem.Release(int64(size))
		p.reject(r, cb, ErrClosed)
		return
	}
	err := p.appendLocked(r, cb, size)
	if err != nil {
		p.mu.Unlock()
		p.mem.Release(int64(size))
		p.reject(r, cb, err)
		return
	}
	p.addOutstandingLocked(1)
	p.mu.Unlock()
}

// reject fails a record that was never accepted. Before Close returns the
// callback runs on the callback goroutine, keeping callbacks one at a time.
func (p *Producer) reject(r *Record, cb Callback, err error) {
	if !p.cbs.push(completion{rec: r, cb: cb, err: err}) {
		cb(r, err) // Close finished: nothing else can be running callbacks
	}
}

// ProduceSync produces records and waits for all of them. It returns the
// first error, or nil if every record was written; each record's Partition
// and Offset are set on success.
func (p *Producer) ProduceSync(ctx context.Context, records ...*Record) error {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	wg.Add(len(records))
	for _, r := range records {
		p.Produce(ctx, r, func(_ *Record, err error) {
			if err != nil {
				mu.Lock()
				if first == nil {
					first = err
				}
				mu.Unlock()
			}
			wg.Done()
		})
	}
	wg.Wait()
	return first
}

// Flush sends every buffered record without waiting for linger.ms and waits
// until all records produced before the call have been called back, or ctx
// is done. Cancelling ctx stops the wait only: records stay buffered and
// keep going.
func (p *Producer) Flush(ctx context.Context) error {
	p.mu.Lock()
	p.flushing++
	idle := p.idle
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.flushing--
		p.mu.Unlock()
	}()
	p.wakeSender()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("producer: flush: %w", ctx.Err())
	}
}

// Close flushes, then stops the producer and releases its connections and
// goroutines. Records still not delivered when ctx is done fail with
// [ErrClosed] (as a [*DeliveryError] marked FateUnknown when they had been
// sent). Every record gets its callback before Close returns. Close is safe
// to call more than once; later calls return nil at once.
func (p *Producer) Close(ctx context.Context) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		<-p.senderDone
		return nil
	}
	p.closed = true
	p.closing.Store(true)
	p.mu.Unlock()

	err := p.Flush(ctx)
	close(p.quit)
	p.wakeSender()
	<-p.senderDone
	p.cbs.close()
	if err != nil {
		return fmt.Errorf("producer: close: undelivered records failed: %w", err)
	}
	return nil
}

// addOutstandingLocked counts accepted records; Flush waits for zero.
func (p *Producer) addOutstandingLocked(n int64) {
	before := p.outstanding
	p.outstanding += n
	switch {
	case before == 0 && p.outstanding > 0:
		p.idle = make(chan struct{})
	case before > 0 && p.outstanding == 0:
		close(p.idle)
	case p.outstanding < 0:
		panic("producer: more callbacks than records")
	}
}

func (p *Producer) recordsDone(n int) {
	p.mu.Lock()
	p.addOutstandingLocked(-int64(n))
	p.mu.Unlock()
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
