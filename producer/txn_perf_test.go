package producer

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-kafka/longhaul/internal/broker"
)

// TestTransactionCommitRoundTrips: a version 2 commit costs the round
// trips it must and no more, on virtual time. Each transaction puts three
// one-record batches on each of two partitions, lingering (linger.ms ten
// seconds) when CommitTransaction is called: the commit sends them at once
// (no linger), all three together (no gate re-armed at the bump on a
// Produce v13+ leader, Kafka 4.1 and later), and sends EndTxn the moment
// the last one is answered: one round trip for the batches, one for
// EndTxn. Every transaction against leaders capped at Produce v12 (Kafka
// 4.0) pays one more, since there the bump re-arms the gate: the first
// batch alone, then the other two. (The first transaction also fetches
// the topic's metadata and connects to the leader: not measured.)
func TestTransactionCommitRoundTrips(t *testing.T) {
	const rtt = 50 * time.Millisecond
	for _, tc := range []struct {
		name       string
		produceCap map[int32]int16
		others     time.Duration
	}{
		{"kafka4.1+", nil, 2 * rtt},
		{"kafka4.0", map[int32]int16{0: broker.Kafka40ProduceMaxVersion}, 3 * rtt},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newTxnEnv(t, 2, broker.Config{Nodes: 1, RTT: rtt, ProduceMaxVersions: tc.produceCap})
				e.c.SetLenientTransactionStart(tc.produceCap != nil)
				ctx := context.Background()
				p := e.producer(Linger(10*time.Second), BatchSize(1024))
				require.NoError(t, p.InitTransactions(ctx))
				value := strings.Repeat("x", 600) // one record per batch
				for txn := range 4 {
					require.NoError(t, p.BeginTransaction())
					var waits []func() []error
					for part := range int32(2) {
						waits = append(waits, produceAll(p, "out", part, value, value, value))
					}
					synctest.Wait()
					began := time.Now()
					require.NoError(t, p.CommitTransaction(ctx))
					took := time.Since(began)
					for _, w := range waits {
						for _, err := range w() {
							require.NoError(t, err)
						}
					}
					if txn == 0 {
						continue // the topic's metadata and the leader's connection first
					}
					want := tc.others
					require.Equal(t, want, took.Truncate(rtt), "transaction %d: CommitTransaction took %v", txn, took)
					require.Less(t, took-want, rtt/10, "transaction %d: CommitTransaction took %v", txn, took)
				}
				require.Len(t, e.committed("out", 0), 12)
				require.Len(t, e.committed("out", 1), 12)
			})
		})
	}
}

// TestTransactionProduceDuringCommitRefused: from CommitTransaction's call
// until the next BeginTransaction, Produce is refused with
// ErrTransactionState (the Java producer refuses a send during a commit
// too): a record produced while the commit waits for its batches belongs
// to no transaction. The next transaction takes records again.
func TestTransactionProduceDuringCommitRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newTxnEnv(t, 2, broker.Config{Nodes: 1, RTT: 50 * time.Millisecond})
		ctx := context.Background()
		p := e.producer()
		require.NoError(t, p.BeginTransaction())
		wait := produceAll(p, "out", 0, "a")
		committed := make(chan error, 1)
		go func() { committed <- p.CommitTransaction(ctx) }()
		synctest.Wait() // the commit waits for "a"'s answer
		require.Empty(t, committed)
		require.ErrorIs(t, produceAll(p, "out", 0, "during")()[0], ErrTransactionState)
		require.NoError(t, <-committed)
		require.NoError(t, wait()[0])
		require.ErrorIs(t, produceAll(p, "out", 0, "after")()[0], ErrTransactionState, "after the commit, before Begin")
		require.NoError(t, p.BeginTransaction())
		require.NoError(t, produceAll(p, "out", 0, "next")()[0])
		require.NoError(t, p.CommitTransaction(ctx))
		require.Equal(t, []string{"a", "next"}, e.committed("out", 0))
	})
}
