package producer

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/longhaul-kafka/longhaul/internal/broker"
)

// BenchmarkProduceMetricsPush is the produce path with client metrics push
// (enable.metrics.push, on by default) against the embedded broker, in
// small batches (512 bytes: about four 100-byte records each), so that what
// the producer does per batch and per request shows: push off; on against
// a broker that takes client metrics but subscribes to none (Kafka with a
// metrics reporter and no matching CLIENT_METRICS config); on with every
// metric subscribed. cpu-ns/record is the process's CPU (the broker's
// included) per record, steadier than records/s on a shared machine.
//
//	go test -run '^$' -bench BenchmarkProduceMetricsPush -benchtime 200000x -count 6 ./producer
func BenchmarkProduceMetricsPush(b *testing.B) {
	for _, tc := range []struct {
		name string
		push bool
		sub  *broker.TelemetryConfig
	}{
		{"push=off", false, &broker.TelemetryConfig{PushInterval: time.Hour}},
		{"subscription=none", true, &broker.TelemetryConfig{PushInterval: time.Hour}},
		{"subscription=all", true, &broker.TelemetryConfig{Metrics: []string{"*"}, PushInterval: time.Hour}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			c := startCluster(b, broker.Config{Topics: []broker.TopicConfig{{Name: "bench", Partitions: 4, Window: 20}}})
			c.SetTelemetry(tc.sub)
			p := newTestProducer(b, c, MaxInFlightRequestsPerConnection(40), BatchSize(512),
				Property("enable.metrics.push", fmt.Sprint(tc.push)))
			if err := p.ProduceSync(context.Background(), &Record{Topic: "bench", Value: []byte("v")}).FirstErr(); err != nil {
				b.Fatal(err) // a produce connection, which offers client metrics
			}
			if tc.sub.Metrics != nil {
				// The subscription is loaded before the measurement.
				for deadline := time.Now().Add(10 * time.Second); len(c.TelemetrySubscriptionAsks()) == 0; {
					if time.Now().After(deadline) {
						b.Fatal("no GetTelemetrySubscriptions")
					}
					time.Sleep(time.Millisecond)
				}
				time.Sleep(10 * time.Millisecond)
			}
			cpu0 := processCPU(b)
			if failed := benchLoop(b, p, 100, false); failed > 0 {
				b.Fatalf("%d records failed", failed)
			}
			if cpu0 >= 0 {
				b.ReportMetric(float64((processCPU(b)-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/record")
			}
		})
	}
}
