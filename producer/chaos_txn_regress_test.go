//go:build longhaul_regress

package producer

import (
	"testing"
	"testing/synctest"
)

// TestChaosTxnFindsEachBug: the randomized transactional test, without
// knowing the scenarios, finds each transactional bug brought back
// within a few hundred schedules: EndTxn sent before every batch of the
// transaction is answered (txnEndEarly), the idempotent recovery (an
// epoch bump, renumbering, a rewind) run inside a transaction
// (txnRecovers), a commit after a failed record (txnCommitAfterFailed),
// the first-batch gate not re-armed at the transaction version 2
// epoch bump on a Kafka 4.0-like cluster (txnGateNeverRearmed; its
// schedules all run there), an abort-only transaction that goes on
// sending its retries and split halves (txnSendsAbortOnly: ctWire sees
// a Produce request written after the moment), and Produce above v11
// inside a version 1 transaction (txnTV1Uncapped; its schedules all run
// version 1 on Kafka 4.4-like nodes: ctWire sees the version).
// TestChaosTransactions passes the same schedules without them.
func TestChaosTxnFindsEachBug(t *testing.T) {
	needRegress(t)
	const limit = 2000
	for _, tc := range []struct {
		name string
		k    knob
		prep func(*ctSchedule)
	}{
		{"txnEndEarly", txnEndEarly, nil},
		{"txnRecovers", txnRecovers, nil},
		{"txnCommitAfterFailed", txnCommitAfterFailed, nil},
		{"txnGateNeverRearmed", txnGateNeverRearmed, func(s *ctSchedule) { s.tv, s.kafka40 = 2, true }},
		{"txnSendsAbortOnly", txnSendsAbortOnly, nil},
		{"txnTV1Uncapped", txnTV1Uncapped, func(s *ctSchedule) { s.tv, s.kafka40, s.kafka24 = 1, false, false }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			for seed := uint64(1); seed <= limit; seed++ {
				s := drawTxnSchedule(seed)
				if tc.prep != nil {
					tc.prep(s)
				}
				s.regress.set(tc.k)
				var v []string
				synctest.Test(t, func(t *testing.T) { v, _ = runTxnSchedule(t, s) })
				if len(v) > 0 {
					t.Logf("%s found at seed %d: %v", tc.name, seed, firstN(v, 3))
					return
				}
			}
			t.Fatalf("%s brought back, yet %d schedules found nothing", tc.name, limit)
		})
	}
}
