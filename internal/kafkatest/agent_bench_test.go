package kafkatest

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/longhaul-kafka/longhaul/producer"
)

// sideBySide is one measured client run.
type sideBySide struct {
	client     string
	partitions int
	mbps       float64 // MB/s (10^6 bytes of record values) in the measured window
	bound      float64 // partitions x in-flight x batch.size / RTT, MB/s
	note       string
}

// BenchmarkAgentSideBySide is issue 14's comparison on Apache Kafka 4.4
// with the KIP-1269 agent, over the harness proxy at 50 ms RTT, 1 KiB
// records, batch.size 16384, acks=all, idempotent, linger 5 ms: longhaul
// at topic windows 5, 20 and 50 (max.in.flight.requests.per.connection
// 64), franz-go (at most 5 batches per partition with idempotence) and
// the Java client's ProducerPerformance (max.in.flight 5, its limit with
// idempotence), on 1 and 16 partitions. Each run gets a fresh topic,
// produces as fast as the client accepts, warms up, then measures the
// acknowledged value bytes over a fixed window (Java: its steady-state
// line after --warmup-records). It reports MB/s per client and the
// fraction of the bound; it asserts nothing about speed.
//
//	go test -run '^$' -bench BenchmarkAgentSideBySide -benchtime 1x -timeout 30m ./internal/kafkatest
//
// LONGHAUL_BENCH_MEASURE (default 10s) sets the measured window.
func BenchmarkAgentSideBySide(b *testing.B) {
	measure := 10 * time.Second
	if s := os.Getenv("LONGHAUL_BENCH_MEASURE"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			b.Fatalf("LONGHAUL_BENCH_MEASURE=%q: %v", s, err)
		}
		measure = d
	}
	const (
		oneWay    = 25 * time.Millisecond
		rtt       = 2 * oneWay
		batchSize = 16384
		size      = 1024
	)
	warmup := 3 * time.Second
	c := Start(b, Options{Agent: AgentOnAll, HeapMB: 1024})
	c.SetDelay(oneWay)
	bound := func(partitions, inflight int) float64 {
		return float64(partitions*inflight*batchSize) / rtt.Seconds() / 1e6
	}
	var rows []sideBySide
	run := 0
	for range b.N {
		for _, parts := range []int{1, 16} {
			for _, w := range []int{5, 20, 50} {
				run++
				topic := fmt.Sprintf("bench-lh-w%d-p%d-%d", w, parts, run)
				c.CreateTopic(b, topic, int32(parts), 1, windowTopic(w))
				mbps := measureLonghaul(b, c, topic, size, batchSize, warmup, measure)
				rows = append(rows, sideBySide{client: fmt.Sprintf("longhaul w%d", w), partitions: parts, mbps: mbps, bound: bound(parts, w)})
				b.Logf("%v", rows[len(rows)-1])
			}
			topic := fmt.Sprintf("bench-kgo-p%d-%d", parts, run)
			c.CreateTopic(b, topic, int32(parts), 1, windowTopic(50))
			mbps := measureKgo(b, c, topic, size, batchSize, warmup, measure)
			rows = append(rows, sideBySide{client: "kgo", partitions: parts, mbps: mbps, bound: bound(parts, 5)})
			b.Logf("%v", rows[len(rows)-1])

			topic = fmt.Sprintf("bench-java-p%d-%d", parts, run)
			c.CreateTopic(b, topic, int32(parts), 1, windowTopic(50))
			mbps, note := measureJava(b, c, topic, size, batchSize, bound(parts, 5), warmup, measure)
			rows = append(rows, sideBySide{client: "Java ProducerPerformance", partitions: parts, mbps: mbps, bound: bound(parts, 5), note: note})
			b.Logf("%v", rows[len(rows)-1])
		}
	}
	var t strings.Builder
	t.WriteString("| partitions | client | MB/s | bound MB/s | of bound | note |\n|---:|---|---:|---:|---:|---|\n")
	for _, r := range rows {
		fmt.Fprintf(&t, "| %d | %s | %.2f | %.2f | %.0f %% | %s |\n", r.partitions, r.client, r.mbps, r.bound, 100*r.mbps/r.bound, r.note)
		b.ReportMetric(r.mbps, fmt.Sprintf("MB/s-%s-p%d", strings.ReplaceAll(r.client, " ", "_"), r.partitions))
	}
	for _, parts := range []int{1, 16} {
		var w50, kgoV, java float64
		for _, r := range rows {
			if r.partitions != parts {
				continue
			}
			switch r.client {
			case "longhaul w50":
				w50 = r.mbps
			case "kgo":
				kgoV = r.mbps
			case "Java ProducerPerformance":
				java = r.mbps
			}
		}
		fmt.Fprintf(&t, "\n%d partition(s): longhaul w50 / kgo = %s, / Java = %s", parts, ratio(w50, kgoV), ratio(w50, java))
	}
	b.Logf("Kafka %s + KIP-1269 agent, one node, proxy at %v RTT, %d B records, batch.size %d, acks=all, idempotent, warm-up %v, measured %v:\n%s",
		Version, rtt, size, batchSize, warmup, measure, t.String())
}

func (r sideBySide) String() string {
	return fmt.Sprintf("%d partitions, %s: %.2f MB/s of %.2f MB/s bound (%.0f %%) %s", r.partitions, r.client, r.mbps, r.bound, 100*r.mbps/r.bound, r.note)
}

// measureWindow runs produce (which must return when ctx ends) and
// returns MB/s of acknowledged value bytes between warmup and
// warmup+measure.
func measureWindow(warmup, measure time.Duration, acked *atomic.Int64, produce func(ctx context.Context)) float64 {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); produce(ctx) }()
	time.Sleep(warmup)
	a0, t0 := acked.Load(), time.Now()
	time.Sleep(measure)
	a1, t1 := acked.Load(), time.Now()
	cancel()
	<-done
	return float64(a1-a0) / t1.Sub(t0).Seconds() / 1e6
}

func measureLonghaul(b *testing.B, c *Cluster, topic string, size, batchSize int, warmup, measure time.Duration) float64 {
	p, err := producer.New(
		producer.BootstrapServers(strings.Split(c.ProxiedBootstrap(), ",")...),
		producer.BatchSize(batchSize),
		producer.MaxInFlightRequestsPerConnection(64),
		producer.BufferMemory(64<<20),
		producer.DeliveryTimeout(10*time.Minute),
	)
	if err != nil {
		b.Fatal(err)
	}
	var acked, failed atomic.Int64
	val := make([]byte, size)
	mbps := measureWindow(warmup, measure, &acked, func(ctx context.Context) {
		for ctx.Err() == nil {
			p.Produce(ctx, &producer.Record{Topic: topic, Value: val}, func(_ *producer.Record, err error) {
				if err == nil {
					acked.Add(int64(size))
				} else {
					failed.Add(1)
				}
			})
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p.Close(ctx)
	return mbps
}

func measureKgo(b *testing.B, c *Cluster, topic string, size, batchSize int, warmup, measure time.Duration) float64 {
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(strings.Split(c.ProxiedBootstrap(), ",")...),
		kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(5*time.Millisecond),
		kgo.ProducerBatchMaxBytes(int32(batchSize)),
		kgo.MaxBufferedBytes(64<<20),
	)
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	var acked atomic.Int64
	val := make([]byte, size)
	return measureWindow(warmup, measure, &acked, func(ctx context.Context) {
		for ctx.Err() == nil {
			cl.Produce(ctx, &kgo.Record{Value: val}, func(_ *kgo.Record, err error) {
				if err == nil {
					acked.Add(int64(size))
				}
			})
		}
	})
}

var steadyRE = regexp.MustCompile(`(?m)^\d+ steady state records sent, [0-9.]+ records/sec \(([0-9.]+) MB/sec\)`)

// measureJava runs ProducerPerformance with enough records for about
// warmup+measure at the 5-in-flight bound, the first ones as
// --warmup-records, and returns its steady-state MB/s in 10^6 bytes.
func measureJava(b *testing.B, c *Cluster, topic string, size, batchSize int, boundMBps float64, warmup, measure time.Duration) (float64, string) {
	perSec := boundMBps * 1e6 / float64(size)
	warm := int(perSec * warmup.Seconds())
	total := warm + int(perSec*measure.Seconds())
	args := []string{
		"--topic", topic,
		"--num-records", strconv.Itoa(total),
		"--warmup-records", strconv.Itoa(warm),
		"--record-size", strconv.Itoa(size),
		"--throughput", "-1",
		"--producer-props", "bootstrap.servers=" + c.ProxiedBootstrap(), "acks=all", "enable.idempotence=true",
		"batch.size=" + strconv.Itoa(batchSize), "linger.ms=5", "max.in.flight.requests.per.connection=5", "buffer.memory=67108864",
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	out, err := c.RunJavaPerf(ctx, args...)
	if err != nil {
		b.Fatalf("ProducerPerformance: %v\n%s", err, out)
	}
	m := steadyRE.FindStringSubmatch(out)
	if m == nil {
		b.Fatalf("ProducerPerformance: no steady-state line:\n%s", out)
	}
	mib, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		b.Fatal(err)
	}
	return mib * 1024 * 1024 / 1e6, fmt.Sprintf("%d records, %d warm-up", total, warm)
}
