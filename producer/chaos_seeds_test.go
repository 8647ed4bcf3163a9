package producer

import (
	"os"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/require"
)

// Seeds of the randomized mixed-fault test above the 10,000 that CI runs,
// which failed in a scan (session 6), each for a client bug since fixed.
// They run on one thread (oneThread) with the producers' random choices
// seeded from the schedule: each fails in all of 20 runs with its bug
// brought back, and all but 23281 (two producers, whose records race
// their linger at one virtual instant) take one or two paths in 20 runs.
// Before (math/rand, map order, parallel threads) seed 28603 failed in 0
// to 5 of 20 runs and 48664 in 11 to 17, and most seeds took a new path
// nearly every run. Each still runs a few times.
//
// Seeds 10221 and 10223 (session 8, a scan of 10001-12000 with the bug
// brought back: 27 seeds failed) move a node while a producer's connection
// to it drains for its SASL renewal (chaosSchedule.moves): with
// movedRenewalContinues the connection to the new process continues the
// drained one, and a backlog of batches goes to it at the old window before
// it announced any (broker.Cluster.OverWindow). Each failed in 20 of 20 runs
// with the bug and passed 20 of 20 without, but takes a new path nearly
// every run: a move adds goroutines woken at one instant.
//
// Seed 59654 (a scan of 50001-60000 on one thread, session 8) found a
// client bug: nodes 1 and 2 moved while producer 0 was idle, node 0 slowed
// to a 72 ms round trip, and the producer listed node 0 twice among the
// addresses for its control connection (known brokers, then
// bootstrap.servers), so each of six entries got 166 ms of the 1 s dial
// budget, less than a SASL handshake's three round trips: no metadata for
// 9 s, records starved. Each address is now listed once
// (controlAddrs; TestControlDialTriesEachAddressOnce).
var scanSeeds = []struct {
	seed uint64
	knob func(*regressions) // brings its bug back, for the negative control
}{
	{15697, func(r *regressions) { r.oooProvesUnwritten = true }},
	{28603, func(r *regressions) { r.oooProvesUnwritten = true }},
	{48664, func(r *regressions) { r.splitMaybeWritten = true }},
	{17356, func(r *regressions) { r.renewalResets = true }},
	{23281, func(r *regressions) { r.renewalResets = true }},
	{40789, func(r *regressions) { r.renewalResets = true }},
	{58973, func(r *regressions) { r.oldTopicHints = true }},
	{150440, func(r *regressions) { r.recreateKeepsEpoch = true }},
	{10221, func(r *regressions) { r.movedRenewalContinues = true }},
	{10223, func(r *regressions) { r.movedRenewalContinues = true }},
	{59654, func(r *regressions) { r.controlAddrsRepeat = true }},
}

const scanSeedRuns = 5

// chaosBugs are the knobs a scan may bring back (LONGHAUL_CHAOS_BUG names
// one), to find seeds for scanSeeds: each knob of the table above.
var chaosBugs = map[string]func(*regressions){
	"oooProvesUnwritten":    func(r *regressions) { r.oooProvesUnwritten = true },
	"splitMaybeWritten":     func(r *regressions) { r.splitMaybeWritten = true },
	"renewalResets":         func(r *regressions) { r.renewalResets = true },
	"oldTopicHints":         func(r *regressions) { r.oldTopicHints = true },
	"recreateKeepsEpoch":    func(r *regressions) { r.recreateKeepsEpoch = true },
	"movedRenewalContinues": func(r *regressions) { r.movedRenewalContinues = true },
	"controlAddrsRepeat":    func(r *regressions) { r.controlAddrsRepeat = true },
}

// chaosBug returns the knob LONGHAUL_CHAOS_BUG names, nil for none; an
// unknown name fails t.
func chaosBug(t *testing.T) func(*regressions) {
	name := os.Getenv("LONGHAUL_CHAOS_BUG")
	if name == "" {
		return nil
	}
	k, ok := chaosBugs[name]
	require.True(t, ok, "LONGHAUL_CHAOS_BUG=%s: not one of chaosBugs", name)
	return k
}

// runSeed runs seed's schedule n times, with knob set when not nil, and
// returns the violations of every run that had some.
func runSeed(t *testing.T, seed uint64, knob func(*regressions), n int) [][]string {
	var failed [][]string
	for range n {
		s := drawSchedule(seed)
		if knob != nil {
			knob(&s.regress)
		}
		var v []string
		synctest.Test(t, func(t *testing.T) { v = runSchedule(t, s) })
		if len(v) > 0 {
			failed = append(failed, v)
		}
	}
	return failed
}

// TestChaosScanSeeds: the seeds the scan found pass, every run.
func TestChaosScanSeeds(t *testing.T) {
	oneThread(t)
	for _, sc := range scanSeeds {
		failed := runSeed(t, sc.seed, nil, scanSeedRuns)
		require.Empty(t, failed, "seed %d", sc.seed)
	}
}

// TestChaosScanSeedsNegativeControl: with its bug brought back, a seed
// fails in every one of its runs, so TestChaosScanSeeds fails whenever one
// of the bugs comes back, and a failing seed reruns as it failed.
func TestChaosScanSeedsNegativeControl(t *testing.T) {
	oneThread(t)
	for _, sc := range scanSeeds {
		failed := runSeed(t, sc.seed, sc.knob, scanSeedRuns)
		require.Len(t, failed, scanSeedRuns, "seed %d passed in some runs with its bug brought back", sc.seed)
		t.Logf("seed %d with its bug: %d of %d runs failed, e.g. %v", sc.seed, len(failed), scanSeedRuns, firstN(failed[0], 1))
	}
}

// TestChaosFindsMovedRenewal: with movedRenewalContinues brought back,
// the randomized test finds it within its first 1,000 schedules, as it
// finds the bugs of TestChaosFindsEachBug (seeds 1-2,000 hold 18 failing
// seeds, the first 51): the moves mid-renewal (chaosSchedule.moves) and
// the broker's OverWindow check reach the path.
func TestChaosFindsMovedRenewal(t *testing.T) {
	const limit = 1000
	for seed := uint64(1); seed <= limit; seed++ {
		s := drawSchedule(seed)
		s.regress.movedRenewalContinues = true
		var v []string
		synctest.Test(t, func(t *testing.T) { v = runSchedule(t, s) })
		if len(v) > 0 {
			t.Logf("found at seed %d: %v", seed, firstN(v, 1))
			require.Contains(t, v[0], "window: ", "the broker saw batches beyond the window")
			return
		}
	}
	t.Fatalf("movedRenewalContinues brought back, yet %d schedules found nothing", limit)
}
