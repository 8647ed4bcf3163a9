package producer

import (
	"maps"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/longhaul-kafka/longhaul/producer/internal/judge"
)

// Error matrices with the rule a fixed bug broke: the negative controls of
// the regression tests and the randomized mixed-fault test pass them to the
// sender (regressions.judge), and the test below to the matrix alone.

// oooProvesUnwrittenMatrix takes an OUT_OF_ORDER_SEQUENCE_NUMBER (or
// UNKNOWN_PRODUCER_ID) behind a refused batch as proof that a maybe-written
// batch is not in the log, so the bump renumbers it (chaos seeds 15697,
// 28603).
func oooProvesUnwrittenMatrix() *judge.Matrix {
	m := judge.Production
	m.Sequence = func(f judge.Facts, maybe bool) judge.Verdict {
		if f.EarlierUnacked && f.EarlierRefused {
			return judge.Verdict{Act: judge.ActRetry}
		}
		return judge.SequenceVerdict(f, maybe)
	}
	return &m
}

// notLeaderNotWrittenMatrix takes the leader errors a broker can answer
// after appending (NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION,
// KAFKA_STORAGE_ERROR) as "certainly not written": rows of the table
// changed.
func notLeaderNotWrittenMatrix() *judge.Matrix {
	m := judge.Production
	m.Codes = maps.Clone(judge.Production.Codes)
	for code, ci := range m.Codes {
		if ci.Class == judge.ClassLeader {
			ci.MayAppend = false
			m.Codes[code] = ci
		}
	}
	return &m
}

// orderLostLeadingOnlyMatrix fails as ErrOrderLost only the unwritten
// retries at the head of the partition's queue when a later batch is
// acked, and none as their own answer arrives.
func orderLostLeadingOnlyMatrix() *judge.Matrix {
	m := judge.Production
	m.OrderLost = func(f judge.OrderFacts) bool { return f.AtAck && f.Leading && judge.OrderLost(f) }
	return &m
}

// splitMaybeWrittenMatrix splits a batch waiting to be split even after a
// later attempt of it, sent whole, may have been written.
func splitMaybeWrittenMatrix() *judge.Matrix {
	m := judge.Production
	m.KeepSplit = func(f judge.Facts, _ judge.Verdict) bool { return f.SplitPending }
	return &m
}

// TestJudgeVariantsDiffer: each variant changes judge's answer exactly
// where its bug was, so the tests that pass it to the sender exercise the
// bug and not the production rule.
func TestJudgeVariantsDiffer(t *testing.T) {
	behindRefused := judge.Facts{EarlierUnacked: true, EarlierRefused: true, MaybeWritten: true, Resolving: true, Records: 3}
	oldest := judge.Facts{NewestSeq: true, Records: 3}
	afterAck := judge.Facts{LaterAcked: true, Records: 3}
	for _, tc := range []struct {
		name       string
		m          *judge.Matrix
		code       int16
		f          judge.Facts
		prod, want judge.Verdict
	}{
		{"ooo behind a refused batch proves unwritten", oooProvesUnwrittenMatrix(), kerr.OutOfOrderSequenceNumber.Code, behindRefused,
			judge.Verdict{Act: judge.ActFail, MaybeWritten: true, Bump: true}, judge.Verdict{Act: judge.ActRetry}},
		{"not leader is not written", notLeaderNotWrittenMatrix(), kerr.NotLeaderForPartition.Code, oldest,
			judge.Verdict{Act: judge.ActRetry, MaybeWritten: true, RefreshMetadata: true}, judge.Verdict{Act: judge.ActRetry, RefreshMetadata: true}},
		{"no order lost at a batch's own answer", orderLostLeadingOnlyMatrix(), kerr.NotEnoughReplicas.Code, afterAck,
			judge.Verdict{Act: judge.ActOrderLost}, judge.Verdict{Act: judge.ActRetry}},
		{"a maybe-written batch waiting to be split is split", splitMaybeWrittenMatrix(), judge.CodeLost, judge.Facts{SplitPending: true, Records: 3},
			judge.Verdict{Act: judge.ActRetry, MaybeWritten: true}, judge.Verdict{Act: judge.ActRetry, MaybeWritten: true, KeepSplit: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.prod, judge.Production.Judge(tc.code, tc.f))
			assert.Equal(t, tc.want, tc.m.Judge(tc.code, tc.f))
		})
	}
	// At an acknowledgement, production fails every older unwritten
	// retry; the variant only those at the head of the queue.
	behind := judge.OrderFacts{LaterAcked: true, AtAck: true}
	assert.True(t, judge.Production.OrderLost(behind))
	assert.False(t, orderLostLeadingOnlyMatrix().OrderLost(behind))
	behind.Leading = true
	assert.True(t, orderLostLeadingOnlyMatrix().OrderLost(behind))
	assert.False(t, judge.Production.OrderLost(judge.OrderFacts{LaterAcked: true, MaybeWritten: true, AtAck: true, Leading: true}), "a batch that may be in the log is resolved, not lost")
	assert.False(t, judge.Production.OrderLost(judge.OrderFacts{AtAck: true, Leading: true}), "a batch after the acked one")
	// At a bump, production fails a waiting batch older than an acked or
	// in-doubt one; the variant none.
	for _, f := range []judge.OrderFacts{{AtBump: true, LaterAcked: true}, {AtBump: true, LaterInDoubt: true, MaybeWritten: true}} {
		assert.True(t, judge.Production.OrderLost(f), "%+v", f)
		assert.False(t, orderLostLeadingOnlyMatrix().OrderLost(f), "%+v", f)
	}
	assert.False(t, judge.Production.OrderLost(judge.OrderFacts{AtBump: true}), "nothing later acked or in doubt")
}
