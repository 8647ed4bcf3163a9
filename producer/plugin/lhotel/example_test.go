package lhotel_test

import (
	"context"
	"fmt"
	"log"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/longhaul-kafka/longhaul/producer"
	"github.com/longhaul-kafka/longhaul/producer/plugin/lhotel"
	"github.com/longhaul-kafka/longhaul/producer/producertest"
)

// Metrics records on a meter of the given MeterProvider, fed by the
// producer's hooks; any exporter then reads them. The window gauge shows
// what each partition learned from the broker.
func ExampleNew() {
	c, err := producertest.Start(1, producertest.Topic{Name: "events", Partitions: 1, Window: 50})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	reader := sdkmetric.NewManualReader() // an exporter's reader in a real program
	m, err := lhotel.New(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)))
	if err != nil {
		log.Fatal(err)
	}
	p, err := producer.New(producer.BootstrapServers(c.Addr()), producer.Hooks(m))
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close(context.Background())

	if err := p.ProduceSync(context.Background(), &producer.Record{Topic: "events", Value: []byte("v")}).FirstErr(); err != nil {
		log.Fatal(err)
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		log.Fatal(err)
	}
	for _, mt := range rm.ScopeMetrics[0].Metrics {
		if mt.Name == "longhaul.producer.window" {
			fmt.Println("window of events/0:", mt.Data.(metricdata.Gauge[int64]).DataPoints[0].Value)
		}
	}
	// Output: window of events/0: 50
}

// A Tracer opens a span per record, a child of the span in the record's
// Context, and writes its W3C traceparent into the record's headers for
// the consumer.
func ExampleNewTracer() {
	c, err := producertest.Start(1, producertest.Topic{Name: "events"})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	exp := tracetest.NewInMemoryExporter() // an OTLP exporter in a real program
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer tp.Shutdown(context.Background())
	p, err := producer.New(producer.BootstrapServers(c.Addr()), producer.Hooks(lhotel.NewTracer(tp)))
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close(context.Background())

	ctx, parent := tp.Tracer("app").Start(context.Background(), "handle order")
	r := &producer.Record{Topic: "events", Value: []byte("v"), Context: ctx}
	if err := p.ProduceSync(context.Background(), r).FirstErr(); err != nil {
		log.Fatal(err)
	}
	parent.End()
	send := exp.GetSpans()[0]
	fmt.Println(send.Name, send.SpanKind, send.Parent.SpanID() == parent.SpanContext().SpanID())
	fmt.Println(c.Records("events", 0)[0].Headers[0].Key)
	// Output:
	// send events producer true
	// traceparent
}
