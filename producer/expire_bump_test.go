package producer

import (
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-kafka/longhaul/internal/broker"
)

// TestBumpAfterExpiryIsPrompt: a batch B whose every response is lost
// (the broker appends it, then never answers) is in flight when its
// delivery.timeout.ms runs out; it fails when that attempt's
// request.timeout.ms ends, and the epoch bump that its sequence gap needs
// must start then, in the pass that failed it, not at the sender's next
// wake-up for something else. (On Kafka through a proxy that cut each
// attempt, TestReadbackLinkFaultsOnKafka once waited 3 s for the bump:
// nothing else was due, so the sender slept until B's read-back deadline.)
//
//   - behind: with read-back off, a record D produced while B was being
//     retried waits behind B, and nothing more is produced. D must be sent
//     once B has failed and be acknowledged; with the bump left to the next
//     wake-up, the sender slept until D's own delivery deadline and failed
//     D there, never sent, though the broker answered again.
//
//   - readback: with read-back on, the test waits for the bump (Stats) and
//     only then produces C, whose acknowledgement under the bumped epoch is
//     B's fence. B must not have been called back by then, and must be
//     settled written; with the late bump it was seen only at B's
//     read-back deadline, when B was called back with ErrReadbackNoFence.
func TestBumpAfterExpiryIsPrompt(t *testing.T) {
	t.Run("behind", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			lastB := &lastAttemptHook{seq: 200} // warmUp's 200 records come first
			c, p, l := warmWindow20(t, 1, Linger(0), Hooks(lastB))
			lastB.c, lastB.deadline = c, p.cfg.deliveryTimeout
			bumps := p.Stats().EpochBumps
			c.DropProduceResponses(0, 1000)
			l.produce(p, 0, 1, 100) // B
			time.Sleep(p.cfg.deliveryTimeout / 2)
			l.produce(p, 0, 1, 100) // D, behind B
			require.True(t, l.waitAll(time.Minute), "callbacks")
			require.True(t, lastB.seen.Load(), "B's last attempt came back past its deadline")
			const b = 200
			require.True(t, IsFateUnknown(recordErr(t, l, 0, b)), "B: %v", recordErr(t, l, 0, b))
			require.NoError(t, recordErr(t, l, 0, b+1), "D, sent after the bump")
			require.Equal(t, bumps+1, p.Stats().EpochBumps)
			requireClean(t, c, "t", 1, l)
		})
	})
	t.Run("readback", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			h := &readbackHook{}
			lastB := &lastAttemptHook{seq: 200}
			c, p, l := warmWindow20(t, 1, Linger(0), ReadBack(true), Hooks(h, lastB))
			lastB.c, lastB.deadline = c, p.cfg.deliveryTimeout
			bumps := p.Stats().EpochBumps
			c.DropProduceResponses(0, 1000)
			l.produce(p, 0, 1, 100) // B
			for p.Stats().EpochBumps == bumps {
				time.Sleep(10 * time.Millisecond)
			}
			require.True(t, lastB.seen.Load(), "B's last attempt came back past its deadline")
			const b = 200
			l.mu.Lock()
			calls := l.res[recKey{l.name, 0, b}].calls
			l.mu.Unlock()
			require.Zero(t, calls, "B called back before its fence")
			l.produce(p, 0, 1, 100) // C
			require.True(t, l.waitAll(time.Minute), "callbacks")
			require.NoError(t, recordErr(t, l, 0, b), "B settled written")
			require.NoError(t, recordErr(t, l, 0, b+1))
			infos := h.all()
			require.Len(t, infos, 1)
			require.Equal(t, ReadbackWritten, infos[0].Outcome)
			readbackAt(t, c, infos[0])
			requireClean(t, c, "t", 1, l)
		})
	})
}

// lastAttemptHook ends the cluster's dropped responses once an attempt of
// the batch with base sequence seq comes back unanswered after the batch's
// delivery deadline: that was the batch's last attempt, and what is sent
// after it is answered.
type lastAttemptHook struct {
	seq      int32
	c        *broker.Cluster
	deadline time.Duration
	seen     atomic.Bool
}

func (h *lastAttemptHook) OnBatchRejected(b BatchInfo, _ error, _ bool) {
	if b.BaseSequence == h.seq && b.Age >= h.deadline && !h.seen.Swap(true) {
		h.c.DropProduceResponses(0, 0)
	}
}
