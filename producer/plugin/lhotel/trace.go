package lhotel

import (
	"context"
	"errors"
	"strconv"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kerr"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/longhaul-kafka/longhaul/producer"
)

// Tracer traces every record a producer is given: one span per record,
// from Produce to its outcome, with the span's W3C trace context written
// into the record's headers so consumers can continue the trace. It
// implements producer.HookRecordProduced and producer.HookRecordDone:
// pass it to producer.Hooks. Safe for concurrent use; one Tracer may
// serve several producers.
//
// The span (kind producer, named "send <topic>") is a child of the span
// in the record's Context, if any, else a new trace's root, and its
// context replaces the record's Context, so the callback (and
// trace.SpanFromContext there) sees the send span. It ends when the
// record's outcome is known, also when Produce refuses the record.
// Attributes follow OpenTelemetry's messaging conventions for Kafka:
//
//	messaging.system                    "kafka"
//	messaging.operation.type, .name     "send"
//	messaging.destination.name          the topic
//	messaging.message.body.size         the value's length in bytes
//	messaging.kafka.message.key         the key, when it is valid UTF-8
//	messaging.kafka.message.tombstone   true for a nil value
//	messaging.destination.partition.id  the partition, once known
//	messaging.kafka.offset              the offset, on success
//	error.type                          on failure: the Kafka error name (NOT_LEADER_OR_FOLLOWER),
//	                                    else the producer error's (record_too_large, buffer_full,
//	                                    closed, delivery_timeout, ...), else _OTHER
//
// A failed record's span also has status Error and the error recorded
// as an event. A Record produced again starts a new span as a child of
// the previous one unless its Context is reset first.
type Tracer struct {
	tracer trace.Tracer
	prop   propagation.TextMapPropagator
}

// TracerOption configures [NewTracer].
type TracerOption func(*Tracer)

// WithPropagator sets what is written into the record headers. Default:
// propagation.TraceContext{} (W3C traceparent and tracestate); for
// example propagation.NewCompositeTextMapPropagator(propagation.TraceContext{},
// propagation.Baggage{}) adds W3C baggage, and otel.GetTextMapPropagator()
// uses the global one.
func WithPropagator(p propagation.TextMapPropagator) TracerOption {
	return func(t *Tracer) { t.prop = p }
}

// NewTracer creates a Tracer whose spans come from a tracer of tp named
// [ScopeName].
func NewTracer(tp trace.TracerProvider, opts ...TracerOption) *Tracer {
	t := &Tracer{tracer: tp.Tracer(ScopeName), prop: propagation.TraceContext{}}
	for _, o := range opts {
		o(t)
	}
	return t
}

// OnRecordProduced implements producer.HookRecordProduced: it starts the
// record's span and writes its context into the headers, replacing
// headers of the same names.
func (t *Tracer) OnRecordProduced(r *producer.Record) {
	parent := r.Context
	if parent == nil {
		parent = context.Background()
	}
	attrs := []attribute.KeyValue{
		attribute.String("messaging.system", "kafka"),
		attribute.String("messaging.operation.type", "send"),
		attribute.String("messaging.operation.name", "send"),
		attribute.String("messaging.destination.name", r.Topic),
		attribute.Int("messaging.message.body.size", len(r.Value)),
	}
	if r.Key != nil && utf8.Valid(r.Key) {
		attrs = append(attrs, attribute.String("messaging.kafka.message.key", string(r.Key)))
	}
	if r.Value == nil {
		attrs = append(attrs, attribute.Bool("messaging.kafka.message.tombstone", true))
	}
	ctx, _ := t.tracer.Start(parent, "send "+r.Topic,
		trace.WithSpanKind(trace.SpanKindProducer), trace.WithAttributes(attrs...))
	r.Context = ctx
	t.prop.Inject(ctx, headerCarrier{r})
}

// OnRecordDone implements producer.HookRecordDone: it ends the record's
// span with its partition, offset or error.
func (t *Tracer) OnRecordDone(r *producer.Record, err error) {
	if r.Context == nil {
		return
	}
	span := trace.SpanFromContext(r.Context)
	if part := r.Partition(); part >= 0 {
		span.SetAttributes(attribute.String("messaging.destination.partition.id", strconv.Itoa(int(part))))
	}
	if err != nil {
		span.SetAttributes(traceErrorType(err))
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	} else {
		span.SetAttributes(attribute.Int64("messaging.kafka.offset", r.Offset))
	}
	span.End()
}

// producerErrors are the error.type values of the producer's own
// errors, checked in order (a delivery timeout may wrap a broker error,
// which is found first).
var producerErrors = []struct {
	err  error
	name string
}{
	{producer.ErrRecordTooLarge, "record_too_large"},
	{producer.ErrInvalidRecord, "invalid_record"},
	{producer.ErrBufferFull, "buffer_full"},
	{producer.ErrClosed, "closed"},
	{producer.ErrAuthentication, "authentication"},
	{producer.ErrDeliveryTimeout, "delivery_timeout"},
	{producer.ErrOrderLost, "order_lost"},
	{producer.ErrPartitionGone, "partition_gone"},
	{producer.ErrTopicMetadata, "topic_metadata"},
	{context.Canceled, "canceled"},
	{context.DeadlineExceeded, "deadline_exceeded"},
}

// traceErrorType is error.type for a failed record: the Kafka name of
// its error code, else the name of the producer's error, else "_OTHER"
// (the conventions' value for an unknown error).
func traceErrorType(err error) attribute.KeyValue {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return attribute.String("error.type", ke.Message)
	}
	for _, e := range producerErrors {
		if errors.Is(err, e.err) {
			return attribute.String("error.type", e.name)
		}
	}
	return attribute.String("error.type", "_OTHER")
}

// headerCarrier is a record's headers as a TextMapCarrier.
type headerCarrier struct{ r *producer.Record }

func (c headerCarrier) Get(key string) string {
	for _, h := range c.r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

// Set replaces the first header named key, or appends one, in a new
// slice: the caller's may be shared by other records.
func (c headerCarrier) Set(key, value string) {
	hs := make([]producer.Header, len(c.r.Headers), len(c.r.Headers)+1)
	copy(hs, c.r.Headers)
	c.r.Headers = hs
	for i, h := range hs {
		if h.Key == key {
			hs[i].Value = []byte(value)
			return
		}
	}
	c.r.Headers = append(hs, producer.Header{Key: key, Value: []byte(value)})
}

func (c headerCarrier) Keys() []string {
	keys := make([]string, len(c.r.Headers))
	for i, h := range c.r.Headers {
		keys[i] = h.Key
	}
	return keys
}

var (
	_ producer.HookRecordProduced = (*Tracer)(nil)
	_ producer.HookRecordDone     = (*Tracer)(nil)
)
