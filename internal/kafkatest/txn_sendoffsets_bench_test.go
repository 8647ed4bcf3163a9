package kafkatest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-kafka/longhaul/producer"
	"github.com/longhaul-kafka/longhaul/protocol"
)

// BenchmarkTxnSendOffsetsOverlapOnKafka measures whether
// SendOffsetsToTransaction waits behind its transaction's produce
// traffic or overlaps it, on Kafka 4.4 at transaction version 2
// (FindCoordinator of the group, TxnOffsetCommit) and 1 (AddOffsetsToTxn
// first), through the proxies at 50 ms round trips. Each transaction
// first writes one record to each partition and waits for them (so every
// partition is in the transaction), then times SendOffsetsToTransaction
// on the quiet link (idle-ms); then produces sendoffsets-records records
// at once and calls SendOffsetsToTransaction right away (busy-ms),
// counting the records still unacknowledged when it returned
// (unacked-at-return), and times the produce from its first record to
// Flush's return (drain-ms). busy-ms near idle-ms and well below drain-ms
// is overlap; busy-ms near drain-ms would be SendOffsetsToTransaction
// serialized behind the produce window. Figures only, nothing asserted.
// With LONGHAUL_TXN_LOG set, the producer's debug log (each transactional
// request and answer) goes to that directory.
//
//	go test ./internal/kafkatest/ -run '^$' -bench TxnSendOffsetsOverlap -benchtime 1x
func BenchmarkTxnSendOffsetsOverlapOnKafka(b *testing.B) {
	for _, tc := range []struct {
		name     string
		features map[string]int
	}{{"TV2", nil}, {"TV1", map[string]int{protocol.FeatureTransactionVersion: 1}}} {
		b.Run(tc.name, func(b *testing.B) { benchSendOffsetsOverlap(b, tc.features) })
	}
}

const (
	soPartitions = 4
	soRecords    = 4000 // 1 KiB each: about 12 round trips at 5 batches of 16 KiB per partition
	soTxns       = 10
)

func benchSendOffsetsOverlap(b *testing.B, features map[string]int) {
	c := Start(b, Options{Features: features, BrokerConfig: map[string]string{
		"transaction.state.log.replication.factor": "1",
		"transaction.state.log.min.isr":            "1",
		"offsets.topic.replication.factor":         "1",
	}})
	c.CreateTopic(b, "so-out", soPartitions, 1, nil)
	c.CreateTopic(b, "so-in", 1, 1, nil)
	c.SetDelay(25 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	p := newLonghaul(b, c.ProxiedBootstrap(), nil, append(txnDebugLog(b, "sendoffsets-"+b.Name()[strings.LastIndex(b.Name(), "/")+1:]),
		producer.TransactionalID("so-bench"), producer.Linger(time.Millisecond), producer.BatchSize(16<<10))...)
	require.NoError(b, p.InitTransactions(ctx))
	g := producer.GroupMetadata{GroupID: "so-bench", Generation: -1}
	value := []byte(strings.Repeat("x", 1024))
	var idle, busy, drain time.Duration
	var unacked int64
	b.ResetTimer()
	for range b.N {
		for k := range soTxns {
			require.NoError(b, p.BeginTransaction())
			for part := range int32(soPartitions) {
				rec := &producer.Record{Topic: "so-out", Value: value}
				rec.SetPartition(part)
				require.NoError(b, p.ProduceSync(ctx, rec).FirstErr())
			}
			offs := []producer.TransactionOffset{{Topic: "so-in", Partition: 0, Offset: int64(2*k + 1), LeaderEpoch: -1}}
			t0 := time.Now()
			require.NoError(b, p.SendOffsetsToTransaction(ctx, g, offs))
			idle += time.Since(t0)

			before := p.Stats().RecordsSent
			start := time.Now()
			for i := range soRecords {
				rec := &producer.Record{Topic: "so-out", Value: value}
				rec.SetPartition(int32(i % soPartitions))
				p.Produce(ctx, rec, nil)
			}
			offs[0].Offset++
			t1 := time.Now()
			require.NoError(b, p.SendOffsetsToTransaction(ctx, g, offs))
			busy += time.Since(t1)
			unacked += soRecords - (p.Stats().RecordsSent - before)
			require.NoError(b, p.Flush(ctx))
			drain += time.Since(start)
			require.NoError(b, p.CommitTransaction(ctx))
		}
	}
	n := float64(b.N * soTxns)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) / n }
	b.ReportMetric(ms(idle), "idle-ms")
	b.ReportMetric(ms(busy), "busy-ms")
	b.ReportMetric(ms(drain), "drain-ms")
	b.ReportMetric(float64(unacked)/n, "unacked-at-return")
	b.Logf("%s: SendOffsetsToTransaction idle %.1f ms, during produce %.1f ms (%.0f of %d records unacknowledged at its return), produce drain %.1f ms",
		fmt.Sprint(features), ms(idle), ms(busy), float64(unacked)/n, soRecords, ms(drain))
}
