package producer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/longhaul-kafka/longhaul/internal/broker"
	"github.com/longhaul-kafka/longhaul/internal/memnet"
)

// txnEnv is an embedded cluster on virtual time with a transactional
// producer's options.
type txnEnv struct {
	t  *testing.T
	c  *broker.Cluster
	n  *memnet.Network
	id string
}

func newTxnEnv(t *testing.T, tv int16, cfg broker.Config) *txnEnv {
	t.Helper()
	if cfg.Nodes == 0 {
		cfg.Nodes = 3 // coordinators and leaders differ
	}
	if cfg.Topics == nil {
		cfg.Topics = []broker.TopicConfig{{Name: "out", Partitions: 2}, {Name: "in", Partitions: 1}}
	}
	c, n := memCluster(t, cfg)
	require.NoError(t, c.SetTransactionVersion(tv))
	return &txnEnv{t: t, c: c, n: n, id: "txn-" + t.Name()}
}

func (e *txnEnv) producer(opts ...Opt) *Producer {
	e.t.Helper()
	return memProducer(e.t, e.c, e.n, append([]Opt{TransactionalID(e.id), DeliveryTimeout(30 * time.Second)}, opts...)...)
}

// produce sends values to out/partition and returns a wait for their
// callbacks' errors.
func produceAll(p *Producer, topic string, partition int32, values ...string) func() []error {
	var wg sync.WaitGroup
	errs := make([]error, len(values))
	for i, v := range values {
		wg.Add(1)
		p.Produce(context.Background(), toPartition(topic, partition, []byte(v)), func(_ *Record, err error) {
			errs[i] = err
			wg.Done()
		})
	}
	return func() []error { wg.Wait(); return errs }
}

// settled waits (virtual time) until the coordinator wrote the markers of
// the id's last transaction.
func (e *txnEnv) settled() {
	e.t.Helper()
	for range 10000 {
		info, ok := e.c.Transaction(e.id)
		if ok && (info.State == "CompleteCommit" || info.State == "CompleteAbort" || info.State == "Empty") {
			return
		}
		time.Sleep(time.Millisecond)
	}
	e.t.Fatal("the transaction's markers were never written")
}

func (e *txnEnv) committed(topic string, partition int32) []string {
	e.settled()
	return committedValues(e.c, topic, partition)
}

// TestTransactionsCommitAndAbort: the public API under transaction
// versions 1 and 2, on three nodes: a committed transaction with offsets is
// read by read_committed once, in order, with its offsets committed; an
// aborted one with offsets is invisible, its offsets not committed; the
// next transaction commits. Produce outside a transaction is refused.
func TestTransactionsCommitAndAbort(t *testing.T) {
	for _, tv := range []int16{1, 2} {
		t.Run(fmt.Sprintf("TV%d", tv), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newTxnEnv(t, tv, broker.Config{})
				p := e.producer()
				ctx := context.Background()

				err := produceAll(p, "out", 0, "outside")()[0]
				require.ErrorIs(t, err, ErrTransactionState, "Produce before BeginTransaction")

				require.NoError(t, p.InitTransactions(ctx))
				require.NoError(t, p.BeginTransaction())
				w0 := produceAll(p, "out", 0, "a1", "a2", "a3")
				w1 := produceAll(p, "out", 1, "b1")
				g := GroupMetadata{GroupID: "eos", Generation: -1}
				require.NoError(t, p.SendOffsetsToTransaction(ctx, g, []TransactionOffset{{Topic: "in", Partition: 0, Offset: 42, LeaderEpoch: -1}}))
				require.NoError(t, p.CommitTransaction(ctx))
				require.Equal(t, []error{nil, nil, nil}, w0(), "every record's callback ran before CommitTransaction returned")
				require.Equal(t, []error{nil}, w1())

				require.NoError(t, p.BeginTransaction())
				wx := produceAll(p, "out", 0, "x1", "x2")
				require.NoError(t, p.SendOffsetsToTransaction(ctx, g, []TransactionOffset{{Topic: "in", Partition: 0, Offset: 99, LeaderEpoch: -1}}))
				require.NoError(t, p.AbortTransaction(ctx))
				for _, err := range wx() {
					if err != nil {
						require.ErrorIs(t, err, ErrTransactionAborted)
					}
				}
				err = produceAll(p, "out", 0, "between")()[0]
				require.ErrorIs(t, err, ErrTransactionState, "Produce after AbortTransaction")

				require.NoError(t, p.BeginTransaction())
				w1 = produceAll(p, "out", 1, "b2")
				require.NoError(t, p.CommitTransaction(ctx))
				require.Equal(t, []error{nil}, w1())

				require.Equal(t, []string{"a1", "a2", "a3"}, e.committed("out", 0))
				require.Equal(t, []string{"b1", "b2"}, e.committed("out", 1))
				off, ok := e.c.CommittedOffset("eos", "in", 0)
				require.True(t, ok)
				require.Equal(t, int64(42), off, "the aborted transaction's offset is not committed")
				st := p.Stats()
				require.Equal(t, int64(2), st.TransactionsCommitted)
				require.Equal(t, int64(1), st.TransactionsAborted)
				require.Zero(t, st.EpochBumps, "no idempotent epoch bump")
			})
		})
	}
}

// TestTransactionFailedRecordFailsCommit: a record the broker refuses
// (INVALID_RECORD on a compacted topic without a key) makes the
// transaction abortable: CommitTransaction returns ErrTransactionAbortable
// with that record's error; AbortTransaction succeeds and the next
// transaction commits. Nothing of the failed transaction is read.
func TestTransactionFailedRecordFailsCommit(t *testing.T) {
	for _, tv := range []int16{1, 2} {
		t.Run(fmt.Sprintf("TV%d", tv), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newTxnEnv(t, tv, broker.Config{})
				p := e.producer()
				ctx := context.Background()
				require.NoError(t, p.BeginTransaction(), "lazy init")
				ok := produceAll(p, "out", 0, "ok")
				require.NoError(t, ok()[0])
				e.c.InjectError("out", 1, kerr.InvalidRecord.Code, 1)
				bad := produceAll(p, "out", 1, "bad")
				berr := bad()[0]
				require.ErrorIs(t, berr, kerr.InvalidRecord)
				err := p.CommitTransaction(ctx)
				require.ErrorIs(t, err, ErrTransactionAbortable)
				require.ErrorIs(t, err, kerr.InvalidRecord)
				var de *DeliveryError
				require.ErrorAs(t, err, &de)
				require.Equal(t, int32(1), de.Partition)
				err = produceAll(p, "out", 0, "late")()[0]
				require.ErrorIs(t, err, ErrTransactionAbortable, "Produce in an abort-only transaction gets its error")
				require.NoError(t, p.AbortTransaction(ctx))
				require.NoError(t, p.BeginTransaction())
				require.NoError(t, produceAll(p, "out", 0, "next")()[0])
				require.NoError(t, p.CommitTransaction(ctx))
				require.Equal(t, []string{"next"}, e.committed("out", 0))
				require.Empty(t, e.committed("out", 1))
			})
		})
	}
}

var _ = errors.Is
