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
func benchLoop(b *testing.B, p *Producer, size int, stamped bool) (failed int64) {
	b.Helper()
	return benchKeyed(b, p, size, stamped, nil)
}

// benchKeyed is benchLoop with the i-th record keyed keys[i % len(keys)]
// (keyless when keys is empty).
func benchKeyed(b *testing.B, p *Producer, size int, stamped bool, keys [][]byte) (failed int64) {
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
	// The loop's own thread: its CPU time is what the Produce goroutine
	// spent, whatever the rest of the pipeline (or the machine) did.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cpu0 := threadCPU(b)
	start := time.Now()
	stamp := time.Now()
	for i := range b.N {
		var r *Record
		select {
		case r = <-free:
		default:
			r = &Record{Topic: "bench", Value: value}
		}
		r.Timestamp = time.Time{}
		if len(keys) > 0 {
			r.Key = keys[i%len(keys)]
		}
		if stamped {
			// A caller that sets the timestamp (the bench program does,
			// for latency): the producer then reads no clock per record.
			r.Timestamp = stamp.Add(time.Duration(i))
		}
		p.Produce(ctx, r, cb)
	}
	produceCPU := threadCPU(b) - cpu0
	if err := p.Flush(ctx); err != nil {
		b.Fatalf("Flush: %v", err)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "records/s")
	b.ReportMetric(float64(after.Mallocs-before.Mallocs)/float64(b.N), "allocs/record")
	if cpu0 >= 0 { // unknown outside Linux
		b.ReportMetric(float64(produceCPU.Nanoseconds())/float64(b.N), "produce-cpu-ns/record")
	}
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
			if failed := benchLoop(b, p, size, false); failed > 0 {
				b.Fatalf("%d records failed", failed)
			}
		})
	}
}

// BenchmarkProduceSticky is the bench program's goal-1 shape on the
// embedded broker: 100-byte keyless records over 16 partitions in 16 KiB
// batches, with and without a caller-set timestamp. Its figure is
// produce-cpu-ns/record, the CPU the producing goroutine spent per record
// (its thread's CPU time): the Produce goroutine is the serial stage of
// that case, and its cost does not move with the broker's share of the
// machine the way records/s does.
//
//	go test -run '^$' -bench BenchmarkProduceSticky -benchtime 2000000x ./producer
func BenchmarkProduceSticky(b *testing.B) {
	for _, stamped := range []bool{false, true} {
		b.Run(fmt.Sprintf("stamped=%v", stamped), func(b *testing.B) {
			c := startCluster(b, broker.Config{Topics: []broker.TopicConfig{{Name: "bench", Partitions: 16, Window: 5}}})
			p := newTestProducer(b, c, MaxInFlightRequestsPerConnection(64), BatchSize(16384),
				Linger(5*time.Millisecond), BufferMemory(32<<20))
			if failed := benchLoop(b, p, 100, stamped); failed > 0 {
				b.Fatalf("%d records failed", failed)
			}
		})
	}
}

// BenchmarkProduceSticky1KiB is BenchmarkProduceSticky with 1 KiB records
// stamped by the caller, the shape where the bench program compares client
// CPU per byte with kgo's: per record the Produce goroutine copies the value
// into a batch buffer that the connection's writev last read, so its
// produce-cpu-ns/record includes waiting for those cache lines.
//
//	go test -run '^$' -bench BenchmarkProduceSticky1KiB -benchtime 500000x ./producer
func BenchmarkProduceSticky1KiB(b *testing.B) {
	c := startCluster(b, broker.Config{Topics: []broker.TopicConfig{{Name: "bench", Partitions: 16, Window: 5}}})
	p := newTestProducer(b, c, MaxInFlightRequestsPerConnection(64), BatchSize(16384),
		Linger(5*time.Millisecond), BufferMemory(32<<20))
	if failed := benchLoop(b, p, 1024, true); failed > 0 {
		b.Fatalf("%d records failed", failed)
	}
}

// BenchmarkProduceKeyed is 100-byte records keyed over 1,000 partitions,
// the shape where every record lands in a batch of its own partition that
// is not in the CPU cache and a batch opens every few records: what the
// accumulator's per-record path and the sender's pass cost with many
// partitions.
//
//	go test -run '^$' -bench BenchmarkProduceKeyed -benchtime 1000000x ./producer
func BenchmarkProduceKeyed(b *testing.B) {
	const parts = 1000
	c := startCluster(b, broker.Config{Topics: []broker.TopicConfig{{Name: "bench", Partitions: parts, Window: 5}}})
	p := newTestProducer(b, c, MaxInFlightRequestsPerConnection(64), BatchSize(16384),
		Linger(5*time.Millisecond), BufferMemory(32<<20))
	keys := make([][]byte, 4*parts)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "key-%d", i)
	}
	if failed := benchKeyed(b, p, 100, true, keys); failed > 0 {
		b.Fatalf("%d records failed", failed)
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
			if failed := benchLoop(b, p, size, false); failed > 0 {
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
