package producer

// Tests of the sentences of the transactional API's doc comments that no
// other test checked: each test names the doc it holds to its word.

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"

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

// TestTxnDocsTransactionalIDProperty: the transactional.id property row
// says what an empty value does: like the option's empty id, it is a
// *ConfigError, not a producer without transactions.
func TestTxnDocsTransactionalIDProperty(t *testing.T) {
	_, err := NewFromProperties(map[string]string{"bootstrap.servers": "127.0.0.1:9092", "transactional.id": ""})
	var ce *ConfigError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "transactional.id", ce.Property)
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
