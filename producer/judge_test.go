package producer

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
)

// TestJudge is the error matrix as named cases: what each answer means for a
// batch, given what the sender knows of it (issue 12).
func TestJudge(t *testing.T) {
	oldest := batchFacts{newestSeq: true, records: 3}
	behindGap := batchFacts{earlierUnacked: true, records: 3}
	behindRefused := batchFacts{earlierUnacked: true, earlierRefused: true, maybeWritten: true, records: 3}
	resolvingBehindRefused := behindRefused
	resolvingBehindRefused.resolving = true
	behindRefusedUnwritten := batchFacts{earlierUnacked: true, earlierRefused: true, records: 3}
	maybe := batchFacts{maybeWritten: true, records: 3}
	middle := batchFacts{records: 3} // later batches have sequences
	afterAck := batchFacts{laterAcked: true, records: 3}
	one := batchFacts{newestSeq: true, records: 1}

	cases := []struct {
		name string
		code int16
		f    batchFacts
		want verdict
	}{
		{"success", 0, oldest, verdict{act: actAck}},
		{"duplicate is success", kerr.DuplicateSequenceNumber.Code, maybe, verdict{act: actAck, maybeWritten: true}},

		{"OOOSN behind an unacked batch is the gap: retry", kerr.OutOfOrderSequenceNumber.Code, behindGap, verdict{act: actRetry}},
		{"OOOSN behind a refused batch, maybe written: retry after it, still maybe written", kerr.OutOfOrderSequenceNumber.Code, behindRefused, verdict{act: actRetry, maybeWritten: true}},
		{"OOOSN resolving a bump behind a refused batch: fate unknown (it may be past the gap)", kerr.OutOfOrderSequenceNumber.Code, resolvingBehindRefused, verdict{act: actFail, maybeWritten: true, bump: true}},
		{"UNKNOWN_PRODUCER_ID resolving a bump behind a refused batch: fate unknown", kerr.UnknownProducerID.Code, resolvingBehindRefused, verdict{act: actFail, maybeWritten: true, bump: true}},
		{"OOOSN behind a refused batch, not written: retry", kerr.OutOfOrderSequenceNumber.Code, behindRefusedUnwritten, verdict{act: actRetry}},
		{"OOOSN on the oldest: state lost, bump and renumber", kerr.OutOfOrderSequenceNumber.Code, oldest, verdict{act: actRetry, bump: true}},
		{"OOOSN on the oldest that may be written: fate unknown", kerr.OutOfOrderSequenceNumber.Code, maybe, verdict{act: actFail, maybeWritten: true, bump: true}},
		{"OOOSN after a later ack: order lost", kerr.OutOfOrderSequenceNumber.Code, afterAck, verdict{act: actOrderLost, bump: true}},
		{"UNKNOWN_PRODUCER_ID like OOOSN", kerr.UnknownProducerID.Code, oldest, verdict{act: actRetry, bump: true}},

		{"INVALID_PRODUCER_EPOCH: new id", kerr.InvalidProducerEpoch.Code, oldest, verdict{act: actRetry, bump: true, newID: true}},
		{"PRODUCER_FENCED may-be-written fails", kerr.ProducerFenced.Code, maybe, verdict{act: actFail, maybeWritten: true, bump: true, newID: true}},

		{"NOT_LEADER may have appended (acks=all, leadership lost in purgatory)", kerr.NotLeaderForPartition.Code, oldest, verdict{act: actRetry, maybeWritten: true, refreshMetadata: true}},
		{"UNKNOWN_TOPIC_OR_PARTITION may have appended", kerr.UnknownTopicOrPartition.Code, oldest, verdict{act: actRetry, maybeWritten: true, refreshMetadata: true}},
		{"KAFKA_STORAGE_ERROR may have appended", kerr.KafkaStorageError.Code, oldest, verdict{act: actRetry, maybeWritten: true, refreshMetadata: true}},
		{"LEADER_NOT_AVAILABLE: not written", kerr.LeaderNotAvailable.Code, oldest, verdict{act: actRetry, refreshMetadata: true}},
		{"FENCED_LEADER_EPOCH: not written", kerr.FencedLeaderEpoch.Code, oldest, verdict{act: actRetry, refreshMetadata: true}},
		{"UNKNOWN_TOPIC_ID: refresh (topic re-created)", kerr.UnknownTopicID.Code, oldest, verdict{act: actRetry, refreshMetadata: true}},
		{"INCONSISTENT_TOPIC_ID: refresh", kerr.InconsistentTopicID.Code, oldest, verdict{act: actRetry, refreshMetadata: true}},
		{"not-written leader error after a later ack: order lost", kerr.LeaderNotAvailable.Code, afterAck, verdict{act: actOrderLost, refreshMetadata: true}},
		{"may-have-appended leader error after a later ack: resolve", kerr.NotLeaderForPartition.Code, afterAck, verdict{act: actRetry, maybeWritten: true, refreshMetadata: true}},

		{"REQUEST_TIMED_OUT may have appended", kerr.RequestTimedOut.Code, oldest, verdict{act: actRetry, maybeWritten: true}},
		{"NOT_ENOUGH_REPLICAS_AFTER_APPEND may have appended", kerr.NotEnoughReplicasAfterAppend.Code, oldest, verdict{act: actRetry, maybeWritten: true}},
		{"NOT_ENOUGH_REPLICAS: checked before append", kerr.NotEnoughReplicas.Code, oldest, verdict{act: actRetry}},
		{"NOT_ENOUGH_REPLICAS after a later ack: order lost", kerr.NotEnoughReplicas.Code, afterAck, verdict{act: actOrderLost}},
		{"CORRUPT_MESSAGE: retry, not written", kerr.CorruptMessage.Code, oldest, verdict{act: actRetry}},
		{"sticky maybe survives a not-written answer", kerr.NotEnoughReplicas.Code, maybe, verdict{act: actRetry, maybeWritten: true}},
		{"connection lost after write", codeLost, oldest, verdict{act: actRetry, maybeWritten: true}},
		{"request never written", codeUnsent, oldest, verdict{act: actRetry}},

		{"MESSAGE_TOO_LARGE splits", kerr.MessageTooLarge.Code, oldest, verdict{act: actSplit}},
		{"RECORD_LIST_TOO_LARGE splits", kerr.RecordListTooLarge.Code, middle, verdict{act: actSplit}},
		{"too large single record fails, rewinds", kerr.MessageTooLarge.Code, one, verdict{act: actFail, rewind: true}},
		{"too large after a later ack: order lost", kerr.MessageTooLarge.Code, afterAck, verdict{act: actOrderLost}},
		{"too large, maybe written: fail, fate unknown", kerr.MessageTooLarge.Code, maybe, verdict{act: actFail, maybeWritten: true, bump: true}},

		{"INVALID_RECORD newest: fail, rewind, no bump", kerr.InvalidRecord.Code, oldest, verdict{act: actFail, rewind: true}},
		{"INVALID_RECORD with later batches: fail, bump", kerr.InvalidRecord.Code, middle, verdict{act: actFail, bump: true}},
		{"TOPIC_AUTHORIZATION_FAILED fails at once", kerr.TopicAuthorizationFailed.Code, oldest, verdict{act: actFail, rewind: true}},
		{"CLUSTER_AUTHORIZATION_FAILED fails at once", kerr.ClusterAuthorizationFailed.Code, middle, verdict{act: actFail, bump: true}},
		{"UNSUPPORTED_VERSION fails at once", kerr.UnsupportedVersion.Code, oldest, verdict{act: actFail, rewind: true}},
		{"UNKNOWN_SERVER_ERROR: fate unknown", kerr.UnknownServerError.Code, oldest, verdict{act: actFail, maybeWritten: true, bump: true}},
		{"unknown retriable-looking code: may have appended", 9999, oldest, verdict{act: actFail, maybeWritten: true, bump: true}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, judge(tc.code, tc.f))
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
	facts := []batchFacts{
		{newestSeq: true, records: 1}, {records: 2}, {maybeWritten: true, records: 2},
		{earlierUnacked: true, records: 2}, {earlierUnacked: true, earlierRefused: true, records: 2},
		{earlierUnacked: true, earlierRefused: true, maybeWritten: true, records: 2},
		{earlierUnacked: true, earlierRefused: true, maybeWritten: true, resolving: true, records: 2},
		{laterAcked: true, records: 2}, {laterAcked: true, maybeWritten: true, records: 2},
	}
	for code := int16(-1); code < 140; code++ {
		for _, f := range facts {
			v := judge(code, f)
			if code == 0 || code == kerr.DuplicateSequenceNumber.Code {
				require.Equal(t, actAck, v.act, "code %d", code)
				continue
			}
			require.NotEqual(t, actAck, v.act, "code %d acked", code)
			if f.maybeWritten {
				require.True(t, v.maybeWritten, "code %d cleared maybeWritten (%+v)", code, f)
			}
			if v.act == actFail {
				require.True(t, v.bump != v.rewind, "code %d: a failure must bump or rewind, not both (%+v -> %+v)", code, f, v)
				if v.maybeWritten {
					require.True(t, v.bump, "code %d", code)
				}
			}
			if v.rewind {
				require.True(t, f.newestSeq && !v.maybeWritten, "code %d rewinds a batch that is not the newest or may be written", code)
			}
			if f.laterAcked && !v.maybeWritten {
				require.NotEqual(t, actRetry, v.act, "code %d retries an unwritten batch after a later ack", code)
				require.NotEqual(t, actSplit, v.act, "code %d", code)
			}
			if v.act == actSplit {
				require.False(t, v.bump || v.rewind, "a split keeps the sequence range")
			}
		}
	}
}
