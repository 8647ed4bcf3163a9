package lhprom_test

import (
	"context"
	"fmt"
	"log"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/longhaul-kafka/longhaul/producer"
	"github.com/longhaul-kafka/longhaul/producer/plugin/lhprom"
	"github.com/longhaul-kafka/longhaul/producer/producertest"
)

// Metrics is a prometheus.Collector fed by the producer's hooks; register
// it, pass it to producer.Hooks, and serve the registry (promhttp). The
// window gauge shows what each partition learned from the broker.
func ExampleNew() {
	c, err := producertest.Start(1, producertest.Topic{Name: "events", Partitions: 1, Window: 50})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	m := lhprom.New()
	reg := prometheus.NewRegistry()
	reg.MustRegister(m)
	p, err := producer.New(producer.BootstrapServers(c.Addr()), producer.Hooks(m))
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close(context.Background())

	if err := p.ProduceSync(context.Background(), &producer.Record{Topic: "events", Value: []byte("v")}).FirstErr(); err != nil {
		log.Fatal(err)
	}
	families, err := reg.Gather()
	if err != nil {
		log.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == "longhaul_producer_window" {
			fmt.Println("window of events/0:", f.GetMetric()[0].GetGauge().GetValue())
		}
	}
	// Output: window of events/0: 50
}
