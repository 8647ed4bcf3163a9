package producer

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/longhaul-kafka/longhaul/internal/broker"
	"github.com/longhaul-kafka/longhaul/internal/testkit"
)

// BenchmarkReadbackFirstAck measures what read-back's ListOffsets ahead
// of each partition's first Produce request costs at start: the time from
// New to the acknowledgement of one record on each of 16 partitions (one
// embedded broker, its round trip emulated), with read-back off and on.
// Compare the two runs of one RTT.
func BenchmarkReadbackFirstAck(b *testing.B) {
	for _, rtt := range []time.Duration{0, 50 * time.Millisecond} {
		for _, rb := range []bool{false, true} {
			b.Run(fmt.Sprintf("rtt=%v/readback=%v", rtt, rb), func(b *testing.B) {
				c := testkit.StartCluster(b, broker.Config{RTT: rtt, Topics: []broker.TopicConfig{{Name: "t", Partitions: 16}}})
				var total time.Duration
				for b.Loop() {
					start := time.Now()
					p, err := New(BootstrapServers(c.Addr()), Linger(0), ReadBack(rb))
					if err != nil {
						b.Fatal(err)
					}
					recs := make([]*Record, 16)
					for i := range recs {
						recs[i] = &Record{Topic: "t", Value: []byte("v")}
						recs[i].SetPartition(int32(i))
					}
					if err := p.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
						b.Fatal(err)
					}
					total += time.Since(start)
					b.StopTimer()
					p.Close(context.Background())
					b.StartTimer()
				}
				b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "ms/first-acks")
			})
		}
	}
}
