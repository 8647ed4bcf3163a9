package producer

import (
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/longhaul-kafka/longhaul/internal/broker"
)

// Regression tests of two safety failures the randomized mixed-fault test
// found above seed 10,000: a batch that may be in the log was written again
// (chaos seeds 15697, 28603), and records in the log were reported as
// ErrOrderLost, not written (chaos seed 48664).

// produceEach sends one record per batch to part: each record is its own
// batch, sent before the next is produced (linger 0; the sleep lets the
// sender's pass run).
func produceEach(l *ledger, p *Producer, part int32, n int) {
	for range n {
		l.produce(p, part, 1, 100)
		time.Sleep(time.Millisecond)
	}
}

// recordErr is the callback error of record seq of partition part.
func recordErr(t *testing.T, l *ledger, part int32, seq int) error {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	r, ok := l.res[recKey{l.name, part, seq}]
	require.True(t, ok, "record %d", seq)
	require.Equal(t, 1, r.calls, "record %d: one callback", seq)
	return r.err
}

// Chaos seed 28603: the broker expired our state (KIP-854) during a pause
// shorter than longhaul.idle.rearm.ms, so a burst goes out with the gate
// open. Batch 2 is refused (NOT_ENOUGH_REPLICAS), batch 3 is appended past
// its gap (the broker has no state: the trap of KAFKA-15591) and answered
// NOT_ENOUGH_REPLICAS_AFTER_APPEND, batches 1 and 4 fail for good, so the
// epoch is bumped. While the bump resolves batch 3 under the old epoch, the
// broker answers OUT_OF_ORDER_SEQUENCE_NUMBER. That answer behind the
// refused batch 2 once counted as proof that batch 3 was not written: it was
// renumbered and written a second time, after batch 2. Batch 3 must fail,
// fate unknown, batch 2 as ErrOrderLost, and nothing be duplicated.
func TestMixedFaultOutOfOrderPastGapFailsFateUnknown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, p, l := warmWindow20(t, 1, Linger(0))
		c.ExpireProducerIDs()
		c.ScriptAnswers("t", 0,
			broker.Answer{Code: kerr.UnsupportedVersion.Code},
			broker.Answer{Code: kerr.NotEnoughReplicas.Code},
			broker.Answer{Code: kerr.NotEnoughReplicasAfterAppend.Code, Mode: broker.AppendThenFail},
			broker.Answer{Code: kerr.InvalidTxnState.Code},
			broker.Answer{Code: kerr.OutOfOrderSequenceNumber.Code})
		produceEach(l, p, 0, 4)
		require.True(t, l.waitAll(time.Minute), "callbacks")
		require.Zero(t, c.PendingAnswers("t", 0), "every scripted answer used (the last by batch 3's resend)")
		requireClean(t, c, "t", 1, l)

		const first = 200 // warmUp's records come first
		var de *DeliveryError
		err := recordErr(t, l, 0, first+2)
		require.True(t, errors.As(err, &de), "batch 3 fails: %v", err)
		require.True(t, de.FateUnknown, "batch 3 may be in the log: %v", err)
		require.ErrorIs(t, recordErr(t, l, 0, first+1), ErrOrderLost, "batch 2 cannot be written after batch 3")

		// The producer goes on, under the new epoch.
		l.produce(p, 0, 20, 100)
		require.True(t, l.waitAll(time.Minute), "callbacks after the bump")
		for seq := first + 4; seq < first+24; seq++ {
			require.NoError(t, recordErr(t, l, 0, seq))
		}
		requireClean(t, c, "t", 1, l)
	})
}

// Chaos seed 48664: batch X, refused as too large, waits to be split; it
// goes out whole behind an earlier retry (A2: only the oldest retry is
// split, and the drain sends A1 alone), and that attempt is appended and
// answered REQUEST_TIMED_OUT (maybe written). Split then, its halves carry
// sub-ranges of X's sequences, which the broker cannot recognise as
// duplicates: the first was refused as out of order and, a later batch
// being acked, failed as ErrOrderLost ("not written") while its records were
// in the log. A batch that may be in the log is never split: sent whole
// again, it is acked as a duplicate.
func TestMixedFaultMaybeWrittenBatchNotSplit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, p, l := warmWindow20(t, 1, Linger(5*time.Millisecond))
		c.ScriptAnswers("t", 0,
			broker.Answer{Code: kerr.NotEnoughReplicas.Code},                            // A1
			broker.Answer{Code: kerr.NotEnoughReplicas.Code},                            // A2
			broker.Answer{Code: kerr.MessageTooLarge.Code},                              // X: to be split
			broker.Answer{Mode: broker.Normal},                                          // Y: out of order (A1's gap)
			broker.Answer{Mode: broker.Normal},                                          // A1 again, alone: written
			broker.Answer{Mode: broker.Normal},                                          // A2 again: written
			broker.Answer{Code: kerr.RequestTimedOut.Code, Mode: broker.AppendThenFail}, // X whole, behind A2: written, in doubt
			broker.Answer{Mode: broker.Normal})                                          // Y again: written
		for _, recs := range []int{1, 1, 2, 1} { // A1, A2, X (two records, one linger), Y
			l.produce(p, 0, recs, 100)
			time.Sleep(6 * time.Millisecond)
		}
		require.True(t, l.waitAll(time.Minute), "callbacks")
		require.Zero(t, c.PendingAnswers("t", 0), "every scripted answer used")
		require.Empty(t, l.failures(), "X is acked as a duplicate of its written attempt")
		requireClean(t, c, "t", 1, l)
	})
}
