package producer

import (
	"context"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/longhaul-kafka/longhaul/internal/otlp"
	"github.com/longhaul-kafka/longhaul/protocol"
)

// Client metrics push (KIP-714, enable.metrics.push): the cluster tells
// the client which metrics it wants (GetTelemetrySubscriptions) and the
// client pushes them at the asked interval (PushTelemetry), as
// OpenTelemetry metrics, so operators see every client in the brokers'
// metrics reporter.
//
// The pushes go on a connection of their own, from their own goroutine:
// the sender's connections carry pipelined produce requests whose order
// and slots the sender owns, and a push (once per interval, minutes by
// default) must neither wait behind them nor take a slot. That connection
// is opened only to a broker whose ApiVersions, on a produce connection,
// offered both requests (offered), so a cluster that does not take client
// metrics (no metrics reporter receives them) costs no connection. The
// figures come from the producer's hook dispatch (hooks.go hands them to
// telemetry) and Stats. The dispatch hands over the batch, request and
// throttle figures only while a subscription asks for metrics (active): a
// cluster that takes client metrics but wants none of this client's costs
// no work per batch on the sender goroutine.

// telemetryPrefix is the prefix of every metric name, the one Java's
// producer uses: KIP-714 names a metric by the client type and the Java
// metric's group and name, with dots.
const telemetryPrefix = "org.apache.kafka.producer."

// Push intervals and retries, as the Java client's ClientTelemetryReporter
// chooses them.
const (
	// telemetryDefaultInterval is used when the broker announces an
	// interval of 0 or less, and to retry after a broker without the
	// requests or a failed request.
	telemetryDefaultInterval = 5 * time.Minute
	// The first push after a subscription waits between half and one
	// and a half intervals, so clients started together do not push
	// together.
	telemetryJitterLow, telemetryJitterHigh = 0.5, 1.5
)

// telemetry is the producer's client metrics push. The methods the hook
// dispatch calls run on the sender goroutine and take only mu.
type telemetry struct {
	p     *Producer
	start time.Time
	rng   *rand.Rand // jitter (randSources.telemetry)

	// active is set while the loaded subscription asks for metrics
	// (subscribed); the sender hands over the interval figures only then.
	active atomic.Bool
	// The running totals, counted from the start whatever the
	// subscription: records of batches that will be sent again, and
	// produce connections opened.
	retries, connections atomic.Int64

	mu          sync.Mutex // guards the figures below
	queueTime   telemetryStat
	reqLatency  telemetryStat
	nodeLatency map[int32]*telemetryStat
	throttle    telemetryStat
	offerAddr   string // the latest broker that offered the requests (offered)

	offer chan struct{} // offered: offerAddr changed

	// The push goroutine's; last is the sums at the last accepted push,
	// for delta temporality.
	last     map[string]int64
	lastTime time.Time

	stop   chan struct{} // closed by Close: push the terminating push, then end
	done   chan struct{} // closed when the goroutine ended
	cancel context.CancelFunc
	ctx    context.Context
}

// telemetryStat is a count, sum and maximum over one push interval, in
// milliseconds.
type telemetryStat struct {
	n        int64
	sum, max float64
}

func (s *telemetryStat) add(d time.Duration) {
	ms := float64(d) / float64(time.Millisecond)
	s.n++
	s.sum += ms
	s.max = max(s.max, ms)
}

// newTelemetry returns the producer's client metrics push; run runs it.
func newTelemetry(p *Producer) *telemetry {
	t := &telemetry{p: p, start: time.Now(), rng: p.cfg.rand.telemetry,
		nodeLatency: make(map[int32]*telemetryStat), last: make(map[string]int64),
		stop: make(chan struct{}), done: make(chan struct{}), offer: make(chan struct{}, 1)}
	t.lastTime = t.start
	t.ctx, t.cancel = context.WithCancel(context.Background())
	return t
}

// offered tells that a produce connection to addr offered
// GetTelemetrySubscriptions and PushTelemetry (sender goroutine).
func (t *telemetry) offered(addr string) {
	t.mu.Lock()
	t.offerAddr = addr
	t.mu.Unlock()
	select {
	case t.offer <- struct{}{}:
	default:
	}
}

// waitOffer returns the latest broker that offered client metrics push,
// waiting for the first; false if Close began first.
func (t *telemetry) waitOffer() (string, bool) {
	for {
		t.mu.Lock()
		a := t.offerAddr
		t.mu.Unlock()
		if a != "" {
			return a, true
		}
		select {
		case <-t.offer:
		case <-t.stop:
			return "", false
		}
	}
}

// subscribed makes the interval figures be taken while on is true: a
// subscription that asks for metrics is loaded. The figures start again
// when it turns on, so a push covers no time before the subscription.
func (t *telemetry) subscribed(on bool) {
	if t.active.Load() == on {
		return
	}
	if on {
		t.mu.Lock()
		t.queueTime, t.reqLatency, t.throttle = telemetryStat{}, telemetryStat{}, telemetryStat{}
		clear(t.nodeLatency)
		t.mu.Unlock()
	}
	t.active.Store(on)
}

// requestSent takes the record queue time of the batches of a request
// sent at now that go for the first time.
func (t *telemetry) requestSent(bs []*batch, now time.Time) {
	t.mu.Lock()
	for _, b := range bs {
		if b.attempts == 1 {
			t.queueTime.add(now.Sub(b.created))
		}
	}
	t.mu.Unlock()
}

// requestDone takes a produce request's latency to node; err is nil when
// the broker answered.
func (t *telemetry) requestDone(node int32, latency time.Duration, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.reqLatency.add(latency)
	n := t.nodeLatency[node]
	if n == nil {
		n = new(telemetryStat)
		t.nodeLatency[node] = n
	}
	n.add(latency)
	if err == nil {
		t.throttle.n++ // every answer counts toward the average throttle
	}
}

// throttled takes a produce answer's throttle time.
func (t *telemetry) throttled(d time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	ms := float64(d) / float64(time.Millisecond)
	t.throttle.sum += ms
	t.throttle.max = max(t.throttle.max, ms)
}

// close pushes the terminating push, if a subscription was loaded, within
// ctx and request.timeout.ms, and ends the goroutine.
func (t *telemetry) close(ctx context.Context) {
	close(t.stop)
	select {
	case <-t.done:
		return
	case <-ctx.Done():
	}
	t.cancel()
	<-t.done
}

// telemetryVerdict is what an error code of either answer makes the
// client do, as Java's ClientTelemetryReporter does.
type telemetryVerdict uint8

const (
	telemetryOK          telemetryVerdict = iota
	telemetryResubscribe                  // at once: the subscription changed, or the codec is refused
	telemetryWait                         // a new subscription after the push interval: too large, or throttled
	telemetryDisable                      // no retry can succeed: push no more
)

// telemetryJudge classifies an answer's error code.
func telemetryJudge(code int16) telemetryVerdict {
	switch code {
	case 0:
		return telemetryOK
	case kerr.UnknownSubscriptionID.Code, kerr.UnsupportedCompressionType.Code:
		return telemetryResubscribe
	case kerr.TelemetryTooLarge.Code, kerr.ThrottlingQuotaExceeded.Code:
		return telemetryWait
	}
	// INVALID_REQUEST, INVALID_RECORD, UNSUPPORTED_VERSION and any code
	// the protocol does not give these requests.
	return telemetryDisable
}

// sleep waits d; false if Close began meanwhile.
func (t *telemetry) sleep(d time.Duration) bool {
	if d <= 0 {
		select {
		case <-t.stop:
			return false
		default:
			return true
		}
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return true
	case <-t.stop:
		return false
	}
}

// run subscribes and pushes until Close, then pushes the terminating push.
func (t *telemetry) run() {
	defer close(t.done)
	defer t.cancel()
	cfg := &t.p.cfg
	var conn *protocol.Conn
	defer func() {
		if conn != nil {
			conn.Close()
		}
	}()
	var (
		id  [16]byte
		sub *protocol.TelemetrySubscription // nil until one is loaded
	)
	drop := func() {
		if conn != nil {
			conn.Close()
			conn = nil
		}
	}
	wait := time.Duration(0) // before the next subscription request
	for {
		if !t.sleep(wait) {
			t.terminate(conn, sub)
			return
		}
		wait = cfg.retryBackoffMax
		if conn == nil || conn.Err() != nil {
			drop()
			addr, ok := t.waitOffer()
			if !ok {
				return
			}
			ctx, cancel := context.WithTimeout(t.ctx, cfg.requestTimeout)
			c, err := protocol.Dial(ctx, addr, t.p.s.dialConfig())
			cancel()
			if err != nil {
				t.p.log.Debug("client metrics push: connecting failed", "addr", addr, "err", err)
				continue
			}
			conn = c
		}
		if !protocol.HasTelemetry(conn) {
			// This broker does not take client metrics; another (or this
			// one upgraded) may, later.
			t.subscribed(false)
			drop()
			wait = telemetryDefaultInterval
			continue
		}
		ctx, cancel := context.WithTimeout(t.ctx, cfg.requestTimeout)
		s, err := protocol.GetTelemetrySubscriptions(ctx, conn, id)
		cancel()
		if err != nil {
			t.p.log.Debug("client metrics push: GetTelemetrySubscriptions failed", "err", err)
			drop()
			continue
		}
		interval := s.PushInterval
		if interval <= 0 {
			interval = telemetryDefaultInterval
		}
		switch telemetryJudge(s.ErrorCode) {
		case telemetryDisable:
			drop()
			t.disable(s.ErrorCode)
			return
		case telemetryResubscribe:
			wait = 0
			continue
		case telemetryWait:
			wait = interval
			continue
		}
		if sub != nil && sub.Delta != s.Delta {
			t.resetDeltas() // the sums start again from now
		}
		id, sub = s.ClientInstanceID, s
		t.subscribed(len(s.Metrics) > 0)
		if len(s.Metrics) == 0 {
			wait = interval // nothing asked: ask again later
			continue
		}
		next := time.Duration(float64(interval) * (telemetryJitterLow + t.rng.Float64()*(telemetryJitterHigh-telemetryJitterLow)))
		for {
			if !t.sleep(next) {
				t.terminate(conn, sub)
				return
			}
			code, err := t.push(conn, sub, false)
			if err != nil {
				t.p.log.Debug("client metrics push: PushTelemetry failed", "err", err)
				drop()
				break
			}
			v := telemetryJudge(code)
			if v == telemetryOK {
				next = interval
				continue
			}
			switch v {
			case telemetryDisable:
				drop()
				t.disable(code)
				return
			case telemetryResubscribe:
				wait = 0
			case telemetryWait:
				wait = interval
			}
			break
		}
	}
}

// disable stops pushing for good, its connection closed: the goroutine
// idles until Close.
func (t *telemetry) disable(code int16) {
	t.subscribed(false)
	t.p.log.Info("client metrics push disabled by the broker's answer", "code", code, "err", kerr.ErrorForCode(code))
	<-t.stop
}

// terminate sends the terminating push at Close, when a subscription that
// asks for metrics was loaded and the connection is up.
func (t *telemetry) terminate(conn *protocol.Conn, sub *protocol.TelemetrySubscription) {
	if conn == nil || sub == nil || len(sub.Metrics) == 0 || conn.Err() != nil {
		return
	}
	if _, err := t.push(conn, sub, true); err != nil {
		t.p.log.Debug("client metrics push: terminating push failed", "err", err)
	}
}

// push collects the subscribed metrics and sends them.
func (t *telemetry) push(conn *protocol.Conn, sub *protocol.TelemetrySubscription, terminating bool) (int16, error) {
	now := time.Now()
	metrics, sums := t.collect(sub, now)
	payload := otlp.Encode(otlp.Payload{Resource: t.resource(), Scope: "github.com/longhaul-kafka/longhaul/producer", Metrics: metrics})
	codec := protocol.CodecNone
	if len(sub.Compression) > 0 {
		codec = sub.Compression[0] // the broker's first choice; every codec it may name is ours too
	}
	body, err := protocol.Compress(nil, codec, payload)
	if err != nil {
		codec, body = protocol.CodecNone, payload
	}
	ctx, cancel := context.WithTimeout(t.ctx, t.p.cfg.requestTimeout)
	defer cancel()
	code, err := protocol.PushTelemetry(ctx, conn, protocol.TelemetryPush{ClientInstanceID: sub.ClientInstanceID,
		SubscriptionID: sub.SubscriptionID, Terminating: terminating, Codec: codec, Metrics: body})
	if err == nil && code == 0 {
		t.last, t.lastTime = sums, now
	}
	return code, err
}

// resetDeltas makes the next delta sums count from now.
func (t *telemetry) resetDeltas() {
	_, sums := t.collect(&protocol.TelemetrySubscription{Metrics: []string{"*"}}, time.Now())
	t.last, t.lastTime = sums, time.Now()
}

func (t *telemetry) resource() []otlp.Attr {
	attrs := []otlp.Attr{{Key: "client_id", Value: t.p.cfg.clientID}}
	if r := t.p.cfg.clientRack; r != "" {
		attrs = append(attrs, otlp.Attr{Key: "client_rack", Value: r})
	}
	return attrs
}

// wanted reports whether sub asks for the metric name: a single "*" asks
// for all, else any prefix of the name.
func wanted(sub *protocol.TelemetrySubscription, name string) bool {
	if len(sub.Metrics) == 1 && sub.Metrics[0] == "*" {
		return true
	}
	for _, p := range sub.Metrics {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// collect returns the metrics sub asks for at now, and every sum's
// cumulative value. The interval figures (averages, maxima) start again.
func (t *telemetry) collect(sub *protocol.TelemetrySubscription, now time.Time) ([]otlp.Metric, map[string]int64) {
	st := t.p.Stats()
	t.mu.Lock()
	queue, req, throttle := t.queueTime, t.reqLatency, t.throttle
	nodes := make(map[int32]telemetryStat, len(t.nodeLatency))
	for id, s := range t.nodeLatency {
		nodes[id] = *s
		*s = telemetryStat{} // a node once seen is reported, 0 in an interval without requests
	}
	t.queueTime, t.reqLatency, t.throttle = telemetryStat{}, telemetryStat{}, telemetryStat{}
	t.mu.Unlock()

	ts := uint64(now.UnixNano())
	var out []otlp.Metric
	gauge := func(name, unit, desc string, v float64, attrs ...otlp.Attr) {
		name = telemetryPrefix + name
		if !wanted(sub, name) {
			return
		}
		p := otlp.Point{Time: ts, IsDouble: true, Double: v, Attrs: attrs}
		if k := len(out); k > 0 && out[k-1].Name == name {
			out[k-1].Points = append(out[k-1].Points, p)
			return
		}
		out = append(out, otlp.Metric{Name: name, Unit: unit, Description: desc, Kind: otlp.Gauge, Points: []otlp.Point{p}})
	}
	avg := func(s telemetryStat) float64 {
		if s.n == 0 {
			return 0
		}
		return s.sum / float64(s.n)
	}
	gauge("record.queue.time.avg", "ms", "The average time a batch waited in the producer before its first send.", avg(queue))
	gauge("record.queue.time.max", "ms", "The longest time a batch waited in the producer before its first send.", queue.max)
	gauge("request.latency.avg", "ms", "The average produce request latency.", avg(req))
	gauge("request.latency.max", "ms", "The longest produce request latency.", req.max)
	ids := make([]int32, 0, len(nodes))
	for id := range nodes {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		gauge("node.request.latency.avg", "ms", "The average produce request latency to the node.", avg(nodes[id]), otlp.Attr{Key: "node_id", Value: strconv.Itoa(int(id))})
	}
	for _, id := range ids {
		gauge("node.request.latency.max", "ms", "The longest produce request latency to the node.", nodes[id].max, otlp.Attr{Key: "node_id", Value: strconv.Itoa(int(id))})
	}
	gauge("produce.throttle.time.avg", "ms", "The average throttle time in produce answers.", avg(throttle))
	gauge("produce.throttle.time.max", "ms", "The longest throttle time in a produce answer.", throttle.max)
	gauge("buffer.total.bytes", "bytes", "buffer.memory.", float64(t.p.cfg.bufferMemory))
	gauge("buffer.available.bytes", "bytes", "buffer.memory not held by records.", float64(t.p.cfg.bufferMemory-st.BufferedBytes))

	sums := map[string]int64{
		"record.send.total":         st.RecordsSent,
		"record.error.total":        st.RecordsFailed,
		"record.retry.total":        t.retries.Load(),
		"request.total":             st.ProduceRequests,
		"connection.creation.total": t.connections.Load(),
	}
	descs := [][2]string{
		{"record.send.total", "Records acknowledged."},
		{"record.error.total", "Records failed after they were accepted."},
		{"record.retry.total", "Records of batches sent again."},
		{"request.total", "Produce requests sent."},
		{"connection.creation.total", "Broker connections opened for produce requests."},
	}
	for _, d := range descs {
		name := telemetryPrefix + d[0]
		if !wanted(sub, name) {
			continue
		}
		p := otlp.Point{Start: uint64(t.start.UnixNano()), Time: ts, Int: sums[d[0]]}
		if sub.Delta {
			p.Start, p.Int = uint64(t.lastTime.UnixNano()), sums[d[0]]-t.last[d[0]]
		}
		out = append(out, otlp.Metric{Name: name, Description: d[1], Kind: otlp.Sum, Monotonic: true, Delta: sub.Delta, Points: []otlp.Point{p}})
	}
	return out, sums
}
