package producer

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/longhaul-kafka/longhaul/internal/kafkatest"
	"github.com/longhaul-kafka/longhaul/protocol"
)

// TestTxnCoreOnKafka runs runTxnScenario against Apache Kafka 4.4,
// formatted at transaction.version 2 (its default) and at 1, reading back
// with an independent read_committed kgo consumer and OffsetFetch with
// RequireStable (KIP-447). It lives here, not in internal/kafkatest,
// because the core it drives is unexported. Without Java and Maven it
// skips (see kafkatest.Start).
//
//	go test ./producer/ -run TestTxnCoreOnKafka -v
func TestTxnCoreOnKafka(t *testing.T) {
	for _, tc := range []struct {
		name string
		tv   int
	}{{"TV2", 2}, {"TV1", 1}} {
		t.Run(tc.name, func(t *testing.T) {
			var opts kafkatest.Options
			var cfg protocol.DialConfig
			if tc.tv == 1 {
				opts.Features = map[string]int{protocol.FeatureTransactionVersion: 1}
				cfg.MaxVersions = map[int16]int16{0: protocol.MaxTV1ProduceVersion}
			}
			opts.BrokerConfig = map[string]string{
				"transaction.state.log.replication.factor": "1",
				"transaction.state.log.min.isr":            "1",
				"offsets.topic.replication.factor":         "1",
				// The timeout probe below waits for the coordinator's
				// abort of a timed-out transaction (default every 10 s).
				"transaction.abort.timed.out.transaction.cleanup.interval.ms": "500",
			}
			c := kafkatest.Start(t, opts)
			const topic = "txn-out"
			c.CreateTopic(t, topic, 2, 1, nil)
			c.CreateTopic(t, "in", 1, 1, nil)
			d := newTxnWireDriver(t, c.DirectAddr(0), cfg, topic, 2)
			var read map[int32][]string
			runTxnScenario(t, d, topic, tc.tv, txnScenarioBackend{
				committed: func(partition int32) []string {
					if read == nil {
						read = readCommitted(t, c, topic, 6)
					}
					return read[partition]
				},
				offset: func() int64 { return stableOffset(t, d.group, "eos", "in", 0) },
			})
			t.Logf("transaction version %d: %d produce answers CONCURRENT_TRANSACTIONS (previous markers pending), retried", tc.tv, d.concurrent)
			probeTimedOutCommit(t, c, cfg, topic)
		})
	}
}

// readCommitted reads topic from the start with a read_committed kgo
// consumer until it has n records (or a minute passed) and a little
// longer, so that a record too many would show.
func readCommitted(t *testing.T, c *kafkatest.Cluster, topic string, n int) map[int32][]string {
	cl := c.Client(t, kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	out := map[int32][]string{}
	got := 0
	deadline := time.Now().Add(time.Minute)
	extra := time.Time{}
	for time.Now().Before(deadline) && (extra.IsZero() || time.Now().Before(extra)) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		fs := cl.PollFetches(ctx)
		cancel()
		fs.EachRecord(func(r *kgo.Record) {
			out[r.Partition] = append(out[r.Partition], string(r.Value))
			got++
		})
		if got >= n && extra.IsZero() {
			extra = time.Now().Add(2 * time.Second)
		}
	}
	return out
}

// stableOffset fetches group's committed offset of topic/partition from
// its coordinator (the address of coord), waiting while the transaction's
// commit is not stable yet (UNSTABLE_OFFSET_COMMIT). OffsetFetch stays at
// v9, which names topics (v10 takes topic ids).
func stableOffset(t *testing.T, coord *protocol.Conn, group, topic string, partition int32) int64 {
	conn, err := protocol.Dial(context.Background(), coord.Addr(), protocol.DialConfig{MaxVersions: map[int16]int16{9: 9}})
	require.NoError(t, err)
	defer conn.Close()
	for range 600 {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Group = group
		req.RequireStable = true
		rt := kmsg.NewOffsetFetchRequestTopic()
		rt.Topic, rt.Partitions = topic, []int32{partition}
		req.Topics = []kmsg.OffsetFetchRequestTopic{rt}
		rg := kmsg.NewOffsetFetchRequestGroup()
		rg.Group = group
		rgt := kmsg.NewOffsetFetchRequestGroupTopic()
		rgt.Topic, rgt.Partitions = topic, []int32{partition}
		rg.Topics = []kmsg.OffsetFetchRequestGroupTopic{rgt}
		req.Groups = []kmsg.OffsetFetchRequestGroup{rg}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		r, err := conn.Do(ctx, req)
		cancel()
		require.NoError(t, err)
		resp := r.(*kmsg.OffsetFetchResponse)
		code, off := resp.ErrorCode, int64(-1)
		for _, g := range resp.Groups {
			code = g.ErrorCode
			for _, gt := range g.Topics {
				for _, p := range gt.Partitions {
					if code == 0 {
						code = p.ErrorCode
					}
					off = p.Offset
				}
			}
		}
		for _, rt := range resp.Topics {
			for _, p := range rt.Partitions {
				if code == 0 {
					code = p.ErrorCode
				}
				off = p.Offset
			}
		}
		if code == kerr.UnstableOffsetCommit.Code || code == kerr.CoordinatorLoadInProgress.Code {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		require.Zero(t, code, "OffsetFetch: %v", kerr.ErrorForCode(code))
		return off
	}
	t.Fatal("offsets never stable")
	return -1
}

// probeTimedOutCommit checks what Kafka 4.4.0 answers a commit of a
// transaction its coordinator aborted for outliving
// transaction.timeout.ms: under transaction version 2 INVALID_TXN_STATE
// (KAFKA-20785, which makes it PRODUCER_FENCED, is not in 4.4.0), so the
// core reports it fatal; under version 1 PRODUCER_FENCED (the abort bumped
// the epoch), reported fenced. Nothing of the transaction is read.
func probeTimedOutCommit(t *testing.T, c *kafkatest.Cluster, cfg protocol.DialConfig, topic string) {
	d := newTxnWireDriver(t, c.DirectAddr(0), cfg, topic, 2)
	d.txnID += "-timeout"
	d.core = newTxnCore(d.txnID, 1000, false, true)
	tv := protocol.TxnVersion(d.boot)
	p0 := protocol.TopicPartition{Topic: topic, Partition: 0}
	require.NoError(t, d.core.initTransactions())
	require.NoError(t, d.until(txnOpInit))
	require.NoError(t, d.core.begin(tv))
	require.NoError(t, d.produce(p0, "timed-out"))
	time.Sleep(4 * time.Second) // 1 s timeout, 0.5 s scan
	require.NoError(t, d.core.commit())
	err := d.until(txnOpCommit)
	if tv == 2 {
		require.ErrorIs(t, err, kerr.InvalidTxnState)
		require.ErrorIs(t, err, ErrTransactionFatal)
	} else {
		require.ErrorIs(t, err, kerr.ProducerFenced)
		require.ErrorIs(t, err, ErrProducerFenced)
	}
	t.Logf("transaction version %d: commit after the coordinator's timeout abort: %v (state %v)", tv, err, d.core.state)
	require.NotContains(t, readCommitted(t, c, topic, 6)[0], "timed-out")
}

// TestTransactionsOnKafka runs the public transactional API against Apache
// Kafka 4.4, formatted at transaction.version 2 and at 1, read back by an
// independent read_committed kgo consumer: two committed transactions
// (many records over two partitions, offsets sent with the first) are
// read once each, in order; an aborted one is invisible and its offsets
// are not committed; a second producer with the same transactional id
// fences the first, whose commit fails with ErrProducerFenced and whose
// records are never read. Without Java and Maven it skips (see
// kafkatest.Start).
//
//	go test ./producer/ -run TestTransactionsOnKafka -v
func TestTransactionsOnKafka(t *testing.T) {
	for _, tc := range []struct {
		name string
		tv   int
	}{{"TV2", 2}, {"TV1", 1}} {
		t.Run(tc.name, func(t *testing.T) {
			var opts kafkatest.Options
			if tc.tv == 1 {
				opts.Features = map[string]int{protocol.FeatureTransactionVersion: 1}
			}
			opts.BrokerConfig = map[string]string{
				"transaction.state.log.replication.factor": "1",
				"transaction.state.log.min.isr":            "1",
				"offsets.topic.replication.factor":         "1",
			}
			c := kafkatest.Start(t, opts)
			const topic = "txn-api"
			c.CreateTopic(t, topic, 2, 1, nil)
			c.CreateTopic(t, "in", 1, 1, nil)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			newP := func(id string) *Producer {
				p, err := New(BootstrapServers(c.DirectAddr(0)), TransactionalID(id), Linger(5*time.Millisecond),
					MaxInFlightRequestsPerConnection(20), BatchSize(2048))
				require.NoError(t, err)
				t.Cleanup(func() { p.Close(context.Background()) })
				return p
			}
			produce := func(p *Producer, partition int32, prefix string, n int) func() []error {
				vals := make([]string, n)
				for i := range vals {
					vals[i] = fmt.Sprintf("%s-%04d", prefix, i)
				}
				return produceAll(p, topic, partition, vals...)
			}
			noErr := func(errs []error) {
				t.Helper()
				for _, err := range errs {
					require.NoError(t, err)
				}
			}
			p := newP("api-" + tc.name)
			require.NoError(t, p.InitTransactions(ctx))
			g := GroupMetadata{GroupID: "eos-api", Generation: -1}

			// 1: committed, with offsets.
			require.NoError(t, p.BeginTransaction())
			w0, w1 := produce(p, 0, "c1", 500), produce(p, 1, "c1", 300)
			require.NoError(t, p.SendOffsetsToTransaction(ctx, g, []TransactionOffset{{Topic: "in", Partition: 0, Offset: 42, LeaderEpoch: -1}}))
			require.NoError(t, p.CommitTransaction(ctx))
			noErr(w0())
			noErr(w1())
			// 2: aborted, with offsets.
			require.NoError(t, p.BeginTransaction())
			wa := produce(p, 0, "ab", 200)
			require.NoError(t, p.SendOffsetsToTransaction(ctx, g, []TransactionOffset{{Topic: "in", Partition: 0, Offset: 99, LeaderEpoch: -1}}))
			require.NoError(t, p.AbortTransaction(ctx))
			wa()
			// 3: committed right after the abort (under version 2 the
			// first Produce may meet the abort's markers: retried).
			require.NoError(t, p.BeginTransaction())
			w1 = produce(p, 1, "c3", 300)
			require.NoError(t, p.CommitTransaction(ctx))
			noErr(w1())
			// 4: fenced by a second producer with the same id.
			require.NoError(t, p.BeginTransaction())
			noErr(produce(p, 0, "zombie", 10)())
			fresh := newP("api-" + tc.name)
			require.NoError(t, fresh.InitTransactions(ctx))
			require.NoError(t, fresh.BeginTransaction())
			wf := produce(fresh, 0, "c5", 100)
			require.NoError(t, fresh.CommitTransaction(ctx))
			noErr(wf())
			err := p.CommitTransaction(ctx)
			require.ErrorIs(t, err, ErrProducerFenced)
			t.Logf("transaction version %d: the older producer's commit: %v", tc.tv, err)

			read := readCommitted(t, c, topic, 500+300+300+100)
			want0 := append(seqVals("c1", 500), seqVals("c5", 100)...)
			want1 := append(seqVals("c1", 300), seqVals("c3", 300)...)
			require.Equal(t, want0, read[0], "partition 0: committed once, in order; aborted and fenced records invisible")
			require.Equal(t, want1, read[1])
			require.Equal(t, int64(42), stableOffsetAt(t, c, "eos-api", "in", 0), "the aborted transaction's offset is not committed")
		})
	}
}

func seqVals(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%04d", prefix, i)
	}
	return out
}

// stableOffsetAt is stableOffset at the group's coordinator, found
// through the cluster.
func stableOffsetAt(t *testing.T, c *kafkatest.Cluster, group, topic string, partition int32) int64 {
	boot, err := protocol.Dial(context.Background(), c.DirectAddr(0), protocol.DialConfig{})
	require.NoError(t, err)
	defer boot.Close()
	var res protocol.CoordinatorResult
	for range 100 {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		res, err = protocol.FindCoordinator(ctx, boot, protocol.CoordinatorGroup, group)
		cancel()
		require.NoError(t, err)
		if res.ErrorCode == 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	coord, err := protocol.Dial(context.Background(), res.Addr, protocol.DialConfig{})
	require.NoError(t, err)
	defer coord.Close()
	return stableOffset(t, coord, group, topic, partition)
}
