package producer

// Tests of the sentences of the transactional API's doc comments that no
// other test checked: each test names the doc it holds to its word.

import (
	"context"
	"errors"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/longhaul-kafka/longhaul/internal/broker"
)

// txnClasses are the error classes of the transactional producer.
var txnClasses = []error{ErrTransactionAbortable, ErrProducerFenced, ErrTransactionFatal, ErrCommitUnknown, ErrTransactionState, ErrTransactionAborted}

// requireClassed fails t unless err wraps exactly one error class, as the
// doc of the classes promises for every error of a transactional call.
func requireClassed(t *testing.T, err error, what string) {
	t.Helper()
	n := 0
	for _, c := range txnClasses {
		if errors.Is(err, c) {
			n++
		}
	}
	require.Equal(t, 1, n, "%s: %v wraps %d error classes", what, err, n)
}

// txnDocsHook calls f from the sender goroutine at the first batch acked.
type txnDocsHook struct {
	once sync.Once
	f    func()
}

func (h *txnDocsHook) OnBatchAcked(BatchInfo, int64) { h.once.Do(h.f) }

// txnDocsRequests records the API keys of the requests completed.
type txnDocsRequests struct {
	mu   sync.Mutex
	keys []int16
}

func (h *txnDocsRequests) OnRequestDone(r RequestInfo) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.keys = append(h.keys, r.API)
}

// take returns the keys seen since the last take.
func (h *txnDocsRequests) take() []int16 {
	h.mu.Lock()
	defer h.mu.Unlock()
	k := h.keys
	h.keys = nil
	return k
}

// TestTxnDocsNilCtxPanics: "A nil ctx panics." (InitTransactions,
// CommitTransaction, AbortTransaction; SendOffsetsToTransaction's ctx too).
func TestTxnDocsNilCtxPanics(t *testing.T) {
	p, err := New(BootstrapServers("127.0.0.1:1"), TransactionalID("nil-ctx"))
	require.NoError(t, err)
	defer p.Close(context.Background())
	var nilCtx context.Context
	require.Panics(t, func() { _ = p.InitTransactions(nilCtx) }, "InitTransactions")
	require.Panics(t, func() { _ = p.SendOffsetsToTransaction(nilCtx, GroupMetadata{GroupID: "g"}, nil) }, "SendOffsetsToTransaction")
	require.Panics(t, func() { _ = p.CommitTransaction(nilCtx) }, "CommitTransaction")
	require.Panics(t, func() { _ = p.AbortTransaction(nilCtx) }, "AbortTransaction")
}

// TestTxnDocsCallsInHook: InitTransactions "fails ... with ErrInCallback
// from a record callback or a hook": the hook half (the callback half is
// TestTransactionCallsInCallback), for every transactional call.
func TestTxnDocsCallsInHook(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newTxnEnv(t, 2, broker.Config{})
		ctx := context.Background()
		got := make(chan []error, 1)
		var p *Producer
		h := &txnDocsHook{f: func() {
			got <- []error{p.InitTransactions(ctx), p.BeginTransaction(), p.SendOffsetsToTransaction(ctx, GroupMetadata{GroupID: "g"}, nil),
				p.CommitTransaction(ctx), p.AbortTransaction(ctx)}
		}}
		p = e.producer(Hooks(h))
		require.NoError(t, p.BeginTransaction())
		require.NoError(t, produceAll(p, "out", 0, "a")()[0])
		for i, err := range <-got {
			require.ErrorIs(t, err, ErrInCallback, "call %d", i)
		}
		require.NoError(t, p.CommitTransaction(ctx))
		require.Equal(t, []string{"a"}, e.committed("out", 0))
	})
}

// TestTxnDocsFencedLeavesOnlyClose: ErrProducerFenced "only Close is
// left": after the fence every transactional call and Produce fail with
// it, and Close returns nil.
func TestTxnDocsFencedLeavesOnlyClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newTxnEnv(t, 2, broker.Config{})
		ctx := context.Background()
		old := e.producer()
		require.NoError(t, old.BeginTransaction())
		require.NoError(t, produceAll(old, "out", 0, "zombie")()[0])
		fresh := e.producer()
		require.NoError(t, fresh.InitTransactions(ctx))
		require.ErrorIs(t, old.CommitTransaction(ctx), ErrProducerFenced)

		require.ErrorIs(t, old.InitTransactions(ctx), ErrProducerFenced, "InitTransactions")
		require.ErrorIs(t, old.BeginTransaction(), ErrProducerFenced, "BeginTransaction")
		require.ErrorIs(t, old.SendOffsetsToTransaction(ctx, GroupMetadata{GroupID: "g", Generation: -1}, nil), ErrProducerFenced, "SendOffsetsToTransaction")
		require.ErrorIs(t, old.CommitTransaction(ctx), ErrProducerFenced, "CommitTransaction")
		require.ErrorIs(t, old.AbortTransaction(ctx), ErrProducerFenced, "AbortTransaction")
		require.ErrorIs(t, produceAll(old, "out", 0, "more")()[0], ErrProducerFenced, "Produce")
		require.NoError(t, old.Close(ctx))
		st := old.Stats()
		require.Zero(t, st.TransactionsCommitted, "a fenced commit did not succeed")
		require.Zero(t, st.TransactionsAborted)
	})
}

// TestTxnDocsFatalLeavesOnlyClose: ErrTransactionFatal "the
// transactional producer cannot go on (the transactional id is not
// authorized ...): Close it", and BeginTransaction returns it "once the
// producer can only be closed": allowing the id again does not revive
// the producer; a new producer of the id works.
func TestTxnDocsFatalLeavesOnlyClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newTxnEnv(t, 2, broker.Config{})
		ctx := context.Background()
		e.c.DenyTransactionalID(e.id, true)
		p := e.producer()
		require.ErrorIs(t, p.InitTransactions(ctx), ErrTransactionFatal)
		e.c.DenyTransactionalID(e.id, false)
		require.ErrorIs(t, p.InitTransactions(ctx), ErrTransactionFatal, "InitTransactions")
		require.ErrorIs(t, p.BeginTransaction(), ErrTransactionFatal, "BeginTransaction")
		require.ErrorIs(t, produceAll(p, "out", 0, "x")()[0], ErrTransactionFatal, "Produce")
		require.NoError(t, p.Close(ctx))

		q := e.producer()
		require.NoError(t, q.BeginTransaction())
		require.NoError(t, produceAll(q, "out", 0, "ok")()[0])
		require.NoError(t, q.CommitTransaction(ctx))
		require.Equal(t, []string{"ok"}, e.committed("out", 0))
	})
}

// TestTxnDocsDeniedRecordsFail: producertest's DenyTransactionalID "the
// producer's transactional requests, and its records, fail with
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED": a producer initialized before
// the deny has its record fail with it, and the transaction cannot
// commit.
func TestTxnDocsDeniedRecordsFail(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newTxnEnv(t, 2, broker.Config{})
		ctx := context.Background()
		p := e.producer()
		require.NoError(t, p.BeginTransaction())
		e.c.DenyTransactionalID(e.id, true)
		err := produceAll(p, "out", 0, "denied")()[0]
		require.ErrorIs(t, err, kerr.TransactionalIDAuthorizationFailed)
		cerr := p.CommitTransaction(ctx)
		require.Error(t, cerr)
		requireClassed(t, cerr, "commit after a denied record")
		e.settled()
		require.Empty(t, e.committed("out", 0))
	})
}

// TestTxnDocsInitWaitsForFencedAbort: InitTransactions "fences any
// earlier producer with the same transactional.id and waits until the
// coordinator has aborted that producer's open transaction", so "a
// consume-transform-produce service calls it before it reads its
// committed offsets": while the fenced transaction's markers are held,
// InitTransactions does not return; once it returns, the old transaction
// is aborted (its records and offsets never count) and the partition's
// last stable offset is past it.
func TestTxnDocsInitWaitsForFencedAbort(t *testing.T) {
	for _, tv := range []int16{1, 2} {
		t.Run(map[int16]string{1: "TV1", 2: "TV2"}[tv], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newTxnEnv(t, tv, broker.Config{})
				ctx := context.Background()
				old := e.producer()
				require.NoError(t, old.BeginTransaction())
				require.NoError(t, produceAll(old, "out", 0, "zombie")()[0])
				require.NoError(t, old.SendOffsetsToTransaction(ctx, GroupMetadata{GroupID: "eos", Generation: -1},
					[]TransactionOffset{{Topic: "in", Offset: 9, LeaderEpoch: -1}}))
				e.c.HoldMarkers(true)
				fresh := e.producer()
				done := make(chan error, 1)
				go func() { done <- fresh.InitTransactions(ctx) }()
				time.Sleep(10 * time.Second)
				require.Empty(t, done, "InitTransactions returned before the fenced transaction's abort was written")
				info, _ := e.c.Transaction(e.id)
				require.Equal(t, "PrepareAbort", info.State)
				e.c.HoldMarkers(false)
				require.NoError(t, <-done)
				info, _ = e.c.Transaction(e.id)
				require.Contains(t, []string{"CompleteAbort", "Empty"}, info.State, "aborted when InitTransactions returned")
				require.Equal(t, e.c.LogEndOffset("out", 0), e.c.LastStableOffset("out", 0), "nothing open on the partition")
				require.Empty(t, committedValues(e.c, "out", 0))
				_, ok := e.c.CommittedOffset("eos", "in", 0)
				require.False(t, ok, "the fenced transaction's offsets never count")
			})
		})
	}
}

// TestTxnDocsBeginWhileAbortPending: BeginTransaction "returns
// ErrTransactionState while ... the last one's ... AbortTransaction has
// not completed".
func TestTxnDocsBeginWhileAbortPending(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newTxnEnv(t, 2, broker.Config{RTT: time.Second})
		p := e.producer(RequestTimeout(10 * time.Second))
		require.NoError(t, p.BeginTransaction())
		w := produceAll(p, "out", 0, "a")
		for p.Stats().BatchesSent == 0 {
			time.Sleep(time.Millisecond)
		}
		short, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		require.ErrorIs(t, p.AbortTransaction(short), context.DeadlineExceeded)
		err := p.BeginTransaction()
		require.ErrorIs(t, err, ErrTransactionState, "the abort has not completed")
		require.NoError(t, p.AbortTransaction(context.Background()))
		w()
		require.NoError(t, p.BeginTransaction())
	})
}

// TestTxnDocsOffsetsCtxEndsThenFail: SendOffsetsToTransaction "If ctx
// ends first it returns ctx's error, wrapped, and the offsets are still
// sent: CommitTransaction waits for them, and fails if they failed" (the
// failing half; TestTransactionOffsetsCtxEnds is the other).
func TestTxnDocsOffsetsCtxEndsThenFail(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newTxnEnv(t, 2, broker.Config{RTT: time.Second})
		ctx := context.Background()
		p := e.producer(RequestTimeout(10 * time.Second))
		require.NoError(t, p.BeginTransaction())
		short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		defer cancel()
		err := p.SendOffsetsToTransaction(short, GroupMetadata{GroupID: "eos", Generation: 7, MemberID: "gone"},
			[]TransactionOffset{{Topic: "in", Offset: 5, LeaderEpoch: -1}})
		require.ErrorIs(t, err, context.DeadlineExceeded)
		err = p.CommitTransaction(ctx)
		require.ErrorIs(t, err, ErrTransactionAbortable)
		require.True(t, errors.Is(err, kerr.UnknownMemberID) || errors.Is(err, kerr.IllegalGeneration), "%v", err)
		require.NoError(t, p.AbortTransaction(ctx))
		e.settled()
		_, ok := e.c.CommittedOffset("eos", "in", 0)
		require.False(t, ok)
		st := p.Stats()
		require.Zero(t, st.TransactionsCommitted, "the refused commit does not count")
		require.Equal(t, int64(1), st.TransactionsAborted)
	})
}

// TestTxnDocsCommitDecidedBeforeMarkers: CommitTransaction "returns nil
// once the commit is decided: the records and offsets become visible to
// read_committed consumers as soon as the coordinator has written its
// markers": with the markers held the commit has returned, and nothing
// of it is visible; once they are written, all of it is.
func TestTxnDocsCommitDecidedBeforeMarkers(t *testing.T) {
	for _, tv := range []int16{1, 2} {
		t.Run(map[int16]string{1: "TV1", 2: "TV2"}[tv], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newTxnEnv(t, tv, broker.Config{})
				ctx := context.Background()
				p := e.producer()
				require.NoError(t, p.BeginTransaction())
				require.NoError(t, produceAll(p, "out", 0, "a", "b")()[0])
				require.NoError(t, p.SendOffsetsToTransaction(ctx, GroupMetadata{GroupID: "eos", Generation: -1},
					[]TransactionOffset{{Topic: "in", Offset: 3, LeaderEpoch: -1}}))
				e.c.HoldMarkers(true)
				require.NoError(t, p.CommitTransaction(ctx), "decided with its markers held")
				info, _ := e.c.Transaction(e.id)
				require.Equal(t, "PrepareCommit", info.State)
				require.Empty(t, committedValues(e.c, "out", 0), "not visible before the markers")
				_, ok := e.c.CommittedOffset("eos", "in", 0)
				require.False(t, ok, "offsets not visible before the markers")
				e.c.HoldMarkers(false)
				require.Equal(t, []string{"a", "b"}, e.committed("out", 0))
				off, ok := e.c.CommittedOffset("eos", "in", 0)
				require.True(t, ok)
				require.Equal(t, int64(3), off)
			})
		})
	}
}

// TestTxnDocsAbortDropsUnsentWaitsSent: AbortTransaction "records not
// sent yet are dropped (their callbacks get an error wrapping
// ErrTransactionAborted), records already sent are waited for (their
// callbacks may still report success: the records are in the log,
// aborted, and read_committed consumers skip them), then the coordinator
// is asked to abort".
func TestTxnDocsAbortDropsUnsentWaitsSent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newTxnEnv(t, 2, broker.Config{RTT: time.Second})
		ctx := context.Background()
		p := e.producer(Linger(time.Hour), DeliveryTimeout(2*time.Hour), RequestTimeout(10*time.Second))
		require.NoError(t, p.BeginTransaction())
		var mu sync.Mutex
		var order []string
		note := func(s string) {
			mu.Lock()
			defer mu.Unlock()
			order = append(order, s)
		}
		var sentErr, unsentErr error
		p.Produce(ctx, toPartition("out", 0, make([]byte, 600)), func(_ *Record, err error) { sentErr = err; note("sent") }) // fills a batch: sent at once
		for p.Stats().BatchesSent == 0 {
			time.Sleep(time.Millisecond)
		}
		p.Produce(ctx, toPartition("out", 1, []byte("unsent")), func(_ *Record, err error) { unsentErr = err; note("unsent") }) // lingers
		require.NoError(t, p.AbortTransaction(ctx))
		note("abort returned")
		mu.Lock()
		require.ElementsMatch(t, []string{"sent", "unsent"}, order[:2], "both called back before AbortTransaction returned: %v", order)
		mu.Unlock()
		require.NoError(t, sentErr, "the sent record was waited for")
		require.ErrorIs(t, unsentErr, ErrTransactionAborted)
		requireClassed(t, unsentErr, "the dropped record")
		e.settled()
		require.Len(t, e.c.Records("out", 0), 1, "the sent record is in the log")
		require.Empty(t, e.c.Records("out", 1), "the dropped one never was sent")
		require.Empty(t, committedValues(e.c, "out", 0), "read_committed skips the aborted record")
		require.Equal(t, int64(1), e.c.TxnStats().Aborted, "the coordinator was asked to abort")
	})
}

// TestTxnDocsFateUnknownAbortable: "A record that failed or whose fate is
// unknown makes the transaction abortable", CommitTransaction refuses
// with it ("If any record of the transaction failed or its fate is
// unknown ... errors.As finds its *DeliveryError"), and ReadBack "has no
// effect on a transactional producer": no read-back request is sent and
// the record is called back with its fate unknown.
func TestTxnDocsFateUnknownAbortable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newTxnEnv(t, 2, broker.Config{})
		ctx := context.Background()
		reqs := &txnDocsRequests{}
		p := e.producer(ReadBack(true), RequestTimeout(time.Second), DeliveryTimeout(3*time.Second), Hooks(reqs))
		require.NoError(t, p.BeginTransaction())
		coord := e.c.Coordinator(e.id, true)
		part := int32(0)
		if leader, _ := e.c.Leader("out", 0); leader == coord {
			part = 1
		}
		leader, _ := e.c.Leader("out", part)
		require.NotEqual(t, coord, leader)
		require.NoError(t, produceAll(p, "out", part, "first")()[0], "connected to the leader")
		e.c.Stall(leader, time.Hour)
		err := produceAll(p, "out", part, "lost")()[0]
		var de *DeliveryError
		require.ErrorAs(t, err, &de)
		require.True(t, de.FateUnknown, "%v", err)
		e.c.Stall(leader, 0)
		cerr := p.CommitTransaction(ctx)
		require.ErrorIs(t, cerr, ErrTransactionAbortable)
		var cde *DeliveryError
		require.ErrorAs(t, cerr, &cde)
		require.True(t, cde.FateUnknown)
		require.NoError(t, p.AbortTransaction(ctx))
		require.NotContains(t, reqs.take(), int16(1), "no read-back Fetch")
		require.Zero(t, p.Stats().Readback, "read-back settled nothing")
		e.settled()
		require.Empty(t, committedValues(e.c, "out", part))
	})
}

// TestTxnDocsTimeoutBounds: TransactionTimeout "Default 60s; between 1ms
// and math.MaxInt32 milliseconds, else a *ConfigError. The coordinator
// refuses more than its transaction.max.timeout.ms (15 minutes by
// default)": the bounds are accepted, and a coordinator at its default
// takes 15 minutes.
func TestTxnDocsTimeoutBounds(t *testing.T) {
	c, err := configFrom(map[string]string{"bootstrap.servers": "127.0.0.1:9092", "transactional.id": "x"})
	require.NoError(t, err)
	require.Equal(t, 60*time.Second, c.txnTimeout, "the default")
	for _, d := range []time.Duration{time.Millisecond, math.MaxInt32 * time.Millisecond} {
		p, err := New(BootstrapServers("127.0.0.1:1"), TransactionalID("x"), TransactionTimeout(d))
		require.NoError(t, err, "%v", d)
		require.NoError(t, p.Close(context.Background()))
	}
	synctest.Test(t, func(t *testing.T) {
		e := newTxnEnv(t, 2, broker.Config{})
		require.NoError(t, e.producer(TransactionTimeout(15*time.Minute)).InitTransactions(context.Background()))
	})
}

// TestTxnDocsTransactionalIDProperty: the transactional.id property row
// says what an empty value does: like the option's empty id, it is a
// *ConfigError, not a producer without transactions.
func TestTxnDocsTransactionalIDProperty(t *testing.T) {
	_, err := NewFromProperties(map[string]string{"bootstrap.servers": "127.0.0.1:9092", "transactional.id": ""})
	var ce *ConfigError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "transactional.id", ce.Property)
}

// TestTxnDocsProtocolPerTransaction: "Each transaction uses the protocol
// the brokers offer at its start (KIP-890's transaction version 2, or
// version 1) for its whole life", and the transactional requests are
// reported to HookRequestDone with RequestInfo.API's keys (10
// FindCoordinator, 22 InitProducerId, 24 AddPartitionsToTxn, 25
// AddOffsetsToTxn, 26 EndTxn, 28 TxnOffsetCommit): a version 1
// transaction that sees the cluster move to version 2 keeps adding its
// partitions; the next transaction adds none.
func TestTxnDocsProtocolPerTransaction(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newTxnEnv(t, 1, broker.Config{})
		ctx := context.Background()
		reqs := &txnDocsRequests{}
		p := e.producer(Hooks(reqs))
		require.NoError(t, p.BeginTransaction())
		require.NoError(t, produceAll(p, "out", 0, "v1-a")()[0])
		require.NoError(t, e.c.SetTransactionVersion(2))
		for n := range int32(3) {
			e.c.DropConnections(n) // every connection asks ApiVersions again
		}
		reqs.take()
		require.NoError(t, produceAll(p, "out", 1, "v1-b")()[0])
		require.NoError(t, p.SendOffsetsToTransaction(ctx, GroupMetadata{GroupID: "eos", Generation: -1},
			[]TransactionOffset{{Topic: "in", Offset: 1, LeaderEpoch: -1}}))
		require.NoError(t, p.CommitTransaction(ctx))
		keys := reqs.take()
		for _, k := range []int16{24, 25, 26, 28} {
			require.Contains(t, keys, k, "version 1 to its end: %v", keys)
		}
		e.settled()
		epoch := p.Stats().ProducerEpoch

		require.NoError(t, p.BeginTransaction())
		require.NoError(t, produceAll(p, "out", 1, "v2")()[0])
		require.NoError(t, p.CommitTransaction(ctx))
		keys = reqs.take()
		require.NotContains(t, keys, int16(24), "version 2: no AddPartitionsToTxn: %v", keys)
		require.Contains(t, keys, int16(26))
		require.Equal(t, []string{"v1-a"}, e.committed("out", 0))
		require.Equal(t, []string{"v1-b", "v2"}, e.committed("out", 1))
		require.Greater(t, p.Stats().ProducerEpoch, epoch, "version 2 moved the epoch at its end")
	})
}

// TestTxnDocsRequestKeys: HookRequestDone reports the transactional
// requests under RequestInfo.API's keys 10 and 22 (the rest are in
// TestTxnDocsProtocolPerTransaction).
func TestTxnDocsRequestKeys(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newTxnEnv(t, 2, broker.Config{})
		reqs := &txnDocsRequests{}
		p := e.producer(Hooks(reqs))
		require.NoError(t, p.InitTransactions(context.Background()))
		keys := reqs.take()
		require.True(t, slices.Contains(keys, 10) && slices.Contains(keys, 22), "%v", keys)
	})
}

// TestTxnDocsMarkerDelay: producertest's SetMarkerDelay "until then the
// transaction is completing, its records are not readable with
// read_committed, and the producer's next transaction meets
// CONCURRENT_TRANSACTIONS (which a producer retries). Negative values
// count as 0", and DefaultMarkerDelay is the delay until then.
func TestTxnDocsMarkerDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newTxnEnv(t, 2, broker.Config{Nodes: 1})
		ctx := context.Background()
		p := e.producer()
		txn := func(v string) {
			require.NoError(t, p.BeginTransaction())
			require.NoError(t, produceAll(p, "out", 0, v)()[0])
			require.NoError(t, p.CommitTransaction(ctx))
		}
		txn("a") // answered at once: no time passes on the in-memory network
		time.Sleep(broker.DefaultMarkerDelay - time.Microsecond)
		synctest.Wait()
		info, _ := e.c.Transaction(e.id)
		require.Equal(t, "PrepareCommit", info.State, "the default delay has not passed")
		time.Sleep(time.Microsecond)
		synctest.Wait()
		info, _ = e.c.Transaction(e.id)
		require.Equal(t, "CompleteCommit", info.State, "written after DefaultMarkerDelay")

		e.c.SetMarkerDelay(10 * time.Second)
		txn("b")
		before := e.c.TxnStats().ConcurrentTransactions
		start := time.Now()
		txn("c")
		require.Greater(t, e.c.TxnStats().ConcurrentTransactions, before, "the next transaction met CONCURRENT_TRANSACTIONS")
		require.GreaterOrEqual(t, time.Since(start), 9*time.Second, "it went through once b's markers were written")
		require.Equal(t, []string{"a", "b"}, committedValues(e.c, "out", 0), "c is still completing")

		time.Sleep(10 * time.Second)
		e.c.SetMarkerDelay(-time.Second)
		txn("d")
		synctest.Wait()
		info, _ = e.c.Transaction(e.id)
		require.Equal(t, "CompleteCommit", info.State, "a negative delay counts as 0")
		require.Equal(t, []string{"a", "b", "c", "d"}, committedValues(e.c, "out", 0))
	})
}

// TestTxnDocsCoordinatorMovesKeepState: producertest's
// MoveTransactionCoordinator "the transaction's state, including markers
// still to write, moves along. An unknown node is an error, and nothing
// changes", and MoveGroupCoordinator "(its members, offsets and offsets
// sent in transactions)": a commit whose markers are held when the
// coordinators move completes at the new ones, with its offsets.
func TestTxnDocsCoordinatorMovesKeepState(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newTxnEnv(t, 2, broker.Config{})
		ctx := context.Background()
		p := e.producer()
		require.NoError(t, p.BeginTransaction())
		require.NoError(t, produceAll(p, "out", 0, "a")()[0])
		require.NoError(t, p.SendOffsetsToTransaction(ctx, GroupMetadata{GroupID: "eos", Generation: -1},
			[]TransactionOffset{{Topic: "in", Offset: 4, LeaderEpoch: -1}}))
		e.c.HoldMarkers(true)
		require.NoError(t, p.CommitTransaction(ctx))
		tc, gc := e.c.Coordinator(e.id, true), e.c.Coordinator("eos", false)
		require.Error(t, e.c.MoveCoordinator(e.id, true, 7))
		require.Error(t, e.c.MoveCoordinator("eos", false, -1))
		require.Equal(t, tc, e.c.Coordinator(e.id, true), "nothing changed")
		require.Equal(t, gc, e.c.Coordinator("eos", false), "nothing changed")
		require.NoError(t, e.c.MoveCoordinator(e.id, true, (tc+1)%3))
		require.NoError(t, e.c.MoveCoordinator("eos", false, (gc+1)%3))
		e.c.HoldMarkers(false)
		require.Equal(t, []string{"a"}, e.committed("out", 0))
		off, ok := e.c.CommittedOffset("eos", "in", 0)
		require.True(t, ok)
		require.Equal(t, int64(4), off)
		require.NoError(t, p.BeginTransaction())
		require.NoError(t, produceAll(p, "out", 0, "b")()[0])
		require.NoError(t, p.CommitTransaction(ctx))
		require.Equal(t, []string{"a", "b"}, e.committed("out", 0))
	})
}

// TestTxnDocsErrorsWrapAClass: "Every error the transactional calls
// return, and every record error caused by the transaction, wraps one of
// them", besides ctx's errors, ErrInCallback and ErrClosed (the doc says
// so): a sample of each call's refusals.
func TestTxnDocsErrorsWrapAClass(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newTxnEnv(t, 2, broker.Config{})
		ctx := context.Background()
		p := e.producer()
		g := GroupMetadata{GroupID: "eos", Generation: -1}
		requireClassed(t, p.CommitTransaction(ctx), "commit before init")
		requireClassed(t, p.AbortTransaction(ctx), "abort before init")
		requireClassed(t, p.SendOffsetsToTransaction(ctx, g, nil), "offsets before init")
		requireClassed(t, produceAll(p, "out", 0, "x")()[0], "produce before begin")
		require.NoError(t, p.BeginTransaction())
		requireClassed(t, p.BeginTransaction(), "begin twice")
		require.ErrorIs(t, p.SendOffsetsToTransaction(ctx, GroupMetadata{}, nil), ErrTransactionState, "offsets without a group id")
		e.c.InjectError("out", 0, kerr.InvalidRecord.Code, 1)
		require.ErrorIs(t, produceAll(p, "out", 0, "bad")()[0], kerr.InvalidRecord)
		requireClassed(t, produceAll(p, "out", 0, "late")()[0], "produce in an abortable transaction")
		requireClassed(t, p.BeginTransaction(), "begin in an abortable transaction")
		requireClassed(t, p.SendOffsetsToTransaction(ctx, g, nil), "offsets in an abortable transaction")
		requireClassed(t, p.CommitTransaction(ctx), "commit of an abortable transaction")
		require.NoError(t, p.AbortTransaction(ctx))
		requireClassed(t, p.AbortTransaction(ctx), "abort twice")
	})
	np, err := New(BootstrapServers("127.0.0.1:1"))
	require.NoError(t, err)
	defer np.Close(context.Background())
	requireClassed(t, np.InitTransactions(context.Background()), "not transactional")
}

// TestTxnDocsTV1StaysAtFive: the README's "Under version 1 ... a
// transaction stays at 5 batches in flight per partition ...: version 1
// caps Produce at v11": on a topic whose window is 20, a version 1
// transaction never has more than 5 batches of the partition in flight
// and never learns the window. Negative control (txnTV1Uncapped): Produce
// v14 inside the version 1 transaction learns 20 and fills it.
func TestTxnDocsTV1StaysAtFive(t *testing.T) {
	for _, bug := range bugCases {
		t.Run(map[bool]string{false: "bug=false", true: "bug=true"}[bug], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newTxnEnv(t, 1, broker.Config{Nodes: 1, RTT: 50 * time.Millisecond, Topics: []broker.TopicConfig{{Name: "w", Partitions: 1, Window: 20}}})
				ctx := context.Background()
				p := e.producer(MaxInFlightRequestsPerConnection(50), BatchSize(1024), Linger(0), bugOpt(t, txnTV1Uncapped, bug))
				require.NoError(t, p.BeginTransaction())
				vals := make([]string, 600)
				for i := range vals {
					vals[i] = string(make([]byte, 100)) + string(rune('a'+i%26))
				}
				for _, err := range produceAll(p, "w", 0, vals...)() {
					require.NoError(t, err)
				}
				require.NoError(t, p.CommitTransaction(ctx))
				bs := e.c.PartitionStats("w", 0)
				if bug {
					require.Equal(t, 20, p.InFlightLimit("w", 0), "negative control: the window learned inside a version 1 transaction")
					require.Greater(t, bs.MaxInFlight, 5, "negative control")
					return
				}
				require.Equal(t, 5, p.InFlightLimit("w", 0))
				require.Equal(t, 5, bs.MaxInFlight, "5 batches in flight, never more")
				require.Len(t, e.committed("w", 0), len(vals))
			})
		})
	}
}

// TestTxnDocsStatsCountedOnReturn: TransactionsCommitted and
// TransactionsAborted "count the transactions whose CommitTransaction or
// AbortTransaction succeeded": once the call has returned nil, Stats
// counts it (the count was once taken after the call was released, so a
// Stats right after the return could miss it).
func TestTxnDocsStatsCountedOnReturn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newTxnEnv(t, 2, broker.Config{Nodes: 1})
		ctx := context.Background()
		p := e.producer()
		for i := range 100 {
			require.NoError(t, p.BeginTransaction())
			require.NoError(t, produceAll(p, "out", 0, "x")()[0])
			if i%2 == 0 {
				require.NoError(t, p.CommitTransaction(ctx))
			} else {
				require.NoError(t, p.AbortTransaction(ctx))
			}
			st := p.Stats()
			require.Equal(t, int64(i/2+1), st.TransactionsCommitted, "after transaction %d", i)
			require.Equal(t, int64((i+1)/2), st.TransactionsAborted, "after transaction %d", i)
		}
	})
}

// TestTxnDocsAbortableOnceCalledBack: "A record that failed ... makes the
// transaction abortable", and BeginTransaction returns "the transaction's
// error while it can only be aborted": from the failed record's callback
// on, not a moment later. BeginTransaction, Produce and
// SendOffsetsToTransaction right after the callback get
// ErrTransactionAbortable (the abort-only state once reached Produce only
// at the sender's next pass, after the callback could have run).
func TestTxnDocsAbortableOnceCalledBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newTxnEnv(t, 2, broker.Config{Nodes: 1})
		ctx := context.Background()
		p := e.producer()
		g := GroupMetadata{GroupID: "g", Generation: -1}
		for i := range 100 {
			require.NoError(t, p.BeginTransaction())
			e.c.InjectError("out", 0, kerr.InvalidRecord.Code, 1)
			require.ErrorIs(t, produceAll(p, "out", 0, "bad")()[0], kerr.InvalidRecord)
			require.ErrorIs(t, p.BeginTransaction(), ErrTransactionAbortable, "transaction %d", i)
			require.ErrorIs(t, p.SendOffsetsToTransaction(ctx, g, nil), ErrTransactionAbortable, "transaction %d", i)
			require.ErrorIs(t, produceAll(p, "out", 0, "x")()[0], ErrTransactionAbortable, "transaction %d", i)
			require.NoError(t, p.AbortTransaction(ctx))
		}
	})
}

// TestTxnDocsAbortEndsSendOffsets: ErrTransactionAborted fails "a
// SendOffsetsToTransaction call it ended": offsets still waiting for the
// coordinator when AbortTransaction is called return an error of that
// class, and never count.
func TestTxnDocsAbortEndsSendOffsets(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newTxnEnv(t, 2, broker.Config{RTT: time.Second})
		ctx := context.Background()
		p := e.producer(RequestTimeout(10 * time.Second))
		require.NoError(t, p.BeginTransaction())
		g := GroupMetadata{GroupID: "eos", Generation: -1}
		res := make(chan error, 2)
		for _, off := range []int64{5, 6} {
			go func() {
				res <- p.SendOffsetsToTransaction(ctx, g, []TransactionOffset{{Topic: "in", Offset: off, LeaderEpoch: -1}})
			}()
		}
		synctest.Wait() // both calls wait for the coordinator
		require.Empty(t, res)
		require.NoError(t, p.AbortTransaction(ctx))
		aborted := 0
		for range 2 {
			if err := <-res; err != nil {
				require.ErrorIs(t, err, ErrTransactionAborted)
				aborted++
			}
		}
		require.Positive(t, aborted, "AbortTransaction ended a waiting call")
		e.settled()
		_, ok := e.c.CommittedOffset("eos", "in", 0)
		require.False(t, ok)
	})
}

// TestTxnDocsREADMETransactionsCompiles builds the README's "Transactions"
// code block, inside a function whose parameters are the names it takes
// from around it (addr, ctx, rec, gen, member, offsets), as a program of
// its own module requiring this one, so the snippet's calls and types
// stay those of the API. It needs the go command and the module cache (no
// network).
func TestTxnDocsREADMETransactionsCompiles(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a program with the go command")
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command in PATH")
	}
	raw, err := os.ReadFile("../README.md")
	require.NoError(t, err)
	_, rest, ok := strings.Cut(string(raw), "\n## Transactions\n")
	require.True(t, ok, "README.md has no Transactions section")
	section, _, _ := strings.Cut(rest, "\n## ")
	_, code, ok := strings.Cut(section, "```go\n")
	if ok {
		code, _, ok = strings.Cut(code, "```")
	}
	require.True(t, ok, "README.md's Transactions section has no ```go block")
	prog := "package main\n\nimport (\n\t\"context\"\n\t\"errors\"\n\n\t\"github.com/longhaul-kafka/longhaul/producer\"\n)\n\n" +
		"func run(ctx context.Context, addr string, rec *producer.Record, gen int32, member string, offsets []producer.TransactionOffset) {\n" +
		code + "}\n\nfunc main() {}\n"
	root, err := filepath.Abs("..")
	require.NoError(t, err)
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	require.NoError(t, err)
	dir := t.TempDir()
	gomod := "module readmetxn\n\ngo 1.26.0\n\nrequire github.com/longhaul-kafka/longhaul v0.0.0\n\nreplace github.com/longhaul-kafka/longhaul => " + root + "\n"
	for name, body := range map[string][]byte{"go.mod": []byte(gomod), "go.sum": sum, "main.go": []byte(prog)} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), body, 0o644))
	}
	cmd := exec.Command(gobin, "build", "-o", filepath.Join(dir, "txn"), ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "README's Transactions example does not build:\n%s\n--- main.go ---\n%s", out, prog)
}
