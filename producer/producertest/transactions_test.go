package producertest_test

// Tests of the transaction and group coordinator controls, with franz-go's
// kgo as the transactional client.

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/longhaul-kafka/longhaul/producer/producertest"
)

func txnProducer(t *testing.T, c *producertest.Cluster, id string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.Addr()), kgo.TransactionalID(id),
		kgo.DefaultProduceTopic("t"), kgo.RecordPartitioner(kgo.ManualPartitioner())}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	return cl
}

// txn runs one transaction of values on partition 0.
func txn(ctx context.Context, cl *kgo.Client, commit bool, values ...string) error {
	if err := cl.BeginTransaction(); err != nil {
		return err
	}
	for _, v := range values {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(v)}).FirstErr(); err != nil {
			return err
		}
	}
	return cl.EndTransaction(ctx, kgo.TransactionEndTry(commit))
}

func waitTxnState(t *testing.T, c *producertest.Cluster, id, state string) producertest.Transaction {
	t.Helper()
	var tx producertest.Transaction
	require.Eventually(t, func() bool {
		tx, _ = c.Transaction(id)
		return tx.State == state
	}, 10*time.Second, time.Millisecond, "transactional id %s never reached %s", id, state)
	return tx
}

// TestCommittedRecordsAndLSO: CommittedRecords is the read_committed view
// (records of non-transactional producers at once, committed transactions
// once their markers are written, never aborted or open ones, no markers);
// LastStableOffset is the first offset of the open transaction, then the
// end of the log; Records keeps every record but no marker.
func TestCommittedRecordsAndLSO(t *testing.T) {
	c := producertest.NewCluster(t, 1, producertest.Topic{Name: "t"})
	ctx := t.Context()
	plain, err := kgo.NewClient(kgo.SeedBrokers(c.Addr()), kgo.DefaultProduceTopic("t"))
	require.NoError(t, err)
	defer plain.Close()
	require.NoError(t, plain.ProduceSync(ctx, &kgo.Record{Value: []byte("plain")}).FirstErr())
	assert.Equal(t, []string{"plain"}, values(c.CommittedRecords("t", 0)), "a non-transactional record is committed at once")

	cl := txnProducer(t, c, "a")
	require.NoError(t, txn(ctx, cl, true, "c1", "c2"))
	require.NoError(t, txn(ctx, cl, false, "x1"))
	waitTxnState(t, c, "a", "CompleteAbort")
	require.NoError(t, cl.BeginTransaction())
	require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Value: []byte("open")}).FirstErr())

	// Offsets: plain 0, c1 1, c2 2, marker 3, x1 4, marker 5, open 6.
	assert.Equal(t, int64(6), c.LastStableOffset("t", 0), "LSO at the open transaction's first offset")
	assert.Equal(t, []string{"plain", "c1", "c2"}, values(c.CommittedRecords("t", 0)))
	all := c.Records("t", 0)
	assert.Equal(t, []string{"plain", "c1", "c2", "x1", "open"}, values(all))
	assert.Equal(t, []int64{0, 1, 2, 4, 6}, []int64{all[0].Offset, all[1].Offset, all[2].Offset, all[3].Offset, all[4].Offset}, "marker offsets are missing")

	require.NoError(t, cl.EndTransaction(ctx, kgo.TryCommit))
	waitTxnState(t, c, "a", "CompleteCommit")
	assert.Equal(t, int64(8), c.LastStableOffset("t", 0), "LSO at the end of the log")
	assert.Equal(t, []string{"plain", "c1", "c2", "open"}, values(c.CommittedRecords("t", 0)))
	assert.Nil(t, c.CommittedRecords("t", 9))
	assert.Equal(t, int64(-1), c.LastStableOffset("nope", 0))
}

// TestTransactionVersionSwitch: under versions 0 and 1 kgo's transactions
// work (adding partitions first) and the epoch stays; under 2 every end
// bumps it; other values are an error.
func TestTransactionVersionSwitch(t *testing.T) {
	for _, v := range []int16{0, 1, 2} {
		t.Run(fmt.Sprint(v), func(t *testing.T) {
			c := producertest.NewCluster(t, 1, producertest.Topic{Name: "t"})
			require.NoError(t, c.SetTransactionVersion(v))
			cl := txnProducer(t, c, "v")
			for i := range 3 {
				require.NoError(t, txn(t.Context(), cl, true, fmt.Sprint(i)))
			}
			tx := waitTxnState(t, c, "v", "CompleteCommit")
			if v == 2 {
				assert.Equal(t, int16(3), tx.ProducerEpoch)
			} else {
				assert.Equal(t, int16(0), tx.ProducerEpoch)
			}
			assert.Equal(t, []string{"0", "1", "2"}, values(c.CommittedRecords("t", 0)))
		})
	}
	c := producertest.NewCluster(t, 1)
	assert.Error(t, c.SetTransactionVersion(3))
	assert.Error(t, c.SetTransactionVersion(-1))
}

// TestHoldMarkers: with markers held a committed transaction completes
// only on release; meanwhile it is not readable and the producer's next
// transaction meets CONCURRENT_TRANSACTIONS, then goes through.
func TestHoldMarkers(t *testing.T) {
	c := producertest.NewCluster(t, 1, producertest.Topic{Name: "t"})
	ctx := t.Context()
	cl := txnProducer(t, c, "h")
	c.HoldMarkers(true)
	require.NoError(t, txn(ctx, cl, true, "a"))
	tx, ok := c.Transaction("h")
	require.True(t, ok)
	assert.Equal(t, "PrepareCommit", tx.State)
	assert.Empty(t, c.CommittedRecords("t", 0))
	done := make(chan error, 1)
	go func() { done <- txn(ctx, cl, true, "b") }()
	require.Eventually(t, func() bool { return c.TransactionStats().ConcurrentTransactions > 0 }, 10*time.Second, time.Millisecond)
	c.HoldMarkers(false)
	require.NoError(t, <-done)
	waitTxnState(t, c, "h", "CompleteCommit")
	assert.Equal(t, []string{"a", "b"}, values(c.CommittedRecords("t", 0)))
	st := c.TransactionStats()
	assert.Equal(t, int64(2), st.Committed)
	assert.Zero(t, st.Aborted)
}

// TestSetMarkerDelay: a delay keeps a committed transaction completing
// (unreadable) for that long, then it is readable; a negative delay counts
// as none.
func TestSetMarkerDelay(t *testing.T) {
	c := producertest.NewCluster(t, 1, producertest.Topic{Name: "t"})
	ctx := t.Context()
	cl := txnProducer(t, c, "d")
	c.SetMarkerDelay(5 * time.Second) // long, so the check below cannot be late
	require.NoError(t, txn(ctx, cl, true, "a"))
	tx, _ := c.Transaction("d")
	assert.Equal(t, "PrepareCommit", tx.State)
	assert.Empty(t, c.CommittedRecords("t", 0))
	waitTxnState(t, c, "d", "CompleteCommit")
	assert.Equal(t, []string{"a"}, values(c.CommittedRecords("t", 0)))
	c.SetMarkerDelay(-time.Second)
	require.NoError(t, txn(ctx, cl, true, "b"))
	waitTxnState(t, c, "d", "CompleteCommit")
	assert.Equal(t, []string{"a", "b"}, values(c.CommittedRecords("t", 0)))
	assert.Positive(t, producertest.DefaultMarkerDelay)
}

// rawCoordinatorRequest sends req to node, bypassing kgo's routing.
func rawCoordinatorRequest(t *testing.T, c *producertest.Cluster, node int32, req kmsg.Request) kmsg.Response {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addr()))
	require.NoError(t, err)
	defer cl.Close()
	resp, err := cl.Broker(int(node)).Request(t.Context(), req)
	require.NoError(t, err)
	return resp
}

// TestMoveCoordinators: after a move the old coordinator answers
// NOT_COORDINATOR, the new one serves, kgo follows, and a move to an
// unknown node is an error.
func TestMoveCoordinators(t *testing.T) {
	c := producertest.NewCluster(t, 3, producertest.Topic{Name: "t"})
	ctx := t.Context()
	cl := txnProducer(t, c, "m")
	require.NoError(t, txn(ctx, cl, true, "a"))
	old := c.TransactionCoordinator("m")
	next := (old + 1) % 3
	require.NoError(t, c.MoveTransactionCoordinator("m", next))
	assert.Equal(t, next, c.TransactionCoordinator("m"))
	init := kmsg.NewPtrInitProducerIDRequest()
	init.TransactionalID, init.TransactionTimeoutMillis = kmsg.StringPtr("m"), 60000
	assert.Equal(t, kerr.NotCoordinator.Code, rawCoordinatorRequest(t, c, old, init).(*kmsg.InitProducerIDResponse).ErrorCode)
	require.NoError(t, txn(ctx, cl, true, "b"))
	waitTxnState(t, c, "m", "CompleteCommit")
	assert.Equal(t, []string{"a", "b"}, values(c.CommittedRecords("t", 0)))
	assert.Error(t, c.MoveTransactionCoordinator("m", 3))

	g := c.GroupCoordinator("g")
	require.NoError(t, c.MoveGroupCoordinator("g", (g+1)%3))
	assert.Equal(t, (g+1)%3, c.GroupCoordinator("g"))
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Group, hb.MemberID = "g", "nobody"
	assert.Equal(t, kerr.NotCoordinator.Code, rawCoordinatorRequest(t, c, g, hb).(*kmsg.HeartbeatResponse).ErrorCode)
	assert.Equal(t, kerr.UnknownMemberID.Code, rawCoordinatorRequest(t, c, (g+1)%3, hb).(*kmsg.HeartbeatResponse).ErrorCode)
	assert.Error(t, c.MoveGroupCoordinator("g", -1))
}

// TestInjectCoordinatorError: the next n coordinator requests answer the
// code (kgo retries and its transaction goes through); n <= 0 clears.
func TestInjectCoordinatorError(t *testing.T) {
	c := producertest.NewCluster(t, 1, producertest.Topic{Name: "t"})
	init := kmsg.NewPtrInitProducerIDRequest()
	init.TransactionalID, init.TransactionTimeoutMillis = kmsg.StringPtr("raw"), 60000
	c.InjectCoordinatorError(kerr.CoordinatorLoadInProgress.Code, 1)
	assert.Equal(t, kerr.CoordinatorLoadInProgress.Code, rawCoordinatorRequest(t, c, 0, init).(*kmsg.InitProducerIDResponse).ErrorCode)
	assert.Equal(t, int16(0), rawCoordinatorRequest(t, c, 0, init).(*kmsg.InitProducerIDResponse).ErrorCode)
	c.InjectCoordinatorError(kerr.NotCoordinator.Code, 5)
	c.InjectCoordinatorError(0, 0)
	assert.Equal(t, int16(0), rawCoordinatorRequest(t, c, 0, init).(*kmsg.InitProducerIDResponse).ErrorCode, "cleared")

	c.InjectCoordinatorError(kerr.CoordinatorLoadInProgress.Code, 3)
	cl := txnProducer(t, c, "i")
	require.NoError(t, txn(t.Context(), cl, true, "a"))
	waitTxnState(t, c, "i", "CompleteCommit")
	assert.Equal(t, []string{"a"}, values(c.CommittedRecords("t", 0)))
}

// TestTimeOutTransaction: a timed-out transaction cannot be committed and
// is never readable; TimeOutTransaction reports false without an open
// transaction; a transaction also times out on its own; a second producer
// of the same id fences the first (TransactionStats counts both).
func TestTimeOutTransaction(t *testing.T) {
	c := producertest.NewCluster(t, 1, producertest.Topic{Name: "t"})
	ctx := t.Context()
	cl := txnProducer(t, c, "to")
	require.NoError(t, cl.BeginTransaction())
	require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Value: []byte("doomed")}).FirstErr())
	assert.True(t, c.TimeOutTransaction("to"))
	assert.Error(t, cl.EndTransaction(ctx, kgo.TryCommit))
	tx := waitTxnState(t, c, "to", "CompleteAbort")
	assert.True(t, tx.TimedOut)
	assert.False(t, c.TimeOutTransaction("to"))
	assert.False(t, c.TimeOutTransaction("unknown"))
	_, known := c.Transaction("unknown")
	assert.False(t, known)

	short := txnProducer(t, c, "short", kgo.TransactionTimeout(100*time.Millisecond))
	require.NoError(t, short.BeginTransaction())
	require.NoError(t, short.ProduceSync(ctx, &kgo.Record{Value: []byte("slow")}).FirstErr())
	tx = waitTxnState(t, c, "short", "CompleteAbort")
	assert.True(t, tx.TimedOut)
	assert.Error(t, short.EndTransaction(ctx, kgo.TryCommit))

	a := txnProducer(t, c, "z")
	require.NoError(t, a.BeginTransaction())
	require.NoError(t, a.ProduceSync(ctx, &kgo.Record{Value: []byte("zombie")}).FirstErr())
	b := txnProducer(t, c, "z")
	require.NoError(t, txn(ctx, b, true, "fresh"))
	assert.Error(t, a.EndTransaction(ctx, kgo.TryCommit))
	waitTxnState(t, c, "z", "CompleteCommit")
	assert.Equal(t, []string{"fresh"}, values(c.CommittedRecords("t", 0)))
	st := c.TransactionStats()
	assert.Equal(t, int64(1), st.Fenced)
	assert.Equal(t, int64(2), st.TimedOut)
}

// TestCommittedOffset: offsets sent in a transaction (kgo's
// GroupTransactSession) count once it committed and its markers are
// written; an aborted transaction's offsets never count.
func TestCommittedOffset(t *testing.T) {
	c := producertest.NewCluster(t, 1, producertest.Topic{Name: "in"}, producertest.Topic{Name: "t"})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	in, err := kgo.NewClient(kgo.SeedBrokers(c.Addr()), kgo.DefaultProduceTopic("in"))
	require.NoError(t, err)
	defer in.Close()
	for i := range 4 {
		require.NoError(t, in.ProduceSync(ctx, &kgo.Record{Value: []byte(fmt.Sprint(i))}).FirstErr())
	}
	s, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(c.Addr()), kgo.TransactionalID("etl"), kgo.ConsumerGroup("g"),
		kgo.ConsumeTopics("in"), kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.DefaultProduceTopic("t"))
	require.NoError(t, err)
	defer s.Close()
	poll := func(n int) int {
		got := 0
		for got < n && ctx.Err() == nil {
			require.NoError(t, s.Begin())
			fs := s.PollRecords(ctx, n-got)
			fs.EachRecord(func(r *kgo.Record) { s.Produce(ctx, &kgo.Record{Value: r.Value}, nil); got++ })
			commit := got == n
			if _, err := s.End(ctx, kgo.TransactionEndTry(commit)); err != nil {
				t.Fatal(err)
			}
		}
		return got
	}
	// An aborted transaction's offsets never count.
	require.NoError(t, s.Begin())
	fs := s.PollRecords(ctx, 1)
	require.Equal(t, 1, fs.NumRecords())
	_, err = s.End(ctx, kgo.TryAbort)
	require.NoError(t, err)
	_, ok := c.CommittedOffset("g", "in", 0)
	assert.False(t, ok)
	c.HoldMarkers(true)
	require.Equal(t, 4, poll(4))
	_, ok = c.CommittedOffset("g", "in", 0)
	assert.False(t, ok, "counted before the markers")
	c.HoldMarkers(false)
	off, ok := c.CommittedOffset("g", "in", 0)
	assert.True(t, ok)
	assert.Equal(t, int64(4), off)
}

// TestDenyTransactionalID: a denied transactional id fails kgo's
// transaction with TRANSACTIONAL_ID_AUTHORIZATION_FAILED; allowed again, a
// new producer of the id works.
func TestDenyTransactionalID(t *testing.T) {
	c := producertest.NewCluster(t, 1, producertest.Topic{Name: "t"})
	c.DenyTransactionalID("acl", true)
	cl := txnProducer(t, c, "acl")
	err := txn(t.Context(), cl, true, "a")
	assert.ErrorIs(t, err, kerr.TransactionalIDAuthorizationFailed)
	c.DenyTransactionalID("acl", false)
	ok := txnProducer(t, c, "acl")
	require.NoError(t, txn(t.Context(), ok, true, "b"))
	waitTxnState(t, c, "acl", "CompleteCommit")
	assert.Equal(t, []string{"b"}, values(c.CommittedRecords("t", 0)))
}
