package producer

import (
	"maps"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/require"
)

// TestIdleRearmOffFailsOrderLostNotReorders checks IdleRearm's "0 turns
// the idle re-arm off. With it off or too long, a broker that lost the
// state makes the producer fail batches with ErrOrderLost rather than
// reorder them": the scenario of TestIdlePartitionReArmsGate (idle past
// 1 s, state expired at the broker, the first batch after the pause
// refused unwritten) with IdleRearm(0) and with 1 hour. The burst goes
// out unguarded, the broker takes later batches first, and the refused
// records fail with ErrOrderLost, not in the log (ErrOrderLost's doc),
// while the log holds every acknowledged record once, in order. With
// the default 1 s of the scenario none fails (TestIdlePartitionReArmsGate):
// the setting, not the scenario, makes the difference.
func TestIdleRearmOffFailsOrderLostNotReorders(t *testing.T) {
	for _, rearm := range []Opt{IdleRearm(0), Property("longhaul.idle.rearm.ms", "3600000")} {
		synctest.Test(t, func(t *testing.T) {
			tr, c := idleExpiryScenario(t, rearm)
			orderLost := 0
			tr.mu.Lock()
			failed := maps.Clone(tr.failed)
			tr.mu.Unlock()
			for key, err := range failed {
				require.ErrorIs(t, err, ErrOrderLost, "record %s", key)
				require.False(t, IsFateUnknown(err), "record %s: ErrOrderLost records are not in the log", key)
				orderLost++
			}
			require.Positive(t, orderLost, "re-arm off: the refused batch fails with ErrOrderLost")
			lc := tr.checkLog(c, "t", 0)
			require.True(t, lc.ok(), "lost=%d dup=%d reorder=%d: %v", lc.lost, lc.dup, lc.reorder, first(lc.problems, 5))
			// Failed records are not in the log: checkLog allows them
			// once, so count them apart.
			inLog := map[string]bool{}
			for _, r := range c.Records("t", 0) {
				inLog["t:"+string(r.Value[:24])] = true
			}
			for key := range failed {
				require.False(t, inLog[key], "record %s failed with ErrOrderLost but is in the log", key)
			}
		})
	}
}
