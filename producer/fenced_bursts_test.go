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

// The randomized mixed-fault test (chaos_test.go) draws its refusals from
// codes that leave the producer's identity alone. fencedVocabulary adds
// what makes the producer take a new producer id (INVALID_PRODUCER_EPOCH,
// PRODUCER_FENCED, INVALID_PRODUCER_ID_MAPPING) or bump its epoch
// (OUT_OF_ORDER_SEQUENCE_NUMBER, UNKNOWN_PRODUCER_ID), and the
// transactional codes an idempotent producer may still be answered, mixed
// with answers after an append and lost responses.
var fencedVocabulary = []broker.Answer{
	{Mode: broker.Normal},
	{Mode: broker.Normal},
	{Code: kerr.InvalidProducerEpoch.Code, Mode: broker.Refuse},
	{Code: kerr.ProducerFenced.Code, Mode: broker.Refuse},
	{Code: kerr.InvalidProducerIDMapping.Code, Mode: broker.Refuse},
	{Code: kerr.OutOfOrderSequenceNumber.Code, Mode: broker.Refuse},
	{Code: kerr.UnknownProducerID.Code, Mode: broker.Refuse},
	{Code: kerr.TransactionAbortable.Code, Mode: broker.Refuse},
	{Code: kerr.ConcurrentTransactions.Code, Mode: broker.Refuse},
	{Code: kerr.NotEnoughReplicas.Code, Mode: broker.Refuse},
	{Code: kerr.RequestTimedOut.Code, Mode: broker.AppendThenFail},
	{Code: kerr.NotLeaderForPartition.Code, Mode: broker.AppendThenFail},
	{Code: kerr.NotEnoughReplicasAfterAppend.Code, Mode: broker.AppendThenFail},
}

// fencedBurstsRun runs one schedule: three partitions, each scripted with
// a burst of answers drawn from fencedVocabulary, some responses lost, 30
// records per partition in small batches. It returns checkOutcome's
// violations, and the schedule for the failure message.
func fencedBurstsRun(t *testing.T, seed uint64, opts ...Opt) (violations []string, schedule string, newIDs int64) {
	synctest.Test(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(seed, 0x6f656e63))
		const parts = 3
		c, n := memCluster(t, broker.Config{RTT: 5 * time.Millisecond, Topics: []broker.TopicConfig{{Name: "t", Partitions: parts, Window: 10}}})
		var sched strings.Builder
		for part := range int32(parts) {
			answers := make([]broker.Answer, 2+rng.IntN(8))
			for i := range answers {
				answers[i] = fencedVocabulary[rng.IntN(len(fencedVocabulary))]
			}
			c.ScriptAnswers("t", part, answers...)
			fmt.Fprintf(&sched, "p%d %v; ", part, answers)
		}
		if drops := rng.IntN(3); drops > 0 {
			c.DropProduceResponses(0, drops)
			fmt.Fprintf(&sched, "drop %d", drops)
		}
		schedule = sched.String()
		p := memProducer(t, c, n, append([]Opt{BatchSize(200), DeliveryTimeout(30 * time.Second)}, opts...)...)
		l := newLedger("f", "t")
		for round := range 3 {
			for part := range int32(parts) {
				l.produce(p, part, 10, 20)
			}
			time.Sleep(time.Duration(round) * 3 * time.Millisecond)
		}
		if !l.waitAll(2 * time.Minute) {
			violations = append(violations, "not every record was called back")
			return
		}
		violations = checkOutcome(collectOutcome(c, "t", parts, l))
		newIDs, _ = c.InitProducerIDRequests()
	})
	return violations, schedule, newIDs
}

// TestFencedAnswersInBursts: exactly once and in order per partition,
// every record called back once in produce order, through bursts of
// fenced, sequence, transactional and after-append answers with lost
// responses, over many random schedules.
func TestFencedAnswersInBursts(t *testing.T) {
	schedules := 300
	if testing.Short() || raceEnabled {
		schedules = 60
	}
	schedules = envInt("LONGHAUL_FENCED_SCHEDULES", schedules) // a longer scan
	renewed := 0
	for seed := range uint64(schedules) {
		v, sched, ids := fencedBurstsRun(t, seed+1)
		require.Empty(t, v, "seed %d: %s", seed+1, sched)
		if ids > 1 {
			renewed++
		}
	}
	t.Logf("%d schedules, %d took a new producer id", schedules, renewed)
	require.Greater(t, renewed, schedules/4, "coverage: schedules that took a new producer id")
}

// TestFencedAnswersInBurstsNegativeControl: with a NOT_LEADER_OR_FOLLOWER
// after an append taken as "not written" (regress.notLeaderNotWritten),
// the schedules find the batch written twice: renumbered under the new
// producer id or epoch a fenced or sequence answer brought, it is not
// matched as a duplicate of the copy already in the log. (A fenced answer
// retrying a maybe-written batch instead of failing it is not caught, and
// is not a bug of its own: before any bump the producer resends such a
// batch under the old identity to learn its fate, sender.resolving, and
// the broker answers DUPLICATE_SEQUENCE_NUMBER.)
func TestFencedAnswersInBurstsNegativeControl(t *testing.T) {
	bad := 0
	for seed := range uint64(300) {
		v, _, _ := fencedBurstsRun(t, seed+1, optFunc(func(c *config) error { c.regress.notLeaderNotWritten = true; return nil }))
		if len(v) > 0 {
			bad++
			if bad == 1 {
				t.Logf("seed %d: %v", seed+1, firstN(v, 3))
			}
		}
	}
	require.Positive(t, bad, "no schedule caught the bug")
	t.Logf("%d of 300 schedules caught it", bad)
}
