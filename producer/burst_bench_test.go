package producer

import (
	"context"
	"testing"
	"time"

	"github.com/longhaul-kafka/longhaul/internal/broker"
)

// BenchmarkBurstLatency measures how long a burst of records takes to be
// acknowledged after a pause, over an emulated long link (150 ms RTT,
// window 20), with the first-batch gate re-armed after every pause
// (longhaul.idle.rearm.ms 1 s, the old constant) and without (the default,
// 5 minutes). The re-armed gate sends the burst's first batch alone: one
// round trip more per burst (issue 20).
//
//	go test ./producer -run '^$' -bench BurstLatency -benchtime 5x
func BenchmarkBurstLatency(b *testing.B) {
	for _, tc := range []struct {
		name  string
		rearm time.Duration
	}{{"rearm=1s", time.Second}, {"rearm=default", 5 * time.Minute}} {
		b.Run(tc.name, func(b *testing.B) {
			const rtt = 150 * time.Millisecond
			c := startCluster(b, broker.Config{RTT: rtt, Topics: []broker.TopicConfig{{Name: "t", Partitions: 1, Window: 20}}})
			p := newTestProducer(b, c, IdleRearm(tc.rearm), MaxInFlightRequestsPerConnection(50), Linger(0))
			value := make([]byte, 1000)
			ctx := context.Background()
			burst := func() time.Duration {
				recs := make([]*Record, 90)
				for i := range recs {
					recs[i] = &Record{Topic: "t", Value: value}
					recs[i].SetPartition(0)
				}
				start := time.Now()
				if err := p.ProduceSync(ctx, recs...).FirstErr(); err != nil {
					b.Fatalf("burst: %v", err)
				}
				return time.Since(start)
			}
			burst() // learn the window
			var total time.Duration
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				time.Sleep(1200 * time.Millisecond) // past the 1 s re-arm
				b.StartTimer()
				total += burst()
			}
			b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms/burst")
			b.ReportMetric(float64(total)/float64(b.N)/float64(rtt), "RTTs/burst")
		})
	}
}
