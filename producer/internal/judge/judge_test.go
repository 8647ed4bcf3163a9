package judge

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
)

// TestJudge is the error matrix as named cases: what each answer means for a
// batch, given what the sender knows of it (issue 12).
func TestJudge(t *testing.T) {
	oldest := Facts{NewestSeq: true, Records: 3}
	behindGap := Facts{EarlierUnacked: true, Records: 3}
	behindRefused := Facts{EarlierUnacked: true, EarlierRefused: true, MaybeWritten: true, Records: 3}
	resolvingBehindRefused := behindRefused
	resolvingBehindRefused.Resolving = true
	behindRefusedUnwritten := Facts{EarlierUnacked: true, EarlierRefused: true, Records: 3}
	maybe := Facts{MaybeWritten: true, Records: 3}
	middle := Facts{Records: 3} // later batches have sequences
	afterAck := Facts{LaterAcked: true, Records: 3}
	one := Facts{NewestSeq: true, Records: 1}

	cases := []struct {
		name string
		code int16
		f    Facts
		want Verdict
	}{
		{"success", 0, oldest, Verdict{Act: ActAck}},
		{"duplicate is success, without an offset", kerr.DuplicateSequenceNumber.Code, maybe, Verdict{Act: ActAck, OffsetUnknown: true, MaybeWritten: true}},

		{"OOOSN behind an unacked batch is the gap: retry", kerr.OutOfOrderSequenceNumber.Code, behindGap, Verdict{Act: ActRetry}},
		{"OOOSN behind a refused batch, maybe written: retry after it, still maybe written", kerr.OutOfOrderSequenceNumber.Code, behindRefused, Verdict{Act: ActRetry, MaybeWritten: true}},
		{"OOOSN resolving a bump behind a refused batch: fate unknown (it may be past the gap)", kerr.OutOfOrderSequenceNumber.Code, resolvingBehindRefused, Verdict{Act: ActFail, MaybeWritten: true, Bump: true}},
		{"UNKNOWN_PRODUCER_ID resolving a bump behind a refused batch: fate unknown", kerr.UnknownProducerID.Code, resolvingBehindRefused, Verdict{Act: ActFail, MaybeWritten: true, Bump: true}},
		{"OOOSN resolving a bump behind an unacked batch, none refused: retry after it", kerr.OutOfOrderSequenceNumber.Code, Facts{EarlierUnacked: true, MaybeWritten: true, Resolving: true, Records: 3}, Verdict{Act: ActRetry, MaybeWritten: true}},
		{"OOOSN behind a refused batch, not written: retry", kerr.OutOfOrderSequenceNumber.Code, behindRefusedUnwritten, Verdict{Act: ActRetry}},
		{"OOOSN on the oldest: state lost, bump and renumber", kerr.OutOfOrderSequenceNumber.Code, oldest, Verdict{Act: ActRetry, Bump: true}},
		{"OOOSN on the oldest that may be written: fate unknown", kerr.OutOfOrderSequenceNumber.Code, maybe, Verdict{Act: ActFail, MaybeWritten: true, Bump: true}},
		{"OOOSN after a later ack: order lost", kerr.OutOfOrderSequenceNumber.Code, afterAck, Verdict{Act: ActOrderLost, Bump: true}},
		{"UNKNOWN_PRODUCER_ID like OOOSN", kerr.UnknownProducerID.Code, oldest, Verdict{Act: ActRetry, Bump: true}},

		{"INVALID_PRODUCER_EPOCH: new id", kerr.InvalidProducerEpoch.Code, oldest, Verdict{Act: ActRetry, Bump: true, NewID: true}},
		{"PRODUCER_FENCED may-be-written fails", kerr.ProducerFenced.Code, maybe, Verdict{Act: ActFail, MaybeWritten: true, Bump: true, NewID: true}},

		{"NOT_LEADER may have appended (acks=all, leadership lost in purgatory)", kerr.NotLeaderForPartition.Code, oldest, Verdict{Act: ActRetry, MaybeWritten: true, RefreshMetadata: true}},
		{"UNKNOWN_TOPIC_OR_PARTITION may have appended", kerr.UnknownTopicOrPartition.Code, oldest, Verdict{Act: ActRetry, MaybeWritten: true, RefreshMetadata: true}},
		{"KAFKA_STORAGE_ERROR may have appended", kerr.KafkaStorageError.Code, oldest, Verdict{Act: ActRetry, MaybeWritten: true, RefreshMetadata: true}},
		{"LEADER_NOT_AVAILABLE: not written", kerr.LeaderNotAvailable.Code, oldest, Verdict{Act: ActRetry, RefreshMetadata: true}},
		{"FENCED_LEADER_EPOCH: not written", kerr.FencedLeaderEpoch.Code, oldest, Verdict{Act: ActRetry, RefreshMetadata: true}},
		{"UNKNOWN_TOPIC_ID: refresh (topic re-created)", kerr.UnknownTopicID.Code, oldest, Verdict{Act: ActRetry, RefreshMetadata: true}},
		{"INCONSISTENT_TOPIC_ID: refresh", kerr.InconsistentTopicID.Code, oldest, Verdict{Act: ActRetry, RefreshMetadata: true}},
		{"not-written leader error after a later ack: order lost", kerr.LeaderNotAvailable.Code, afterAck, Verdict{Act: ActOrderLost, RefreshMetadata: true}},
		{"may-have-appended leader error after a later ack: resolve", kerr.NotLeaderForPartition.Code, afterAck, Verdict{Act: ActRetry, MaybeWritten: true, RefreshMetadata: true}},

		{"REQUEST_TIMED_OUT may have appended", kerr.RequestTimedOut.Code, oldest, Verdict{Act: ActRetry, MaybeWritten: true}},
		{"NOT_ENOUGH_REPLICAS_AFTER_APPEND may have appended", kerr.NotEnoughReplicasAfterAppend.Code, oldest, Verdict{Act: ActRetry, MaybeWritten: true}},
		{"NOT_ENOUGH_REPLICAS: checked before append", kerr.NotEnoughReplicas.Code, oldest, Verdict{Act: ActRetry}},
		{"NOT_ENOUGH_REPLICAS after a later ack: order lost", kerr.NotEnoughReplicas.Code, afterAck, Verdict{Act: ActOrderLost}},
		{"CORRUPT_MESSAGE: retry, not written", kerr.CorruptMessage.Code, oldest, Verdict{Act: ActRetry}},
		{"sticky maybe survives a not-written answer", kerr.NotEnoughReplicas.Code, maybe, Verdict{Act: ActRetry, MaybeWritten: true}},
		{"connection lost after write", CodeLost, oldest, Verdict{Act: ActRetry, MaybeWritten: true}},
		{"request never written", CodeUnsent, oldest, Verdict{Act: ActRetry}},

		{"MESSAGE_TOO_LARGE splits", kerr.MessageTooLarge.Code, oldest, Verdict{Act: ActSplit}},
		{"RECORD_LIST_TOO_LARGE splits", kerr.RecordListTooLarge.Code, middle, Verdict{Act: ActSplit}},
		{"too large single record fails, rewinds", kerr.MessageTooLarge.Code, one, Verdict{Act: ActFail, Rewind: true}},
		{"too large after a later ack: order lost", kerr.MessageTooLarge.Code, afterAck, Verdict{Act: ActOrderLost}},
		{"too large, maybe written: fail, fate unknown", kerr.MessageTooLarge.Code, maybe, Verdict{Act: ActFail, MaybeWritten: true, Bump: true}},

		{"INVALID_RECORD newest: fail, rewind, no bump", kerr.InvalidRecord.Code, oldest, Verdict{Act: ActFail, Rewind: true}},
		{"INVALID_RECORD with later batches: fail, bump", kerr.InvalidRecord.Code, middle, Verdict{Act: ActFail, Bump: true}},
		{"TOPIC_AUTHORIZATION_FAILED fails at once", kerr.TopicAuthorizationFailed.Code, oldest, Verdict{Act: ActFail, Rewind: true}},
		{"CLUSTER_AUTHORIZATION_FAILED fails at once", kerr.ClusterAuthorizationFailed.Code, middle, Verdict{Act: ActFail, Bump: true}},
		{"UNSUPPORTED_VERSION fails at once", kerr.UnsupportedVersion.Code, oldest, Verdict{Act: ActFail, Rewind: true}},
		{"UNKNOWN_SERVER_ERROR: fate unknown", kerr.UnknownServerError.Code, oldest, Verdict{Act: ActFail, MaybeWritten: true, Bump: true}},
		{"unknown retriable-looking code: may have appended", 9999, oldest, Verdict{Act: ActFail, MaybeWritten: true, Bump: true}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, Production.Judge(tc.code, tc.f))
		})
	}
}

// TestJudgeEveryCode checks invariants of the matrix for every code kerr
// knows: a batch may be acked only on success or duplicate; the fate flag
// is never cleared (no answer proves an earlier attempt unwritten); a
// failure of a batch that may be in the log bumps (what follows is
// renumbered) and is never a rewind; a certainly-unwritten batch after an
// acked one is never retried (KAFKA-15591).
func TestJudgeEveryCode(t *testing.T) {
	facts := []Facts{
		{NewestSeq: true, Records: 1}, {Records: 2}, {MaybeWritten: true, Records: 2},
		{EarlierUnacked: true, Records: 2}, {EarlierUnacked: true, EarlierRefused: true, Records: 2},
		{EarlierUnacked: true, EarlierRefused: true, MaybeWritten: true, Records: 2},
		{EarlierUnacked: true, EarlierRefused: true, MaybeWritten: true, Resolving: true, Records: 2},
		{LaterAcked: true, Records: 2}, {LaterAcked: true, MaybeWritten: true, Records: 2},
	}
	for code := int16(-1); code < 140; code++ {
		for _, f := range facts {
			v := Production.Judge(code, f)
			if code == 0 || code == kerr.DuplicateSequenceNumber.Code {
				require.Equal(t, ActAck, v.Act, "code %d", code)
				continue
			}
			require.NotEqual(t, ActAck, v.Act, "code %d acked", code)
			if f.MaybeWritten {
				require.True(t, v.MaybeWritten, "code %d cleared maybeWritten (%+v)", code, f)
			}
			if v.Act == ActFail {
				require.True(t, v.Bump != v.Rewind, "code %d: a failure must bump or rewind, not both (%+v -> %+v)", code, f, v)
				if v.MaybeWritten {
					require.True(t, v.Bump, "code %d", code)
				}
			}
			if v.Rewind {
				require.True(t, f.NewestSeq && !v.MaybeWritten, "code %d rewinds a batch that is not the newest or may be written", code)
			}
			if f.LaterAcked && !v.MaybeWritten {
				require.NotEqual(t, ActRetry, v.Act, "code %d retries an unwritten batch after a later ack", code)
				require.NotEqual(t, ActSplit, v.Act, "code %d", code)
			}
			if v.Act == ActSplit {
				require.False(t, v.Bump || v.Rewind, "a split keeps the sequence range")
			}
		}
	}
}

// TestOrderLost is the production order-lost rule, asked at a batch's own
// answer and at a later batch's acknowledgement alike: only a batch
// certainly not written, with a later one acknowledged, fails; where it
// waits in the retry queue does not matter.
func TestOrderLost(t *testing.T) {
	for _, f := range []OrderFacts{{}, {AtAck: true}, {Leading: true}, {AtAck: true, Leading: true}} {
		lost := f
		lost.LaterAcked = true
		require.True(t, Production.OrderLost(lost), "%+v", lost)
		require.False(t, Production.OrderLost(f), "nothing later acked: %+v", f)
		lost.MaybeWritten = true
		require.False(t, Production.OrderLost(lost), "may be in the log: resolved, not lost: %+v", lost)
	}
}

// TestJudgeUsesTheMatrixRules: Judge asks the matrix it is called on for
// the sequence and order-lost rules and its rows, so a negative control's
// matrix changes the verdicts it should and no other.
func TestJudgeUsesTheMatrixRules(t *testing.T) {
	m := Production
	m.Sequence = func(Facts, bool) Verdict { return Verdict{Act: ActSplit} }
	m.OrderLost = func(OrderFacts) bool { return true }
	m.Codes = map[int16]CodeInfo{7: {ClassFail, false}}
	f := Facts{NewestSeq: true, Records: 2}
	require.Equal(t, Verdict{Act: ActFail, MaybeWritten: true, Bump: true}, m.Judge(kerr.OutOfOrderSequenceNumber.Code, f), "a code without a row: by kerr (not retriable), may have appended")
	require.Equal(t, Verdict{Act: ActFail, Rewind: true}, m.Judge(7, f))
	m.Codes = Production.Codes
	require.Equal(t, Verdict{Act: ActOrderLost}, m.Judge(kerr.OutOfOrderSequenceNumber.Code, f), "the sequence rule's split, then order lost")
	require.Equal(t, Verdict{Act: ActAck}, m.Judge(0, f), "an acknowledgement is never order lost")
}

// TestOrderLostAtBump: as a bump renumbers the batches waiting for retry,
// one older than a batch acknowledged or in doubt fails, whether or not an
// attempt of it may be in the log; one with neither later does not.
func TestOrderLostAtBump(t *testing.T) {
	for _, maybe := range []bool{false, true} {
		require.True(t, Production.OrderLost(OrderFacts{AtBump: true, LaterAcked: true, MaybeWritten: maybe}))
		require.True(t, Production.OrderLost(OrderFacts{AtBump: true, LaterInDoubt: true, MaybeWritten: maybe}))
		require.False(t, Production.OrderLost(OrderFacts{AtBump: true, MaybeWritten: maybe}))
	}
	require.False(t, Production.OrderLost(OrderFacts{LaterInDoubt: true}), "in doubt counts at a bump only")
}

// TestKeepSplit: a batch waiting to be split stays so after an attempt
// certainly not written, and not after one that may be in the log; a
// batch not waiting is never marked, and a split verdict is asked anew.
func TestKeepSplit(t *testing.T) {
	waiting := Facts{SplitPending: true, Records: 3}
	require.True(t, Production.Judge(kerr.NotEnoughReplicas.Code, waiting).KeepSplit, "not written")
	require.False(t, Production.Judge(CodeLost, waiting).KeepSplit, "may be in the log")
	require.False(t, Production.Judge(0, waiting).KeepSplit, "acknowledged")
	require.False(t, Production.Judge(kerr.NotEnoughReplicas.Code, Facts{Records: 3}).KeepSplit, "not waiting")
	v := Production.Judge(kerr.MessageTooLarge.Code, Facts{NewestSeq: true, Records: 3})
	require.Equal(t, ActSplit, v.Act)
	require.False(t, v.KeepSplit)
}
