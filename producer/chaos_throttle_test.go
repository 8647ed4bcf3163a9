package producer

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/longhaul-kafka/longhaul/internal/broker"
)

// chaosQuotaStream and chaosHintStream seed the streams throttles draws
// from. The constants are ones under which no seed of scanSeeds draws a
// quota or a hint (TestChaosScanSeedsDrawNoThrottle), so those seeds keep
// the schedules they failed with.
const (
	chaosQuotaStream = 0x1a219
	chaosHintStream  = 0x1a951
)

// throttles draws, from their own streams, in one schedule in four a
// node enforcing a produce quota for a while (broker.Cluster.SetProduceQuota:
// Kafka's throttle, KIP-219: the answer names a throttle time and the
// connection is then muted for it), and in one in four scripted
// NOT_LEADER_OR_FOLLOWER answers whose KIP-951 hint names a node the
// cluster does not have, at a higher epoch, or a real node at a stale
// epoch. The broker counts requests sent into a muted connection
// (MutedSends, checked by runScheduleCovered); a hint taken to a node
// without an address strands the partition, which the liveness checks
// see.
func (s *chaosSchedule) throttles(qs, hs *rand.Rand, add func(time.Duration, string, func(*broker.Cluster, *chaosRun))) {
	if qs.IntN(4) == 0 {
		for range 1 + qs.IntN(2) {
			t, nd := time.Duration(qs.Int64N(int64(chaosSpan))), qs.Int32N(chaosNodes)
			rate := int64([]int{8, 16, 32}[qs.IntN(3)]) << 10
			d := 200*time.Millisecond + time.Duration(qs.Int64N(int64(1300*time.Millisecond)))
			s.lostTime += d + chaosReqTimeout // throughput held to the quota, and the last throttle
			s.quotas++
			add(t, fmt.Sprintf("node %d enforces a produce quota of %d KiB/s for %v", nd, rate>>10, d), func(c *broker.Cluster, _ *chaosRun) {
				c.SetProduceQuota(nd, rate)
			})
			add(t+d, fmt.Sprintf("node %d quota off", nd), func(c *broker.Cluster, _ *chaosRun) { c.SetProduceQuota(nd, 0) })
		}
	}
	if hs.IntN(4) == 0 {
		nl := kerr.NotLeaderForPartition.Code
		for range 1 + hs.IntN(2) {
			t, p := time.Duration(hs.Int64N(int64(chaosSpan))), hs.Int32N(chaosParts)
			var answers []broker.Answer
			var names []string
			for range 1 + hs.IntN(3) {
				if hs.IntN(2) == 0 {
					answers = append(answers, broker.Answer{Code: nl, Hint: &broker.LeaderHint{Leader: 9, Epoch: 1 << 20}})
					names = append(names, "NOT_LEADER hinting node 9 (no address) at epoch 2^20")
					continue
				}
				nd := hs.Int32N(chaosNodes)
				answers = append(answers, broker.Answer{Code: nl, Hint: &broker.LeaderHint{Leader: nd, Epoch: 0}})
				names = append(names, fmt.Sprintf("NOT_LEADER hinting node %d at epoch 0 (stale or current)", nd))
			}
			s.hints++
			add(t, fmt.Sprintf("partition %d answers %s", p, strings.Join(names, ", ")), func(c *broker.Cluster, _ *chaosRun) {
				c.ScriptAnswers(chaosTopic, p, answers...)
			})
		}
	}
}

// mutedSendViolations is the check of a schedule's throttles: no request
// sent into a connection its broker muted for a throttle it had answered.
func mutedSendViolations(c *broker.Cluster) []string {
	if n, first := c.MutedSends(); n > 0 {
		return []string{fmt.Sprintf("throttle: %d requests sent into a connection muted for a throttle (KIP-219), e.g. %v", n, firstN(first, 2))}
	}
	return nil
}

// TestChaosScanSeedsDrawNoThrottle: the seeds of scanSeeds draw no quota
// and no hint (chaosQuotaStream, chaosHintStream), so they run the
// schedules they were found with.
func TestChaosScanSeedsDrawNoThrottle(t *testing.T) {
	for _, sc := range scanSeeds {
		s := drawSchedule(sc.seed)
		require.Zero(t, s.quotas+s.hints, "seed %d draws a quota or a hint", sc.seed)
	}
}

// chaosFinds runs the first limit schedules that draw what want says,
// with knob set, and returns the first violations found.
func chaosFinds(t *testing.T, limit uint64, want func(*chaosSchedule) bool, knob knob) (uint64, []string) {
	for seed := uint64(1); seed <= limit; seed++ {
		s := drawSchedule(seed)
		if !want(s) {
			continue
		}
		s.regress.set(knob)
		var v []string
		synctest.Test(t, func(t *testing.T) { v = runSchedule(t, s) })
		if len(v) > 0 {
			return seed, v
		}
	}
	return 0, nil
}

// TestChaosFindsThrottleIgnored: with throttleIgnored brought back (a
// throttled answer holds nothing), the randomized test finds it within
// its first 300 schedules: the quotas of chaosSchedule.throttles mute
// connections, and the broker sees requests sent into them.
func TestChaosFindsThrottleIgnored(t *testing.T) {
	needRegress(t)
	seed, v := chaosFinds(t, 300, func(s *chaosSchedule) bool { return s.quotas > 0 }, throttleIgnored)
	require.NotEmpty(t, v, "throttleIgnored brought back, yet no schedule found it")
	t.Logf("found at seed %d: %v", seed, firstN(v, 2))
	require.Contains(t, strings.Join(v, "\n"), "throttle: ")
}

// TestChaosFindsUnreachableHint: with hintUnreachable brought back (a
// hint naming a node without an address is taken, and its epoch makes the
// metadata naming the real leader stale), the randomized test finds it
// within its first 300 schedules: the partition is stranded, and its
// records fail though the faults ended (liveness).
func TestChaosFindsUnreachableHint(t *testing.T) {
	needRegress(t)
	seed, v := chaosFinds(t, 300, func(s *chaosSchedule) bool { return s.hints > 0 }, hintUnreachable)
	require.NotEmpty(t, v, "hintUnreachable brought back, yet no schedule found it")
	t.Logf("found at seed %d: %v", seed, firstN(v, 2))
	require.Contains(t, strings.Join(v, "\n"), "liveness: ")
}
