package kafkatest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/longhaul-kafka/longhaul/producer"
	"github.com/longhaul-kafka/longhaul/protocol"
)

// endTxnKey is EndTxn's api key.
var endTxnKey = kmsg.NewPtrEndTxnRequest().Key()

const (
	cuPartitions = 3
	cuPerTxn     = 30 // records per transaction, record i to partition i%3
	// cuTimeout is the transaction timeout of the producers whose
	// transaction is to outlive it (the brokers look for timed-out
	// transactions every 500 ms here).
	cuTimeout = 3 * time.Second
)

// cuCluster is one cluster of TestTxnCommitUnknownOnKafka.
type cuCluster struct {
	name     string
	release  Release
	features map[string]int
	tv       int
	describe bool // DescribeTransactions (Kafka 3.0+)
}

// TestTxnCommitUnknownOnKafka loses a transaction's EndTxn(commit) on the
// link to Kafka's coordinator (the proxy swallows the request, or its
// answer) and checks that the same transactional producer goes on: its
// next transaction T2 commits, and an independent read_committed kgo
// consumer reads T2 once and T1 once or not at all, never partly, as the
// producer's outcome for T1 says. On Kafka 4.4 at transaction version 2
// and 1 (one node each, about 50 s each), and on Kafka 2.8 (version 1,
// ZooKeeper mode, no DescribeTransactions) with LONGHAUL_LONG=1.
//
// What Kafka does with a lost EndTxn(commit), per subtest:
//   - lost-request: the first EndTxn(commit) requests never arrive; the
//     retry that arrives commits T1, and CommitTransaction returns nil.
//   - lost-response: the commit is applied and its answers are lost; the
//     retry is answered as a repeat of what was done, and
//     CommitTransaction returns nil (no ErrCommitUnknown: Kafka tells).
//   - past-timeout: every EndTxn(commit) is lost until the coordinator has
//     aborted T1 for its timeout (under a bumped epoch); the retry that
//     arrives then is refused. Under version 2 (INVALID_TXN_STATE) that is
//     ErrCommitUnknown, and the producer, not fenced, re-initializes at
//     the next BeginTransaction (EndTxn(abort) with T1's id and epoch
//     first, which Kafka takes as a repeat of its abort: old-reinit) and
//     T2 commits. Under version 1 the retry is PRODUCER_FENCED: the
//     coordinator's timeout fence forgets the previous epoch, so nothing
//     the producer could send with it is taken (old-reinit);
//     CommitTransaction returns ErrCommitUnknown wrapping
//     ErrProducerFenced, BeginTransaction ErrProducerFenced, and a new
//     producer with the same transactional id commits T2.
//   - refused-open: every EndTxn(commit) is lost until the coordinator
//     can no longer write its transaction log (the test sets
//     __transaction_state's max.message.bytes to 10 bytes); the retry that
//     arrives then is refused UNKNOWN_SERVER_ERROR and T1 stays open
//     (DescribeTransactions on 4.4: Ongoing), so CommitTransaction returns
//     ErrCommitUnknown with T1 open. With the log writable again, the next
//     BeginTransaction re-initializes: EndTxn(abort) first aborts T1, then
//     InitProducerId, and T2 commits, under both versions.
//
// A link that only loses requests or answers never leaves T1 open at
// ErrCommitUnknown (a retry reaching an open T1 commits it); refused-open
// is that case on Kafka, as the embedded broker's
// TestTransactionCommitUnknownStillOpen injects it. Its negative control
// is the commit before the re-init aborted first (a5fe7d4, whose re-init
// sends InitProducerId with the current pair directly): there
// refused-open fails at version 1, BeginTransaction of T2 returning
// ErrProducerFenced (InitProducerId: PRODUCER_FENCED, no other producer
// alive), and the other subtests pass.
//
// Subtest old-reinit shows, with a raw client, what Kafka answers the
// two re-inits: InitProducerId with the transaction's own id and epoch
// over the open transaction fences it (CONCURRENT_TRANSACTIONS) and its
// retry is PRODUCER_FENCED under version 1 (the fence forgets the epoch,
// KAFKA-9666; no other producer alive) and taken under version 2; after
// the coordinator's timeout abort, InitProducerId and EndTxn(abort) with
// the timed-out pair are both taken under version 2 and both
// PRODUCER_FENCED under version 1.
//
//	go test ./internal/kafkatest/ -run TestTxnCommitUnknownOnKafka -v
func TestTxnCommitUnknownOnKafka(t *testing.T) {
	tv1 := map[string]int{protocol.FeatureTransactionVersion: 1}
	clusters := []cuCluster{
		{name: "4.4-TV2", release: Kafka44, tv: 2, describe: true},
		{name: "4.4-TV1", release: Kafka44, features: tv1, tv: 1, describe: true},
	}
	if os.Getenv("LONGHAUL_LONG") == "1" {
		clusters = append(clusters, cuCluster{name: "2.8-TV1", release: Kafka28, tv: 1})
	}
	for _, m := range clusters {
		t.Run(m.name, func(t *testing.T) {
			began := time.Now()
			c := Start(t, Options{Release: m.release, Features: m.features, BrokerConfig: map[string]string{
				"transaction.state.log.replication.factor":                    "1",
				"transaction.state.log.min.isr":                               "1",
				"offsets.topic.replication.factor":                            "1",
				"transaction.abort.timed.out.transaction.cleanup.interval.ms": "500",
			}})
			t.Logf("%s: cluster up in %v", m.name, time.Since(began).Round(100*time.Millisecond))
			for _, mode := range []string{"lost-request", "lost-response", "past-timeout", "refused-open"} {
				t.Run(mode, func(t *testing.T) {
					b := time.Now()
					testCommitLost(t, c, m, mode)
					t.Logf("%s/%s: %v", m.name, mode, time.Since(b).Round(100*time.Millisecond))
				})
			}
			if m.describe {
				t.Run("old-reinit", func(t *testing.T) { testOldReinitFenced(t, c, m) })
			}
			t.Logf("%s: done in %v", m.name, time.Since(began).Round(100*time.Millisecond))
		})
	}
}

// cuValue is record i of transaction k.
func cuValue(k, i int) string { return fmt.Sprintf("t%d-%d", k, i) }

// cuProduce begins transaction k on p and produces its records, waiting
// for each to be acknowledged.
func cuProduce(t *testing.T, ctx context.Context, p *producer.Producer, topic string, k int) {
	t.Helper()
	require.NoError(t, p.BeginTransaction(), "begin T%d", k)
	results := make([]func() error, cuPerTxn)
	for i := range cuPerTxn {
		rec := &producer.Record{Topic: topic, Value: []byte(cuValue(k, i))}
		rec.SetPartition(int32(i % cuPartitions))
		done := make(chan error, 1)
		p.Produce(ctx, rec, func(_ *producer.Record, err error) { done <- err })
		results[i] = func() error { return <-done }
	}
	for i, r := range results {
		require.NoError(t, r(), "T%d record %d", k, i)
	}
}

// cuRead reads topic read_committed (readCommittedTopic) and returns each
// value's count, failing the test for a value no transaction wrote or a
// transaction's records out of order within a partition.
func cuRead(t *testing.T, c *Cluster, topic string, want int) map[string]int {
	t.Helper()
	got := readCommittedTopic(t, c, topic, want)
	counts := map[string]int{}
	for p, vs := range got {
		for _, v := range vs {
			counts[v]++
		}
		// In order within the partition, each transaction's records.
		last := map[byte]int{}
		for _, v := range vs {
			var k, i int
			if _, err := fmt.Sscanf(v, "t%d-%d", &k, &i); err != nil {
				t.Errorf("partition %d: value %q written by no transaction", p, v)
				continue
			}
			if prev, ok := last[byte(k)]; ok && i <= prev {
				t.Errorf("partition %d: %q after record %d of its transaction", p, v, prev)
			}
			last[byte(k)] = i
		}
	}
	return counts
}

// cuPresent returns how many of transaction k's records are read, and
// fails the test for one read more than once.
func cuPresent(t *testing.T, counts map[string]int, k int) int {
	t.Helper()
	n := 0
	for i := range cuPerTxn {
		switch counts[cuValue(k, i)] {
		case 0:
		case 1:
			n++
		default:
			t.Errorf("T%d record %d read %d times", k, i, counts[cuValue(k, i)])
			n++
		}
	}
	return n
}

func testCommitLost(t *testing.T, c *Cluster, m cuCluster, mode string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	topic, id := "cu-"+mode, "cu-"+mode
	c.CreateTopic(t, topic, cuPartitions, 1, nil)
	timeout := time.Minute
	if mode == "past-timeout" {
		timeout = cuTimeout
	}
	opts := []producer.Opt{
		producer.TransactionalID(id),
		producer.TransactionTimeout(timeout),
		producer.RequestTimeout(3 * time.Second),
		producer.RetryBackoff(20 * time.Millisecond),
		producer.RetryBackoffMax(200 * time.Millisecond),
		producer.Linger(time.Millisecond),
	}
	p := newLonghaul(t, c.ProxiedBootstrap(), nil, opts...)
	require.NoError(t, p.InitTransactions(ctx))
	cuProduce(t, ctx, p, topic, 1)
	var pid int64
	var epoch int16
	if m.describe {
		st, ok := describeTxn(t, ctx, c, id)
		require.True(t, ok)
		require.Equal(t, "Ongoing", st.State, "T1 before its commit")
		pid, epoch = st.ProducerID, st.ProducerEpoch
	}

	px := c.Proxy(0)
	before := px.Stats()
	switch mode {
	case "lost-request":
		px.DropRequests(endTxnKey, 3)
	case "lost-response":
		px.DropResponses(endTxnKey, 3)
	case "past-timeout", "refused-open":
		px.DropRequests(endTxnKey, 1<<30)
	}
	t.Cleanup(func() { px.DropRequests(endTxnKey, 0); px.DropResponses(endTxnKey, 0) })
	res := make(chan error, 1)
	go func() { res <- p.CommitTransaction(ctx) }()
	switch mode {
	case "past-timeout":
		waitTimedOut(t, ctx, c, m, id, pid, epoch)
		px.DropRequests(endTxnKey, 0)
	case "refused-open":
		for px.Stats().DroppedRequests == before.DroppedRequests {
			time.Sleep(10 * time.Millisecond)
		}
		setTxnLogMaxMessage(t, ctx, c, "10", false)
		t.Cleanup(func() {
			c.AlterTopicConfig(t, "__transaction_state", map[string]string{"max.message.bytes": "1048588"})
		})
		px.DropRequests(endTxnKey, 0)
	}
	var commitErr error
	select {
	case commitErr = <-res:
	case <-ctx.Done():
		t.Fatalf("CommitTransaction of T1 did not return: %v", ctx.Err())
	}
	px.DropResponses(endTxnKey, 0)
	after := px.Stats()
	dropped := (after.DroppedRequests - before.DroppedRequests) + (after.DroppedResponses - before.DroppedResponses)
	t.Logf("T1's commit: %v (EndTxn requests or answers lost: %d)", commitErr, dropped)
	if mode == "past-timeout" || mode == "refused-open" {
		require.Positive(t, dropped)
	} else {
		require.EqualValues(t, 3, dropped, "EndTxn requests or answers lost")
	}

	t1Committed := false
	switch {
	case mode == "refused-open":
		require.ErrorIs(t, commitErr, producer.ErrCommitUnknown)
		if m.describe {
			st, ok := describeTxn(t, ctx, c, id)
			require.True(t, ok)
			require.Equal(t, "Ongoing", st.State, "T1 after the refused retry of its commit")
		}
		setTxnLogMaxMessage(t, ctx, c, "1048588", true)
	case mode != "past-timeout":
		require.NoError(t, commitErr, "a retry reaching the coordinator tells the commit's outcome")
		t1Committed = true
	case m.tv == 2:
		require.ErrorIs(t, commitErr, producer.ErrCommitUnknown)
		require.NotErrorIs(t, commitErr, producer.ErrProducerFenced)
	default:
		// The coordinator's timeout abort fenced the epoch (see the doc).
		require.ErrorIs(t, commitErr, producer.ErrCommitUnknown)
		require.ErrorIs(t, commitErr, producer.ErrProducerFenced)
		require.ErrorIs(t, p.BeginTransaction(), producer.ErrProducerFenced)
		p = newLonghaul(t, c.ProxiedBootstrap(), nil, opts...)
	}

	cuProduce(t, ctx, p, topic, 2)
	require.NoError(t, p.CommitTransaction(ctx), "T2 commits")
	if m.describe {
		st, ok := describeTxn(t, ctx, c, id)
		require.True(t, ok)
		t.Logf("after T2: %s, producer %d epoch %d (T1's: %d, %d)", st.State, st.ProducerID, st.ProducerEpoch, pid, epoch)
	}

	want := cuPerTxn
	if t1Committed {
		want *= 2
	}
	counts := cuRead(t, c, topic, want)
	n1, n2 := cuPresent(t, counts, 1), cuPresent(t, counts, 2)
	assert.Equal(t, cuPerTxn, n2, "T2's records read")
	switch {
	case t1Committed:
		assert.Equal(t, cuPerTxn, n1, "T1 reported committed: its records read")
	default:
		// ErrCommitUnknown allows all or nothing; the coordinator aborted
		// T1 for its timeout, so nothing.
		assert.Zero(t, n1, "T1, aborted by the coordinator: its records read")
	}
	assert.Len(t, counts, n1+n2, "values read")
}

// describeTxn returns the coordinator's DescribeTransactions state of id
// (false when the coordinator does not know it).
func describeTxn(t *testing.T, ctx context.Context, c *Cluster, id string) (kmsg.DescribeTransactionsResponseTransactionState, bool) {
	t.Helper()
	req := kmsg.NewPtrDescribeTransactionsRequest()
	req.TransactionalIDs = []string{id}
	resp, err := c.request(ctx, req)
	require.NoError(t, err, "DescribeTransactions")
	for _, s := range resp.(*kmsg.DescribeTransactionsResponse).TransactionStates {
		if s.TransactionalID == id {
			if s.ErrorCode == kerr.TransactionalIDNotFound.Code {
				return s, false
			}
			require.Zero(t, s.ErrorCode, "DescribeTransactions %s: %v", id, kerr.ErrorForCode(s.ErrorCode))
			return s, true
		}
	}
	return kmsg.DescribeTransactionsResponseTransactionState{}, false
}

// waitTimedOut waits until the coordinator aborted id's transaction
// opened at (pid, epoch) for its timeout: complete and under a later
// epoch. Without DescribeTransactions it waits out the timeout and a
// few of the brokers' scans.
func waitTimedOut(t *testing.T, ctx context.Context, c *Cluster, m cuCluster, id string, pid int64, epoch int16) {
	t.Helper()
	if !m.describe {
		time.Sleep(cuTimeout + 3*time.Second)
		return
	}
	for {
		st, ok := describeTxn(t, ctx, c, id)
		if ok && st.State == "CompleteAbort" && (st.ProducerID != pid || st.ProducerEpoch > epoch) {
			t.Logf("the coordinator aborted T1: %s, producer %d epoch %d (T1's: %d, %d)", st.State, st.ProducerID, st.ProducerEpoch, pid, epoch)
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("T1 not aborted for its timeout: %+v", st)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// cuRequest sends req at version v (at most what the broker offers) to
// node 0, the coordinator of every transactional id on a one-node
// cluster.
func cuRequest(t *testing.T, ctx context.Context, c *Cluster, req kmsg.Request, v int16) kmsg.Response {
	t.Helper()
	av, err := APIVersions(ctx, c.DirectAddr(0))
	require.NoError(t, err)
	_, maxV, ok := VersionRange(av, req.Key())
	require.True(t, ok, "%s offered", kmsg.NameForKey(req.Key()))
	req.SetVersion(min(v, maxV))
	conn, err := Dial(ctx, c.DirectAddr(0))
	require.NoError(t, err)
	defer conn.Close()
	resp, err := conn.Request(ctx, req)
	require.NoError(t, err, "%s", kmsg.NameForKey(req.Key()))
	return resp
}

// rawInit sends InitProducerId for id with the expected pair, retrying
// while the coordinator answers CONCURRENT_TRANSACTIONS, and returns the
// answers' error codes, the last one final.
func rawInit(t *testing.T, ctx context.Context, c *Cluster, id string, pid int64, epoch int16) []int16 {
	t.Helper()
	var codes []int16
	for range 100 {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionalID = &id
		req.TransactionTimeoutMillis = 60000
		req.ProducerID, req.ProducerEpoch = pid, epoch
		resp := cuRequest(t, ctx, c, req, 5).(*kmsg.InitProducerIDResponse)
		codes = append(codes, resp.ErrorCode)
		if resp.ErrorCode != kerr.ConcurrentTransactions.Code {
			return codes
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("InitProducerId %s: CONCURRENT_TRANSACTIONS 100 times", id)
	return nil
}

// errNames names error codes for the log.
func errNames(codes []int16) []string {
	var out []string
	for _, c := range codes {
		out = append(out, errName(c))
	}
	return out
}

func errName(code int16) string {
	if code == 0 {
		return "NONE"
	}
	var ke *kerr.Error
	if errors.As(kerr.ErrorForCode(code), &ke) {
		return ke.Message
	}
	return strconv.Itoa(int(code))
}

// testOldReinitFenced is TestTxnCommitUnknownOnKafka's negative control:
// what the re-init sent before it aborted first, with a raw client.
func testOldReinitFenced(t *testing.T, c *Cluster, m cuCluster) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	topic := "cu-old-reinit"
	c.CreateTopic(t, topic, cuPartitions, 1, nil)
	open := func(id string, timeout time.Duration) (*producer.Producer, int64, int16) {
		p := newLonghaul(t, c.Bootstrap(), nil, producer.TransactionalID(id), producer.TransactionTimeout(timeout), producer.Linger(time.Millisecond))
		require.NoError(t, p.InitTransactions(ctx))
		cuProduce(t, ctx, p, topic, 1)
		st, ok := describeTxn(t, ctx, c, id)
		require.True(t, ok)
		require.Equal(t, "Ongoing", st.State)
		return p, st.ProducerID, st.ProducerEpoch
	}

	// Over an open transaction: the first InitProducerId fences it.
	id := "cu-old-reinit-open"
	p, pid, epoch := open(id, time.Minute)
	codes := rawInit(t, ctx, c, id, pid, epoch)
	t.Logf("transaction version %d, InitProducerId(%d, %d) over the open transaction: %v", m.tv, pid, epoch, errNames(codes))
	require.Equal(t, kerr.ConcurrentTransactions.Code, codes[0], "the open transaction is fenced first")
	final := codes[len(codes)-1]
	if m.tv == 1 {
		// The fence forgot the epoch: the retry is not taken as one.
		require.Equal(t, kerr.ProducerFenced.Code, final, "the retry of InitProducerId with the transaction's epoch")
	} else {
		require.Zero(t, final, "the retry of InitProducerId with the transaction's epoch")
	}
	// The producer whose transaction was fenced cannot commit it.
	err := p.CommitTransaction(ctx)
	t.Logf("its producer's commit: %v", err)
	require.ErrorIs(t, err, producer.ErrProducerFenced)

	// After the coordinator's timeout abort (past-timeout): InitProducerId
	// with the transaction's pair, and EndTxn(abort) with it (what the
	// re-init sends now), each on a transactional id of its own.
	idInit, idAbort := "cu-old-reinit-timeout-init", "cu-old-reinit-timeout-abort"
	_, pidI, epochI := open(idInit, cuTimeout)
	_, pidA, epochA := open(idAbort, cuTimeout)
	waitTimedOut(t, ctx, c, m, idInit, pidI, epochI)
	waitTimedOut(t, ctx, c, m, idAbort, pidA, epochA)
	codes = rawInit(t, ctx, c, idInit, pidI, epochI)
	t.Logf("InitProducerId(%d, %d) after the timeout abort: %v", pidI, epochI, errNames(codes))
	req := kmsg.NewPtrEndTxnRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = idAbort, pidA, epochA, false
	v := int16(4) // version 1: EndTxn v4 at most
	if m.tv == 2 {
		v = 5
	}
	resp := cuRequest(t, ctx, c, req, v).(*kmsg.EndTxnResponse)
	t.Logf("EndTxn v%d (abort, %d, %d) after the timeout abort: %s, producer %d epoch %d", req.GetVersion(), pidA, epochA, errName(resp.ErrorCode), resp.ProducerID, resp.ProducerEpoch)
	if m.tv == 1 {
		require.Equal(t, kerr.ProducerFenced.Code, codes[len(codes)-1], "InitProducerId with the timed-out transaction's pair")
		require.Equal(t, kerr.ProducerFenced.Code, resp.ErrorCode, "EndTxn(abort) with the timed-out transaction's pair")
		return
	}
	require.Zero(t, codes[len(codes)-1], "InitProducerId with the timed-out transaction's pair")
	require.Zero(t, resp.ErrorCode, "EndTxn(abort) with the timed-out transaction's pair")
	codes = rawInit(t, ctx, c, idAbort, resp.ProducerID, resp.ProducerEpoch)
	t.Logf("then InitProducerId(%d, %d): %v", resp.ProducerID, resp.ProducerEpoch, errNames(codes))
	require.Zero(t, codes[len(codes)-1], "InitProducerId with the pair the abort answered")
}

// txnLogWritable reports whether the coordinator can write to its
// transaction log now: an InitProducerId for a transactional id never
// used before writes its first record there.
func txnLogWritable(t *testing.T, ctx context.Context, c *Cluster, probe string) (bool, int16) {
	t.Helper()
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionalID = &probe
	req.TransactionTimeoutMillis = 60000
	req.ProducerID, req.ProducerEpoch = -1, -1
	resp := cuRequest(t, ctx, c, req, 5).(*kmsg.InitProducerIDResponse)
	return resp.ErrorCode == 0, resp.ErrorCode
}

// setTxnLogMaxMessage sets __transaction_state's max.message.bytes and
// waits until the coordinator's writes succeed (writable) or fail.
func setTxnLogMaxMessage(t *testing.T, ctx context.Context, c *Cluster, bytes string, writable bool) {
	t.Helper()
	c.AlterTopicConfig(t, "__transaction_state", map[string]string{"max.message.bytes": bytes})
	for k := 0; ; k++ {
		ok, code := txnLogWritable(t, ctx, c, fmt.Sprintf("cu-probe-%s-%d", bytes, k))
		if ok == writable {
			t.Logf("transaction log max.message.bytes %s in effect (probe InitProducerId: %s)", bytes, errName(code))
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("max.message.bytes %s of the transaction log not in effect", bytes)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
