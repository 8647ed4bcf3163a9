package producer

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-kafka/longhaul/internal/broker"
)

// TestPurgeMakesTransactionAbortOnly: records of an open transaction that
// Purge fails (in a lingering batch, or waiting for an unknown topic's
// partitions) make the transaction abort-only: CommitTransaction fails
// with ErrTransactionAbortable, AbortTransaction succeeds, and the next
// transaction commits; nothing of the purged one is committed.
func TestPurgeMakesTransactionAbortOnly(t *testing.T) {
	for _, where := range []string{"batch", "waiting"} {
		t.Run(where, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newTxnEnv(t, 2, broker.Config{})
				p := e.producer(Linger(10*time.Second), DeliveryTimeout(time.Hour))
				ctx := context.Background()
				require.NoError(t, p.InitTransactions(ctx))
				require.NoError(t, p.BeginTransaction())
				var wait func() []error
				if where == "batch" {
					wait = produceAll(p, "out", 0, "p1", "p2")
				} else {
					wait = produceAll(p, "missing", 0, "p1")
					time.Sleep(time.Second) // the topic is unknown: the record waits
				}
				synctest.Wait()
				require.NoError(t, p.Purge(ctx))
				for _, err := range wait() {
					require.ErrorIs(t, err, ErrPurged)
				}
				require.ErrorIs(t, p.CommitTransaction(ctx), ErrTransactionAbortable, "a purged transaction cannot commit")
				require.NoError(t, p.AbortTransaction(ctx))

				require.NoError(t, p.BeginTransaction())
				w := produceAll(p, "out", 0, "n1")
				require.NoError(t, p.CommitTransaction(ctx))
				require.Equal(t, []error{nil}, w())
				require.Equal(t, []string{"n1"}, e.committed("out", 0))
			})
		})
	}
}
