package lhotel_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/longhaul-kafka/longhaul/producer"
	"github.com/longhaul-kafka/longhaul/producer/plugin/lhotel"
	"github.com/longhaul-kafka/longhaul/producer/producertest"
)

// traced is a producer with a Tracer on a fake cluster, its spans in
// memory.
type traced struct {
	c   *producertest.Cluster
	p   *producer.Producer
	exp *tracetest.InMemoryExporter
	tp  *sdktrace.TracerProvider
}

func startTraced(t *testing.T, hooks ...producer.Hook) *traced {
	t.Helper()
	c := producertest.NewCluster(t, 1, producertest.Topic{Name: "t", Partitions: 2})
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	p, err := producer.New(producer.BootstrapServers(c.Addr()), producer.Property("max.request.size", "2000"), producer.Hooks(hooks...),
		producer.Hooks(lhotel.NewTracer(tp)))
	require.NoError(t, err)
	t.Cleanup(func() { p.Close(context.Background()) })
	return &traced{c: c, p: p, exp: exp, tp: tp}
}

func attrs(s tracetest.SpanStub) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes {
		m[kv.Key] = kv.Value
	}
	return m
}

func spanNamed(t *testing.T, spans tracetest.SpanStubs, id trace.SpanID) tracetest.SpanStub {
	t.Helper()
	for _, s := range spans {
		if s.SpanContext.SpanID() == id {
			return s
		}
	}
	t.Fatalf("no span %v among %d", id, len(spans))
	return tracetest.SpanStub{}
}

// TestTracerSpanPerRecord: each record gets a producer span named "send
// t", a child of the span in its Context (or a root without one), ended
// at its outcome with the messaging attributes, partition and offset;
// the record as written carries that span's W3C traceparent, from which
// a consumer extracts the same span context; the callback sees the send
// span in the record's Context.
func TestTracerSpanPerRecord(t *testing.T) {
	tr := startTraced(t)
	parentCtx, parent := tr.tp.Tracer("app").Start(context.Background(), "handle request")
	keyed := &producer.Record{Topic: "t", Key: []byte("user-1"), Value: []byte("hello"), Context: parentCtx,
		Headers: []producer.Header{{Key: "own", Value: []byte("x")}}}
	keyed.SetPartition(1)
	tomb := &producer.Record{Topic: "t", Key: []byte{0xff, 0xfe}} // no Context, binary key, nil value
	tomb.SetPartition(0)
	var cbSpan trace.SpanContext
	done := make(chan struct{})
	tr.p.Produce(context.Background(), keyed, func(r *producer.Record, err error) {
		require.NoError(t, err)
		cbSpan = trace.SpanContextFromContext(r.Context)
		close(done)
	})
	require.NoError(t, tr.p.ProduceSync(context.Background(), tomb).FirstErr())
	<-done
	parent.End()

	spans := tr.exp.GetSpans()
	require.Len(t, spans, 3)
	send := spanNamed(t, spans, cbSpan.SpanID())
	require.Equal(t, "send t", send.Name)
	require.Equal(t, trace.SpanKindProducer, send.SpanKind)
	require.Equal(t, parent.SpanContext().TraceID(), send.SpanContext.TraceID())
	require.Equal(t, parent.SpanContext().SpanID(), send.Parent.SpanID())
	a := attrs(send)
	require.Equal(t, "kafka", a["messaging.system"].AsString())
	require.Equal(t, "send", a["messaging.operation.type"].AsString())
	require.Equal(t, "send", a["messaging.operation.name"].AsString())
	require.Equal(t, "t", a["messaging.destination.name"].AsString())
	require.Equal(t, "1", a["messaging.destination.partition.id"].AsString())
	require.EqualValues(t, 5, a["messaging.message.body.size"].AsInt64())
	require.Equal(t, "user-1", a["messaging.kafka.message.key"].AsString())
	require.EqualValues(t, keyed.Offset, a["messaging.kafka.offset"].AsInt64())
	require.NotContains(t, a, attribute.Key("messaging.kafka.message.tombstone"))
	require.Equal(t, codes.Unset, send.Status.Code)

	var root tracetest.SpanStub
	for _, s := range spans {
		if s.Name == "send t" && s.SpanContext.SpanID() != send.SpanContext.SpanID() {
			root = s
		}
	}
	require.False(t, root.Parent.IsValid(), "no Context: a new trace")
	ra := attrs(root)
	require.True(t, ra["messaging.kafka.message.tombstone"].AsBool())
	require.NotContains(t, ra, attribute.Key("messaging.kafka.message.key"), "a binary key is not an attribute")
	require.Equal(t, "0", ra["messaging.destination.partition.id"].AsString())

	// What a consumer reads.
	for part, want := range map[int32]trace.SpanContext{1: send.SpanContext, 0: root.SpanContext} {
		recs := tr.c.Records("t", part)
		require.Len(t, recs, 1)
		carrier := propagation.MapCarrier{}
		for _, h := range recs[0].Headers {
			carrier[h.Key] = string(h.Value)
		}
		got := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), carrier))
		require.True(t, got.IsValid(), "partition %d: no traceparent in %v", part, recs[0].Headers)
		require.Equal(t, want.TraceID(), got.TraceID())
		require.Equal(t, want.SpanID(), got.SpanID())
	}
	require.Equal(t, "own", tr.c.Records("t", 1)[0].Headers[0].Key, "the record's own headers stay first")
}

// TestTracerFailures: a span ends with status Error, error.type and the
// error as an event for a broker error the producer does not retry, and
// for records Produce refuses (too large, after Close); a Record
// produced again is a child of its previous send unless its Context is
// reset, replaces its traceparent instead of adding one, and leaves the
// header slice it shared with another record alone.
func TestTracerFailures(t *testing.T) {
	tr := startTraced(t)
	tr.c.InjectError("t", 0, kerr.InvalidRecord.Code, 1)
	rejected := &producer.Record{Topic: "t", Value: []byte("bad")}
	rejected.SetPartition(0)
	tooLarge := &producer.Record{Topic: "t", Value: make([]byte, 3000)}
	res := tr.p.ProduceSync(context.Background(), rejected, tooLarge)
	require.ErrorIs(t, res[0].Err, kerr.InvalidRecord)
	require.ErrorIs(t, res[1].Err, producer.ErrRecordTooLarge)

	shared := []producer.Header{{Key: "own", Value: []byte("x")}}
	again := &producer.Record{Topic: "t", Value: []byte("v"), Headers: shared[:1:1]}
	again.SetPartition(1)
	other := &producer.Record{Topic: "t", Value: []byte("w"), Headers: shared}
	other.SetPartition(1)
	require.NoError(t, tr.p.ProduceSync(context.Background(), again, other).FirstErr())
	first := trace.SpanContextFromContext(again.Context)
	require.NoError(t, tr.p.ProduceSync(context.Background(), again).FirstErr())
	second := spanNamed(t, tr.exp.GetSpans(), trace.SpanContextFromContext(again.Context).SpanID())
	require.Equal(t, first.SpanID(), second.Parent.SpanID(), "produced again without resetting Context: a child of the first send")
	again.Context = nil
	require.NoError(t, tr.p.ProduceSync(context.Background(), again).FirstErr())
	require.False(t, spanNamed(t, tr.exp.GetSpans(), trace.SpanContextFromContext(again.Context).SpanID()).Parent.IsValid(), "Context reset: a new trace")
	require.Len(t, again.Headers, 2, "one traceparent, replaced")
	require.Equal(t, []producer.Header{{Key: "own", Value: []byte("x")}}, shared, "the shared slice is unchanged")

	require.NoError(t, tr.p.Close(context.Background()))
	late := &producer.Record{Topic: "t", Value: []byte("late")}
	require.ErrorIs(t, tr.p.ProduceSync(context.Background(), late).FirstErr(), producer.ErrClosed)

	spans := tr.exp.GetSpans()
	require.Len(t, spans, 7, "one span per record given to Produce, each ended")
	byErr := map[string]tracetest.SpanStub{}
	for _, s := range spans {
		if s.Status.Code == codes.Error {
			byErr[attrs(s)["error.type"].AsString()] = s
		}
	}
	require.Len(t, byErr, 3)
	for _, name := range []string{"INVALID_RECORD", "record_too_large", "closed"} {
		s, ok := byErr[name]
		require.True(t, ok, "no span with error.type %s in %v", name, byErr)
		require.NotEmpty(t, s.Status.Description)
		require.Len(t, s.Events, 1)
		require.Equal(t, "exception", s.Events[0].Name)
	}
	require.NotContains(t, attrs(byErr["record_too_large"]), attribute.Key("messaging.destination.partition.id"), "never placed")
}

// TestTracerWithPropagator: the propagator option decides the headers
// (here W3C baggage besides traceparent); without the Tracer (the
// control) no header is added.
func TestTracerWithPropagator(t *testing.T) {
	c := producertest.NewCluster(t, 1, producertest.Topic{Name: "t"})
	tp := sdktrace.NewTracerProvider()
	defer tp.Shutdown(context.Background())
	prop := propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
	p, err := producer.New(producer.BootstrapServers(c.Addr()), producer.Hooks(lhotel.NewTracer(tp, lhotel.WithPropagator(prop))))
	require.NoError(t, err)
	defer p.Close(context.Background())
	m, err := baggage.NewMember("tenant", "acme")
	require.NoError(t, err)
	b, err := baggage.New(m)
	require.NoError(t, err)
	ctx := baggage.ContextWithBaggage(context.Background(), b)
	require.NoError(t, p.ProduceSync(context.Background(), &producer.Record{Topic: "t", Value: []byte("v"), Context: ctx}).FirstErr())

	plain, err := producer.New(producer.BootstrapServers(c.Addr()))
	require.NoError(t, err)
	defer plain.Close(context.Background())
	require.NoError(t, plain.ProduceSync(context.Background(), &producer.Record{Topic: "t", Value: []byte("plain"), Context: ctx}).FirstErr())

	recs := c.Records("t", 0)
	require.Len(t, recs, 2)
	names := map[string]string{}
	for _, h := range recs[0].Headers {
		names[h.Key] = string(h.Value)
	}
	require.Contains(t, names, "traceparent")
	require.Equal(t, "tenant=acme", names["baggage"])
	require.Empty(t, recs[1].Headers, "control: no Tracer, no headers")
}
