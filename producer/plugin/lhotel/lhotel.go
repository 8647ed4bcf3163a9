// Package lhotel records a longhaul producer's metrics with OpenTelemetry
// (go.opentelemetry.io/otel/metric) through the producer's hooks, and
// traces its records ([Tracer]: a span per record, W3C trace context in
// the record headers, like franz-go's kotel).
//
// It lives in its own module, so longhaul itself does not depend on
// OpenTelemetry. Use:
//
//	m, err := lhotel.New(otel.GetMeterProvider())
//	p, err := producer.New(producer.BootstrapServers(addr), producer.Hooks(m))
//
// The instruments, named after OpenTelemetry's messaging conventions where
// one exists and prefixed "longhaul.producer." otherwise; attributes
// messaging.destination.name (the topic), messaging.destination.partition.id,
// error.type and longhaul.* as listed:
//
//	longhaul.producer.records            counter: records done; error.type on failures
//	longhaul.producer.bytes              counter (By): RecordBatch bytes acknowledged
//	longhaul.producer.batch.duration     histogram (s): produce of a batch's first record to its acknowledgement
//	longhaul.producer.batch.errors       counter: attempts rejected; error.type is the Kafka error name or "connection"
//	longhaul.producer.batch.retries      counter: rejected attempts that will be retried
//	longhaul.producer.batches.in_flight  up-down counter: attempts sent and not yet answered, per partition
//	longhaul.producer.window             gauge: the partition's in-flight limit, the learned KIP-1269 window
//	longhaul.producer.window.changes     counter: window changes; longhaul.window.cause
//	longhaul.producer.producer_id.changes counter: InitProducerId results
//	longhaul.producer.broker.connects    counter: connection attempts; longhaul.broker.node, error.type on failures
//	longhaul.producer.broker.disconnects counter: connections given up; longhaul.broker.node
//	longhaul.producer.throttle           counter (s): throttle time announced; longhaul.broker.node
//	longhaul.producer.request.duration   histogram (s): a produce request's time from the connection to its answer or failure; longhaul.broker.node
//	longhaul.producer.requests.in_flight gauge: produce requests to the node in flight, as of its latest completion; longhaul.broker.node
//
// And, for the producers given to [Metrics.Watch], observed from
// producer.Stats at each collection, one point per watched producer
// (attribute longhaul.producer, the name given to Watch):
//
//	longhaul.producer.buffered.bytes     gauge (By): buffer.memory held by records not yet called back
//	longhaul.producer.buffered.records   gauge: records accepted and not yet called back
//
// batch.duration minus request.duration is the time a batch waited in the
// producer (linger, window, retries), batch.retries counts the retries:
// queue time, request time and retries apart.
//
// Hook methods only record on these instruments, as the producer's hook
// contract requires; the hooks carry no context, so measurements use
// context.Background().
package lhotel

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/longhaul-kafka/longhaul/producer"
)

// ScopeName is the instrumentation scope of the meter [New] creates and
// of the tracer [NewTracer] creates.
const ScopeName = "github.com/longhaul-kafka/longhaul/producer/plugin/lhotel"

// Metrics records a producer's hooks on OpenTelemetry instruments. It
// implements the producer's Hook* interfaces: pass it to producer.Hooks.
// Safe for concurrent use; one Metrics may serve several producers.
type Metrics struct {
	records, bytes, errors, retries, windowChanges, producerIDs,
	connects, disconnects, throttle metric.Float64Counter
	latency, reqLatency  metric.Float64Histogram
	inflight             metric.Int64UpDownCounter
	window, reqInFlight  metric.Int64Gauge
	bufBytes, bufRecords metric.Int64ObservableGauge
	meter                metric.Meter
}

// New creates the instruments on a meter of mp named [ScopeName].
func New(mp metric.MeterProvider) (*Metrics, error) {
	mt := mp.Meter(ScopeName)
	m := Metrics{meter: mt}
	var errs []error
	counter := func(name, unit, desc string) metric.Float64Counter {
		c, err := mt.Float64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return c
	}
	m.records = counter("longhaul.producer.records", "{record}", "Records done; error.type is set on failures.")
	m.bytes = counter("longhaul.producer.bytes", "By", "RecordBatch bytes acknowledged, after compression.")
	m.errors = counter("longhaul.producer.batch.errors", "{attempt}", "Produce attempts rejected, by Kafka error name or connection.")
	m.retries = counter("longhaul.producer.batch.retries", "{attempt}", "Rejected produce attempts that will be retried.")
	m.windowChanges = counter("longhaul.producer.window.changes", "{change}", "Changes of a partition's in-flight limit, by cause.")
	m.producerIDs = counter("longhaul.producer.producer_id.changes", "{change}", "Producer ids or epochs obtained.")
	m.connects = counter("longhaul.producer.broker.connects", "{connection}", "Connection attempts to brokers.")
	m.disconnects = counter("longhaul.producer.broker.disconnects", "{connection}", "Broker connections given up.")
	m.throttle = counter("longhaul.producer.throttle", "s", "Throttle time announced in ProduceResponses.")
	var err error
	m.latency, err = mt.Float64Histogram("longhaul.producer.batch.duration", metric.WithUnit("s"),
		metric.WithDescription("Time from the produce of a batch's first record to its acknowledgement."))
	errs = append(errs, err)
	m.inflight, err = mt.Int64UpDownCounter("longhaul.producer.batches.in_flight", metric.WithUnit("{batch}"),
		metric.WithDescription("Produce attempts sent and not yet answered."))
	errs = append(errs, err)
	m.reqLatency, err = mt.Float64Histogram("longhaul.producer.request.duration", metric.WithUnit("s"),
		metric.WithDescription("Time of a produce request from its connection to its answer or failure."))
	errs = append(errs, err)
	// The gauges: recorded at events (sync) or observed at collection
	// (obs, Watch).
	for _, g := range []struct {
		sync             *metric.Int64Gauge
		obs              *metric.Int64ObservableGauge
		name, unit, desc string
	}{
		{sync: &m.window, name: "longhaul.producer.window", unit: "{batch}",
			desc: "The partition's in-flight limit: the broker's KIP-1269 window once learned, else 5."},
		{sync: &m.reqInFlight, name: "longhaul.producer.requests.in_flight", unit: "{request}",
			desc: "Produce requests to the node in flight, as of its latest completion."},
		{obs: &m.bufBytes, name: "longhaul.producer.buffered.bytes", unit: "By",
			desc: "buffer.memory held by records not yet called back."},
		{obs: &m.bufRecords, name: "longhaul.producer.buffered.records", unit: "{record}",
			desc: "Records accepted and not yet called back."},
	} {
		unit, desc := metric.WithUnit(g.unit), metric.WithDescription(g.desc)
		if g.sync != nil {
			*g.sync, err = mt.Int64Gauge(g.name, unit, desc)
		} else {
			*g.obs, err = mt.Int64ObservableGauge(g.name, unit, desc)
		}
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return &m, nil
}

// Watch observes p's buffered.bytes and buffered.records (producer.Stats)
// at each collection, with the attribute longhaul.producer set to name,
// until the returned registration is unregistered. The hooks cannot
// report them: records wait in the producer between events. Unregister
// once p is closed, so the meter does not keep it.
func (m *Metrics) Watch(p *producer.Producer, name string) (metric.Registration, error) {
	at := metric.WithAttributes(attribute.String("longhaul.producer", name))
	return m.meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		st := p.Stats()
		o.ObserveInt64(m.bufBytes, st.BufferedBytes, at)
		o.ObserveInt64(m.bufRecords, st.BufferedRecords, at)
		return nil
	}, m.bufBytes, m.bufRecords)
}

var bg = context.Background()

func partAttrs(topic string, partition int32) metric.MeasurementOption {
	return metric.WithAttributes(attribute.String("messaging.destination.name", topic),
		attribute.Int("messaging.destination.partition.id", int(partition)))
}

func topicAttr(topic string) attribute.KeyValue {
	return attribute.String("messaging.destination.name", topic)
}

// errorType is the Kafka name of err's code, or "connection" for errors
// without one (a lost connection, a timeout, Close).
func errorType(err error) attribute.KeyValue {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return attribute.String("error.type", ke.Message)
	}
	return attribute.String("error.type", "connection")
}

// OnBatchSent implements producer.HookBatchSent.
func (m *Metrics) OnBatchSent(b producer.BatchInfo) {
	at := partAttrs(b.Topic, b.Partition)
	m.inflight.Add(bg, 1, at)
	m.window.Record(bg, int64(b.Window), at)
}

// OnBatchAcked implements producer.HookBatchAcked.
func (m *Metrics) OnBatchAcked(b producer.BatchInfo, _ int64) {
	at := partAttrs(b.Topic, b.Partition)
	m.inflight.Add(bg, -1, at)
	m.window.Record(bg, int64(b.Window), at)
	t := metric.WithAttributes(topicAttr(b.Topic))
	m.bytes.Add(bg, float64(b.Bytes), t)
	m.latency.Record(bg, b.Age.Seconds(), t)
}

// OnBatchRejected implements producer.HookBatchRejected.
func (m *Metrics) OnBatchRejected(b producer.BatchInfo, err error, retrying bool) {
	m.inflight.Add(bg, -1, partAttrs(b.Topic, b.Partition))
	m.errors.Add(bg, 1, metric.WithAttributes(topicAttr(b.Topic), errorType(err)))
	if retrying {
		m.retries.Add(bg, 1, metric.WithAttributes(topicAttr(b.Topic)))
	}
}

// OnRecordDone implements producer.HookRecordDone.
func (m *Metrics) OnRecordDone(r *producer.Record, err error) {
	if err != nil {
		m.records.Add(bg, 1, metric.WithAttributes(topicAttr(r.Topic), errorType(err)))
		return
	}
	m.records.Add(bg, 1, metric.WithAttributes(topicAttr(r.Topic)))
}

// OnWindowChanged implements producer.HookWindowChanged.
func (m *Metrics) OnWindowChanged(topic string, partition int32, _, new int, why producer.WindowCause) {
	m.window.Record(bg, int64(new), partAttrs(topic, partition))
	m.windowChanges.Add(bg, 1, metric.WithAttributes(topicAttr(topic), attribute.String("longhaul.window.cause", why.String())))
}

// OnProducerID implements producer.HookProducerID.
func (m *Metrics) OnProducerID(int64, int16, int64, int16) { m.producerIDs.Add(bg, 1) }

func nodeAttr(node int32) attribute.KeyValue { return attribute.Int("longhaul.broker.node", int(node)) }

// OnBrokerConnect implements producer.HookBrokerConnect.
func (m *Metrics) OnBrokerConnect(node int32, _ string, err error) {
	if err != nil {
		m.connects.Add(bg, 1, metric.WithAttributes(nodeAttr(node), errorType(err)))
		return
	}
	m.connects.Add(bg, 1, metric.WithAttributes(nodeAttr(node)))
}

// OnBrokerDisconnect implements producer.HookBrokerDisconnect.
func (m *Metrics) OnBrokerDisconnect(node int32, _ string, _ error) {
	m.disconnects.Add(bg, 1, metric.WithAttributes(nodeAttr(node)))
}

// OnThrottle implements producer.HookThrottle.
func (m *Metrics) OnThrottle(node int32, d time.Duration) {
	m.throttle.Add(bg, d.Seconds(), metric.WithAttributes(nodeAttr(node)))
}

// OnRequestDone implements producer.HookRequestDone.
func (m *Metrics) OnRequestDone(r producer.RequestInfo) {
	if r.API != 0 {
		return // the instruments are the produce requests'
	}
	at := metric.WithAttributes(nodeAttr(r.Node))
	m.reqLatency.Record(bg, r.Latency.Seconds(), at)
	m.reqInFlight.Record(bg, int64(r.InFlight), at)
}
