package producer

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/longhaul-kafka/longhaul/internal/broker"
)

// benchLoop produces b.N records of size bytes to partition-less topic
// "bench" and waits for every callback. Records are recycled through a free
// list once called back, so the caller's record costs no allocation in
// steady state and allocs/record counts the producer's own.
func benchLoop(b *testing.B, p *Producer, size int) (failed int64) {
	b.Helper()
	value := make([]byte, size)
	free := make(chan *Record, 1<<16)
	var fails atomic.Int64
	cb := func(r *Record, err error) {
		if err != nil {
			fails.Add(1)
		}
		select {
		case free <- r:
		default:
		}
	}
	ctx := context.Background()
	// One record through first: metadata, producer id and the connection
	// are not what the benchmark measures.
	if err := p.ProduceSync(ctx, &Record{Topic: "bench", Value: value}).FirstErr(); err != nil {
		b.Fatalf("warm-up record: %v", err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		var r *Record
		select {
		case r = <-free:
			r.Timestamp = time.Time{}
		default:
			r = &Record{Topic: "bench", Value: value}
		}
		p.Produce(ctx, r, cb)
	}
	if err := p.Flush(ctx); err != nil {
		b.Fatalf("Flush: %v", err)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "records/s")
	b.ReportMetric(float64(after.Mallocs-before.Mallocs)/float64(b.N), "allocs/record")
	return fails.Load()
}

// BenchmarkProduce is the produce path against the embedded broker with no
// emulated delay, one partition: records/s and allocations per record
// (allocs/op is per record too; allocs/record also counts the sender and
// callback goroutines, and the broker's, which runs in this process).
//
//	go test -run '^$' -bench BenchmarkProduce -benchtime 200000x ./producer
func BenchmarkProduce(b *testing.B) {
	for _, size := range []int{100, 1024} {
		b.Run(fmt.Sprintf("record=%dB", size), func(b *testing.B) {
			c := startCluster(b, broker.Config{Topics: []broker.TopicConfig{{Name: "bench", Partitions: 1, Window: 20}}})
			p := newTestProducer(b, c, MaxInFlightRequestsPerConnection(20))
			if failed := benchLoop(b, p, size); failed > 0 {
				b.Fatalf("%d records failed", failed)
			}
		})
	}
}

// BenchmarkThroughputRTT produces 1 KiB records in 16 KiB batches to one
// partition over an emulated 50 ms round trip, with the topic's window 5
// (what every broker retains today) and 20 (KIP-1269). It reports MB/s of
// record values (1 MB = 1e6 bytes), the broker's largest number of batches
// in flight, and the share of the bound window x batch.size / RTT that was
// reached; a full 16 KiB batch carries 15 records, so 94 % is the most
// possible. The ramp-up (one batch until the first ack, then 5, then the
// learned window) is part of the measurement, so use at least a few
// thousand records:
//
//	go test -run '^$' -bench BenchmarkThroughputRTT -benchtime 20000x ./producer
func BenchmarkThroughputRTT(b *testing.B) {
	const (
		rtt    = 50 * time.Millisecond
		size   = 1024
		batchB = 16384
	)
	for _, window := range []int{5, 20} {
		b.Run(fmt.Sprintf("window=%d", window), func(b *testing.B) {
			c := startCluster(b, broker.Config{RTT: rtt, Topics: []broker.TopicConfig{{Name: "bench", Partitions: 1, Window: window}}})
			p := newTestProducer(b, c, MaxInFlightRequestsPerConnection(64), BatchSize(batchB),
				Linger(5*time.Millisecond), BufferMemory(4<<20))
			start := time.Now()
			if failed := benchLoop(b, p, size); failed > 0 {
				b.Fatalf("%d records failed", failed)
			}
			mbps := float64(b.N) * size / time.Since(start).Seconds() / 1e6
			bound := float64(window) * batchB / rtt.Seconds() / 1e6
			b.ReportMetric(mbps, "MB/s")
			b.ReportMetric(mbps/bound, "of-bound")
			b.ReportMetric(float64(c.PartitionStats("bench", 0).MaxInFlight), "max-in-flight")
		})
	}
}
