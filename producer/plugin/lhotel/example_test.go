package lhotel_test

import (
	"context"
	"fmt"
	"log"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

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
