// Package lhprom exports a longhaul producer's metrics to Prometheus
// (github.com/prometheus/client_golang) through the producer's hooks.
//
// It lives in its own module, so longhaul itself does not depend on
// client_golang. Use:
//
//	m := lhprom.New(lhprom.Namespace("myapp"))
//	prometheus.MustRegister(m)
//	p, err := producer.New(producer.BootstrapServers(addr), producer.Hooks(m))
//
// The metrics, each prefixed by the namespace (default "longhaul") and
// "_producer_":
//
//	records_total{topic,result}            counter: records done, result "ok" or "error"
//	bytes_total{topic}                     counter: RecordBatch bytes acknowledged (after compression)
//	batch_latency_seconds{topic}           histogram: produce of a batch's first record to its acknowledgement
//	batch_errors_total{topic,error}        counter: attempts rejected, by Kafka error name or "connection"
//	batch_retries_total{topic}             counter: rejected attempts that will be retried
//	batches_in_flight{topic,partition}     gauge: attempts sent and not yet answered
//	window{topic,partition}                gauge: the partition's in-flight limit, the learned KIP-1269 window
//	window_changes_total{topic,cause}      counter: window changes by cause ("learned", "leader change", ...)
//	producer_id_changes_total              counter: InitProducerId results (the first one, epoch bumps, new ids)
//	broker_connects_total{node,result}     counter: connection attempts, result "ok" or "error"
//	broker_disconnects_total{node}         counter: connections given up
//	throttle_seconds_total{node}           counter: throttle time announced by brokers
//	request_latency_seconds{node}          histogram: a produce request's time from the connection to its answer or failure
//	requests_in_flight{node}               gauge: produce requests to the node in flight, as of its latest completion
//
// And, for the producers given to [Metrics.Watch], read from
// producer.Stats at each scrape and added up over them:
//
//	buffered_bytes                         gauge: buffer.memory held by records not yet called back
//	buffered_records                       gauge: records accepted and not yet called back
//
// batch_latency_seconds minus request_latency_seconds is the time a batch
// waited in the producer (linger, window, retries); batch_retries_total
// counts the retries: queue time, request time and retries apart.
//
// Every hook method only updates these collectors (lock-free counters and
// short-locked maps inside client_golang), as the producer's hook contract
// requires.
package lhprom

import (
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/longhaul-kafka/longhaul/producer"
)

// Metrics is a set of Prometheus collectors fed by a producer's hooks. It
// implements prometheus.Collector (register it once) and the producer's
// Hook* interfaces (pass it to producer.Hooks). One Metrics may serve several
// producers; their values add up, and the window and in-flight gauges show
// the last value any of them reported. Safe for concurrent use.
type Metrics struct {
	records      *prometheus.CounterVec
	bytes        *prometheus.CounterVec
	latency      *prometheus.HistogramVec
	errors       *prometheus.CounterVec
	retries      *prometheus.CounterVec
	inflight     *prometheus.GaugeVec
	window       *prometheus.GaugeVec
	windowChange *prometheus.CounterVec
	producerIDs  prometheus.Counter
	connects     *prometheus.CounterVec
	disconnects  *prometheus.CounterVec
	throttle     *prometheus.CounterVec
	reqLatency   *prometheus.HistogramVec
	reqInFlight  *prometheus.GaugeVec

	bufBytes, bufRecords *prometheus.Desc
	mu                   sync.Mutex
	watched              map[*producer.Producer]int // Watch calls not yet stopped, per producer
}

// Opt configures [New].
type Opt func(*options)

type options struct {
	namespace   string
	constLabels prometheus.Labels
	buckets     []float64
}

// Namespace sets the metric name prefix; default "longhaul".
func Namespace(ns string) Opt { return func(o *options) { o.namespace = ns } }

// ConstLabels adds labels with fixed values to every metric, for example
// {"producer": "orders"} to tell producers apart.
func ConstLabels(l prometheus.Labels) Opt { return func(o *options) { o.constLabels = l } }

// LatencyBuckets sets the batch_latency_seconds and request_latency_seconds
// buckets; default prometheus.ExponentialBuckets(0.001, 2, 16) (1 ms to
// about 33 s).
func LatencyBuckets(b []float64) Opt { return func(o *options) { o.buckets = b } }

// New returns metrics that are not registered yet.
func New(opts ...Opt) *Metrics {
	o := options{namespace: "longhaul", buckets: prometheus.ExponentialBuckets(0.001, 2, 16)}
	for _, f := range opts {
		f(&o)
	}
	name := func(n string) (string, string, string) { return o.namespace, "producer", n }
	counter := func(n, help string, labels ...string) *prometheus.CounterVec {
		ns, sub, n := name(n)
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: n, Help: help, ConstLabels: o.constLabels}, labels)
	}
	gauge := func(n, help string, labels ...string) *prometheus.GaugeVec {
		ns, sub, n := name(n)
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: n, Help: help, ConstLabels: o.constLabels}, labels)
	}
	ns, sub, lat := name("batch_latency_seconds")
	_, _, pid := name("producer_id_changes_total")
	_, _, rlat := name("request_latency_seconds")
	desc := func(n, help string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName(o.namespace, "producer", n), help, nil, o.constLabels)
	}
	return &Metrics{
		records: counter("records_total", "Records done, by topic and result (ok, error).", "topic", "result"),
		bytes:   counter("bytes_total", "RecordBatch bytes acknowledged, after compression.", "topic"),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub, Name: lat,
			Help: "Time from the produce of a batch's first record to its acknowledgement.", ConstLabels: o.constLabels, Buckets: o.buckets}, []string{"topic"}),
		errors:       counter("batch_errors_total", "Produce attempts rejected, by Kafka error name or connection.", "topic", "error"),
		retries:      counter("batch_retries_total", "Rejected produce attempts that will be retried.", "topic"),
		inflight:     gauge("batches_in_flight", "Produce attempts sent and not yet answered.", "topic", "partition"),
		window:       gauge("window", "The partition's in-flight limit: the broker's KIP-1269 window once learned, else 5.", "topic", "partition"),
		windowChange: counter("window_changes_total", "Changes of a partition's in-flight limit, by cause.", "topic", "cause"),
		producerIDs: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: pid,
			Help: "Producer ids or epochs obtained: the first, epoch bumps and new ids.", ConstLabels: o.constLabels}),
		connects:    counter("broker_connects_total", "Connection attempts to brokers, by result (ok, error).", "node", "result"),
		disconnects: counter("broker_disconnects_total", "Broker connections given up.", "node"),
		throttle:    counter("throttle_seconds_total", "Throttle time announced in ProduceResponses.", "node"),
		reqLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub, Name: rlat,
			Help: "Time of a produce request from its connection to its answer or failure.", ConstLabels: o.constLabels, Buckets: o.buckets}, []string{"node"}),
		reqInFlight: gauge("requests_in_flight", "Produce requests to the node in flight, as of its latest completion.", "node"),
		bufBytes:    desc("buffered_bytes", "buffer.memory held by records not yet called back."),
		bufRecords:  desc("buffered_records", "Records accepted and not yet called back."),
		watched:     make(map[*producer.Producer]int),
	}
}

func (m *Metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.records, m.bytes, m.latency, m.errors, m.retries, m.inflight,
		m.window, m.windowChange, m.producerIDs, m.connects, m.disconnects, m.throttle, m.reqLatency, m.reqInFlight}
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range m.collectors() {
		c.Describe(ch)
	}
	ch <- m.bufBytes
	ch <- m.bufRecords
}

// Collect implements prometheus.Collector. It calls Stats of every watched
// producer.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	for _, c := range m.collectors() {
		c.Collect(ch)
	}
	m.mu.Lock()
	ps := make([]*producer.Producer, 0, len(m.watched))
	for p := range m.watched {
		ps = append(ps, p)
	}
	m.mu.Unlock()
	var bytes, records int64
	for _, p := range ps {
		st := p.Stats()
		bytes += st.BufferedBytes
		records += st.BufferedRecords
	}
	ch <- prometheus.MustNewConstMetric(m.bufBytes, prometheus.GaugeValue, float64(bytes))
	ch <- prometheus.MustNewConstMetric(m.bufRecords, prometheus.GaugeValue, float64(records))
}

// Watch adds p's buffered_bytes and buffered_records (producer.Stats) to
// the gauges of every scrape, until the returned stop is called (more
// calls of stop do nothing). The hooks cannot report them: records wait
// in the producer between events. Stop watching a producer once it is
// closed, so Metrics does not keep it.
func (m *Metrics) Watch(p *producer.Producer) (stop func()) {
	m.mu.Lock()
	m.watched[p]++
	m.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			m.mu.Lock()
			defer m.mu.Unlock()
			if m.watched[p]--; m.watched[p] == 0 {
				delete(m.watched, p)
			}
		})
	}
}

func part(p int32) string { return strconv.FormatInt(int64(p), 10) }

// OnBatchSent implements producer.HookBatchSent.
func (m *Metrics) OnBatchSent(b producer.BatchInfo) {
	m.inflight.WithLabelValues(b.Topic, part(b.Partition)).Inc()
	m.window.WithLabelValues(b.Topic, part(b.Partition)).Set(float64(b.Window))
}

// OnBatchAcked implements producer.HookBatchAcked.
func (m *Metrics) OnBatchAcked(b producer.BatchInfo, _ int64) {
	m.inflight.WithLabelValues(b.Topic, part(b.Partition)).Dec()
	m.window.WithLabelValues(b.Topic, part(b.Partition)).Set(float64(b.Window))
	m.bytes.WithLabelValues(b.Topic).Add(float64(b.Bytes))
	m.latency.WithLabelValues(b.Topic).Observe(b.Age.Seconds())
}

// OnBatchRejected implements producer.HookBatchRejected.
func (m *Metrics) OnBatchRejected(b producer.BatchInfo, err error, retrying bool) {
	m.inflight.WithLabelValues(b.Topic, part(b.Partition)).Dec()
	m.errors.WithLabelValues(b.Topic, errorName(err)).Inc()
	if retrying {
		m.retries.WithLabelValues(b.Topic).Inc()
	}
}

// errorName is the Kafka name of err's code, or "connection" for errors
// without one (a lost connection, a timeout, Close).
func errorName(err error) string {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Message
	}
	return "connection"
}

// OnRecordDone implements producer.HookRecordDone.
func (m *Metrics) OnRecordDone(r *producer.Record, err error) {
	result := "ok"
	if err != nil {
		result = "error"
	}
	m.records.WithLabelValues(r.Topic, result).Inc()
}

// OnWindowChanged implements producer.HookWindowChanged.
func (m *Metrics) OnWindowChanged(topic string, partition int32, _, new int, why producer.WindowCause) {
	m.window.WithLabelValues(topic, part(partition)).Set(float64(new))
	m.windowChange.WithLabelValues(topic, why.String()).Inc()
}

// OnProducerID implements producer.HookProducerID.
func (m *Metrics) OnProducerID(int64, int16, int64, int16) { m.producerIDs.Inc() }

// OnBrokerConnect implements producer.HookBrokerConnect.
func (m *Metrics) OnBrokerConnect(node int32, _ string, err error) {
	result := "ok"
	if err != nil {
		result = "error"
	}
	m.connects.WithLabelValues(part(node), result).Inc()
}

// OnBrokerDisconnect implements producer.HookBrokerDisconnect.
func (m *Metrics) OnBrokerDisconnect(node int32, _ string, _ error) {
	m.disconnects.WithLabelValues(part(node)).Inc()
}

// OnThrottle implements producer.HookThrottle.
func (m *Metrics) OnThrottle(node int32, d time.Duration) {
	m.throttle.WithLabelValues(part(node)).Add(d.Seconds())
}

// OnRequestDone implements producer.HookRequestDone.
func (m *Metrics) OnRequestDone(r producer.RequestInfo) {
	if r.API != 0 {
		return // the metrics are the produce requests'
	}
	node := part(r.Node)
	m.reqLatency.WithLabelValues(node).Observe(r.Latency.Seconds())
	m.reqInFlight.WithLabelValues(node).Set(float64(r.InFlight))
}
