package producer

// Tests of the sentences of the transactional API's doc comments that no
// other test checked: each test names the doc it holds to its word.

import (
	"context"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-kafka/longhaul/internal/broker"
)

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
