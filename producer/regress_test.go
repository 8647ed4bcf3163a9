package producer

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-kafka/longhaul/producer/internal/judge"
)

// The negative controls of issue 12: each of its seven bugs, brought back by
// a knob (regress.go), must make its regression test fail, and the
// randomized mixed-fault test must find the ones it covers.

// needRegress skips a negative control outside the longhaul_regress build,
// where no bug can be brought back (regress.go).
func needRegress(t testing.TB) {
	t.Helper()
	if !regressBuild {
		t.Skip("negative control: needs -tags longhaul_regress")
	}
}

// bug is an Opt bringing back k when on, and no change otherwise. A
// negative control calls needRegress at its top level first: a skip inside
// a synctest bubble ends only the bubble, and the test would go on to
// assert on a run that did not happen.
func bug(t testing.TB, k knob, on bool) Opt {
	t.Helper()
	if !on {
		return optFunc(func(*config) error { return nil })
	}
	if !regressBuild {
		t.Fatalf("knob %d set outside the longhaul_regress build: the test must call needRegress first", k)
	}
	return optFunc(func(c *config) error { c.regress.set(k); return nil })
}

// matrixBug is an Opt making the sender apply m, an error matrix with a
// fixed bug's row or rule (judge_variants_test.go); like bug, only in the
// longhaul_regress build.
func matrixBug(t testing.TB, m *judge.Matrix) Opt {
	t.Helper()
	if !regressBuild {
		t.Fatal("an error matrix variant set outside the longhaul_regress build: the test must call needRegress first")
	}
	return optFunc(func(c *config) error { c.regress.setJudge(m); return nil })
}

// fixedWindow is an Opt making the limiter ignore learned windows and the
// first-batch gate and use n as every partition's limit (a negative
// control: unsafe above the broker's window).
func fixedWindow(t testing.TB, n int) Opt {
	t.Helper()
	if !regressBuild {
		t.Fatal("fixed window set outside the longhaul_regress build: the test must call needRegress first")
	}
	return optFunc(func(c *config) error { c.regress.setFixedWindow(n); return nil })
}

// regressEnv names the knob a child test process turns on.
const regressEnv = "LONGHAUL_REGRESS"

var regressKnobs = map[string]struct {
	set  func(*regressions)
	test string // the regression test that must catch it
	// chaos reports whether the randomized test's vocabulary covers it
	// (bad metadata and Flush are not drawn in schedules).
	chaos bool
}{
	"orderLostLeadingOnly": {func(r *regressions) { r.setJudge(orderLostLeadingOnlyMatrix()) }, "TestMixedFaultExpiredStateTimeoutThenNotEnoughReplicasKeepsOrder", true},
	"resolveOldestRetry":   {func(r *regressions) { r.set(resolveOldestRetry) }, "TestMixedFaultStalledBumpDoesNotBlockOtherPartitions", true},
	"bumpOnOldBrokers":     {func(r *regressions) { r.set(bumpOnOldBrokers) }, "TestMixedFaultPreKIP360BrokerTakesNewProducerID", true},
	"notLeaderNotWritten":  {func(r *regressions) { r.setJudge(notLeaderNotWrittenMatrix()) }, "TestMixedFaultAppendedThenNotLeaderNotDuplicatedByBump", true},
	"callbacksUnordered":   {func(r *regressions) { r.set(callbacksUnordered) }, "TestMixedFaultCallbacksInOrderAfterLostResponse", true},
	"flushWaitsAll":        {func(r *regressions) { r.set(flushWaitsAll) }, "TestMixedFaultFlushUnderSteadyLoadReturns", false},
	"metadataUnchecked":    {func(r *regressions) { r.set(metadataUnchecked) }, "TestMixedFaultBadMetadataNeverPanics", false},
	// Above seed 10,000 (chaos seeds 15697, 28603; 48664): seen a few
	// times in 60,000 schedules, so the 3,000 of TestChaosFindsEachBug
	// would not find them.
	"oooProvesUnwritten": {func(r *regressions) { r.setJudge(oooProvesUnwrittenMatrix()) }, "TestMixedFaultOutOfOrderPastGapFailsFateUnknown", false},
	"splitMaybeWritten":  {func(r *regressions) { r.setJudge(splitMaybeWrittenMatrix()) }, "TestMixedFaultMaybeWrittenBatchNotSplit", false},
	// A broker (or proxy) bug Kafka does not have; not in the chaos
	// vocabulary.
	"sameIdentityTaken":    {func(r *regressions) { r.set(sameIdentityTaken) }, "TestInitProducerIDSameIdentityIsNotTaken", false},
	"emptyPartitionsTaken": {func(r *regressions) { r.set(emptyPartitionsTaken) }, "TestMetadataWithoutPartitionsKeepsWhatWasKnown", false},
	// Hooks calling the waiting methods; not in the chaos vocabulary.
	"hookWaitUndetected": {func(r *regressions) { r.set(hookWaitUndetected) }, "TestWaitingCallsFromAHook", false},
}

// regressFromEnv is the knob a parent test asked this process for.
func regressFromEnv() regressions {
	var r regressions
	if k, ok := regressKnobs[os.Getenv(regressEnv)]; ok {
		k.set(&r)
	}
	return r
}

// TestRegressionTestsCatchEachBug runs each regression test in a child
// process with its bug brought back, and requires it to fail; the same test
// passes in this process's run of the suite.
func TestRegressionTestsCatchEachBug(t *testing.T) {
	if os.Getenv(regressEnv) != "" {
		t.Skip("in a child process")
	}
	needRegress(t)
	for name, k := range regressKnobs {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^"+k.test+"$", "-test.count=1", "-test.timeout=2m")
			cmd.Env = append(os.Environ(), regressEnv+"="+name)
			out, err := cmd.CombinedOutput()
			require.Error(t, err, "%s still passes with %s brought back:\n%s", k.test, name, tail(out))
			require.Contains(t, string(out), "FAIL", "%s must fail, not crash the harness:\n%s", k.test, tail(out))
		})
	}
}

// TestChaosFindsEachBug: the randomized mixed-fault test, without knowing
// the scenarios, finds each bug its vocabulary covers within a few hundred
// schedules.
func TestChaosFindsEachBug(t *testing.T) {
	if os.Getenv(regressEnv) != "" {
		t.Skip("in a child process")
	}
	needRegress(t)
	const limit = 3000 // each bug shows up about once in 200 schedules or more often
	for name, k := range regressKnobs {
		if !k.chaos {
			continue
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			for seed := uint64(1); seed <= limit; seed++ {
				s := drawSchedule(seed)
				k.set(&s.regress)
				var v []string
				synctest.Test(t, func(t *testing.T) { v = runSchedule(t, s) })
				if len(v) > 0 {
					t.Logf("%s found at seed %d: %v", name, seed, firstN(v, 2))
					return
				}
			}
			t.Fatalf("%s brought back, yet %d schedules found nothing", name, uint64(limit))
		})
	}
}

func tail(b []byte) string {
	s := string(b)
	if i := len(s) - 3000; i > 0 {
		s = "..." + s[i:]
	}
	return strings.TrimSpace(s)
}
