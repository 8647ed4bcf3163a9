package producer

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/longhaul-kafka/longhaul/internal/broker"
)

// TestTransactionOutlivesTimeoutWhilePartitionUnavailableTV1 is the
// sequence TestTxnMatrix saw once on Kafka 4.4 at transaction version 1
// (a loaded machine; the killed broker took about 7 minutes to restart): a
// partition of the open transaction refuses writes with a retriable error
// (NOT_ENOUGH_REPLICAS, as a partition below min.insync.replicas does)
// for longer than transaction.timeout.ms, so the coordinator aborts the
// transaction under a bumped epoch. Under version 1 that fences the
// producer, which no second producer did: once the partition takes writes
// again the record is refused INVALID_PRODUCER_EPOCH (the abort's marker
// carries the new epoch), CommitTransaction fails abortable with that
// record's error, and AbortTransaction is answered PRODUCER_FENCED
// (EndTxn with the old epoch), as Java's producer reports it; after that
// only Close is left. Nothing of the transaction is read, and the record
// written before the stall was aborted with it.
func TestTransactionOutlivesTimeoutWhilePartitionUnavailableTV1(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newTxnEnv(t, 1, broker.Config{})
		ctx := context.Background()
		p := e.producer(TransactionTimeout(10 * time.Second))
		require.NoError(t, p.BeginTransaction())
		require.NoError(t, produceAll(p, "out", 1, "before")()[0])
		e.c.InjectError("out", 0, kerr.NotEnoughReplicas.Code, 1<<30)
		wait := produceAll(p, "out", 0, "stalled")
		// Past the timeout: the coordinator fenced and aborted.
		for range 600 {
			if info, _ := e.c.Transaction(e.id); info.TimedOut {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		info, _ := e.c.Transaction(e.id)
		require.True(t, info.TimedOut, "the coordinator timed the transaction out: %+v", info)
		e.c.InjectError("out", 0, 0, 0) // the partition takes writes again
		err := wait()[0]
		require.ErrorIs(t, err, kerr.InvalidProducerEpoch, "the record after the fence")
		err = p.CommitTransaction(ctx)
		require.ErrorIs(t, err, ErrTransactionAbortable)
		require.ErrorIs(t, err, kerr.InvalidProducerEpoch)
		err = p.AbortTransaction(ctx)
		require.ErrorIs(t, err, ErrProducerFenced)
		require.ErrorIs(t, err, kerr.ProducerFenced)
		require.ErrorIs(t, p.BeginTransaction(), ErrProducerFenced, "only Close is left")
		require.Empty(t, e.committed("out", 0))
		require.Empty(t, e.committed("out", 1))
		require.False(t, errors.Is(err, ErrTransactionFatal), "fenced, not fatal: %v", err)
	})
}

// txnLog is a slog handler's writer safe for the producer's goroutines.
type txnLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *txnLog) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(b)
}

func (l *txnLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// TestTransactionDebugLog: at debug level a transactional producer logs
// each coordinator request with its producer id and epoch and each answer
// (with the error, if any), and each failed transactional batch.
func TestTransactionDebugLog(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newTxnEnv(t, 1, broker.Config{})
		var log txnLog
		p := e.producer(Logger(slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelDebug}))))
		require.NoError(t, p.BeginTransaction())
		require.NoError(t, produceAll(p, "out", 0, "a")()[0])
		e.c.InjectError("out", 1, kerr.InvalidRecord.Code, 1)
		require.Error(t, produceAll(p, "out", 1, "b")()[0])
		require.Error(t, p.CommitTransaction(context.Background()))
		require.NoError(t, p.AbortTransaction(context.Background()))
		s := log.String()
		for _, want := range []string{
			`msg="transactional request" api=FindCoordinator`,
			`msg="transactional request" api=InitProducerId producer_id=-1 epoch=-1`,
			`msg="transactional answer" api=InitProducerId producer_id=`,
			`msg="transactional request" api=AddPartitionsToTxn`,
			`msg="transactional answer" api=AddPartitionsToTxn`,
			`msg="transactional request" api=EndTxn`,
			`msg="transactional answer" api=EndTxn`,
			`msg="transactional batch failed" topic=out partition=1`,
			`INVALID_RECORD`,
		} {
			require.Contains(t, s, want)
		}
	})
}
