package producer

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/longhaul-kafka/longhaul/internal/broker"
	"github.com/longhaul-kafka/longhaul/protocol"
)

// rawInit initializes the env's transactional id over connections of its
// own, as a new instance of the application would, retrying until an
// answer without error.
func (e *txnEnv) rawInit() {
	e.t.Helper()
	ctx := context.Background()
	cfg := protocol.DialConfig{Dial: e.n.Dial}
	for range 1000 {
		code := func() int16 {
			boot, err := protocol.Dial(ctx, e.c.Addr(), cfg)
			require.NoError(e.t, err)
			defer boot.Close()
			res, err := protocol.FindCoordinator(ctx, boot, protocol.CoordinatorTransaction, e.id)
			require.NoError(e.t, err)
			if res.ErrorCode != 0 {
				return res.ErrorCode
			}
			conn, err := protocol.Dial(ctx, res.Addr, cfg)
			require.NoError(e.t, err)
			defer conn.Close()
			ir, err := protocol.InitTransactionalID(ctx, conn, e.id, time.Minute, -1, -1)
			require.NoError(e.t, err)
			return ir.ErrorCode
		}()
		if code == 0 {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	e.t.Fatal("the raw InitProducerId never succeeded")
}

// TestTransactionBumpRetryFencedAfterFailover: under transaction
// version 1 an abort after a failed record ends with an InitProducerId
// bump; when the coordinator fails over between applying that bump and
// answering it, the retry at the new coordinator carries the epoch
// before the bump, which the new coordinator does not know (Kafka keeps
// it in memory only), so it is PRODUCER_FENCED although no other
// producer exists. AbortTransaction returns ErrProducerFenced, as Java's
// abortTransaction throws ProducerFencedException: nothing in the answer
// tells it from a real fence, and an InitProducerId without the epoch
// would fence a newer instance if there were one. The aborted record is
// not read committed, and a new producer of the id commits.
func TestTransactionBumpRetryFencedAfterFailover(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newTxnEnv(t, 1, broker.Config{RTT: 5 * time.Millisecond})
		ctx := context.Background()
		p := e.producer()
		require.NoError(t, p.BeginTransaction())
		require.NoError(t, produceAll(p, "out", 0, "ok")()[0])
		e.c.InjectError("out", 1, kerr.InvalidRecord.Code, 1)
		require.ErrorIs(t, produceAll(p, "out", 1, "bad")()[0], kerr.InvalidRecord)
		e.c.FailOverBeforeAnswer(22, 1)
		err := p.AbortTransaction(ctx)
		require.ErrorIs(t, err, ErrProducerFenced)
		require.ErrorIs(t, err, kerr.ProducerFenced)
		st := e.c.TxnStats()
		require.Equal(t, int64(1), st.AnswerFailovers)
		require.Equal(t, int64(1), st.LoadFencedRetries, "the bump's retry was fenced by the coordinator that loaded the id")
		require.Zero(t, st.Fenced, "no transaction was fenced: no other producer")
		require.ErrorIs(t, p.BeginTransaction(), ErrProducerFenced)
		require.NoError(t, p.Close(ctx))

		q := e.producer()
		require.NoError(t, q.BeginTransaction())
		require.NoError(t, produceAll(q, "out", 0, "next")()[0])
		require.NoError(t, q.CommitTransaction(ctx))
		require.Equal(t, []string{"next"}, e.committed("out", 0))
	})
}

// TestTransactionCommitFailoverThenFenced: the coordinator applies the
// EndTxn(commit) and fails over before answering (NOT_COORDINATOR, as
// Kafka answers when its coordinator epoch changed during the write);
// before the producer's retry reaches the new coordinator another
// instance initializes the id, so the retry is PRODUCER_FENCED. The
// commit happened: CommitTransaction returns ErrCommitUnknown (wrapping
// ErrProducerFenced), not a plain fence that an application would take
// for a transaction that was not committed; the record is read
// committed. Without the new instance the retry is answered as a retry
// and the commit returns nil.
func TestTransactionCommitFailoverThenFenced(t *testing.T) {
	for _, tv := range []int16{1, 2} {
		for _, fenced := range []bool{false, true} {
			t.Run(fmt.Sprintf("tv%d/fenced=%v", tv, fenced), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					e := newTxnEnv(t, tv, broker.Config{RTT: 5 * time.Millisecond})
					ctx := context.Background()
					p := e.producer()
					require.NoError(t, p.BeginTransaction())
					require.NoError(t, produceAll(p, "out", 0, "a")()[0])
					e.c.FailOverBeforeAnswer(26, 1)
					if fenced {
						// The retries wait while the other instance
						// initializes.
						e.c.InjectCoordinatorError(26, kerr.CoordinatorLoadInProgress.Code, 50)
					}
					res := make(chan error, 1)
					go func() { res <- p.CommitTransaction(ctx) }()
					for e.c.TxnStats().AnswerFailovers == 0 {
						time.Sleep(time.Millisecond)
					}
					if fenced {
						e.rawInit()
						e.c.InjectCoordinatorError(26, 0, 0)
					}
					err := <-res
					require.Equal(t, []string{"a"}, e.committed("out", 0))
					if !fenced {
						require.NoError(t, err)
						return
					}
					require.ErrorIs(t, err, ErrCommitUnknown)
					require.ErrorIs(t, err, ErrProducerFenced)
					require.ErrorIs(t, p.BeginTransaction(), ErrProducerFenced)
				})
			})
		}
	}
}
