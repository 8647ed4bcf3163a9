package producer

import "github.com/twmb/franz-go/pkg/kerr"

// The error matrix. judge decides what one partition's answer to one
// attempt means for its batch; batchRejected (response.go) only applies the
// verdict. Keeping the decision a pure function of (code, facts) lets one
// table test cover every code a ProduceResponse can carry.

// codeClass groups produce error codes by what the sender must do.
type codeClass uint8

const (
	classWritten  codeClass = iota // acknowledged: 0, DUPLICATE_SEQUENCE_NUMBER
	classSequence                  // the broker's sequence state disagrees with ours
	classFenced                    // our epoch or id is no longer valid
	classLeader                    // the partition moved or is moving: refresh metadata, retry
	classRetry                     // transient: retry as is
	classTooLarge                  // the batch is too large: split it
	classFail                      // these records can never be written as sent
)

// codeInfo is what Kafka's broker code says about one error code.
type codeInfo struct {
	class codeClass
	// mayAppend is true when the broker can answer the code after it
	// appended the batch: Kafka's DelayedProduce (acks=all waiting for the
	// ISR) completes an appended batch with NOT_LEADER_OR_FOLLOWER,
	// UNKNOWN_TOPIC_OR_PARTITION or KAFKA_STORAGE_ERROR when the partition
	// moves or goes offline, with REQUEST_TIMED_OUT when the ISR is slow,
	// and with NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR shrank; a
	// follower that fetched the batch may keep it. Every other code comes
	// from checks made before the append (leadership, ISR size, sequence,
	// epoch, validation, authorization, quotas), so the batch is not in
	// the log from that attempt.
	mayAppend bool
}

// produceCodes lists every code a ProduceResponse partition can carry, with
// its class. Codes not listed are judged by unknownCode.
var produceCodes = map[int16]codeInfo{
	0:                                            {classWritten, false},
	kerr.DuplicateSequenceNumber.Code:            {classWritten, false},
	kerr.OutOfOrderSequenceNumber.Code:           {classSequence, false},
	kerr.UnknownProducerID.Code:                  {classSequence, false},
	kerr.InvalidProducerEpoch.Code:               {classFenced, false},
	kerr.ProducerFenced.Code:                     {classFenced, false},
	kerr.InvalidProducerIDMapping.Code:           {classFenced, false},
	kerr.NotLeaderForPartition.Code:              {classLeader, true},
	kerr.UnknownTopicOrPartition.Code:            {classLeader, true},
	kerr.KafkaStorageError.Code:                  {classLeader, true},
	kerr.LeaderNotAvailable.Code:                 {classLeader, false},
	kerr.FencedLeaderEpoch.Code:                  {classLeader, false},
	kerr.UnknownLeaderEpoch.Code:                 {classLeader, false},
	kerr.ReplicaNotAvailable.Code:                {classLeader, false},
	kerr.BrokerNotAvailable.Code:                 {classLeader, false},
	kerr.ListenerNotFound.Code:                   {classLeader, false},
	kerr.UnknownTopicID.Code:                     {classLeader, false},
	kerr.InconsistentTopicID.Code:                {classLeader, false},
	kerr.RequestTimedOut.Code:                    {classRetry, true},
	kerr.NotEnoughReplicasAfterAppend.Code:       {classRetry, true},
	kerr.NetworkException.Code:                   {classRetry, true},
	kerr.NotEnoughReplicas.Code:                  {classRetry, false},
	kerr.CorruptMessage.Code:                     {classRetry, false},
	kerr.ThrottlingQuotaExceeded.Code:            {classRetry, false},
	kerr.ConcurrentTransactions.Code:             {classRetry, false},
	kerr.MessageTooLarge.Code:                    {classTooLarge, false},
	kerr.RecordListTooLarge.Code:                 {classTooLarge, false},
	kerr.InvalidRecord.Code:                      {classFail, false},
	kerr.InvalidTimestamp.Code:                   {classFail, false},
	kerr.InvalidTopicException.Code:              {classFail, false},
	kerr.InvalidRequiredAcks.Code:                {classFail, false},
	kerr.InvalidRequest.Code:                     {classFail, false},
	kerr.UnsupportedForMessageFormat.Code:        {classFail, false},
	kerr.UnsupportedCompressionType.Code:         {classFail, false},
	kerr.UnsupportedVersion.Code:                 {classFail, false},
	kerr.TopicAuthorizationFailed.Code:           {classFail, false},
	kerr.ClusterAuthorizationFailed.Code:         {classFail, false},
	kerr.TransactionalIDAuthorizationFailed.Code: {classFail, false},
	kerr.InvalidTxnState.Code:                    {classFail, false},
	kerr.PolicyViolation.Code:                    {classFail, false},
	kerr.TransactionAbortable.Code:               {classFail, false},
}

// unknownCode is the class of a code the table does not list: a newer
// broker's code or a broker bug. Nothing is known of the batch's fate, so it
// may have been appended; retriable codes are retried, others fail.
func unknownCode(code int16) codeInfo {
	if kerr.IsRetriable(kerr.ErrorForCode(code)) {
		return codeInfo{classRetry, true}
	}
	return codeInfo{classFail, true}
}

func lookupCode(code int16) codeInfo {
	if ci, ok := produceCodes[code]; ok {
		return ci
	}
	return unknownCode(code)
}

// batchFacts is what the sender knows of a batch when its answer arrives.
type batchFacts struct {
	maybeWritten   bool // an earlier attempt may be in the log
	earlierUnacked bool // a batch of the partition sent before it is not acked yet
	earlierRefused bool // one of those is certainly not in the log and not in flight
	laterAcked     bool // a batch of the partition sent after it was acked
	resolving      bool // an epoch bump waits: only maybe-written batches are resent, refused ones skipped
	newestSeq      bool // no batch of the partition has a later sequence number
	records        int  // records in the batch
}

// act is what the sender does with a batch.
type act uint8

const (
	actAck       act = iota // success: callbacks with offsets
	actRetry                // send again, same epoch and sequence, after a backoff
	actFail                 // fail the records
	actOrderLost            // fail as ErrOrderLost: not written, and a later batch was
	actSplit                // split into two batches with the same sequence range
)

// verdict is judge's answer.
type verdict struct {
	act act
	// maybeWritten is the batch's new "may be in the log" flag: set by an
	// attempt that may have appended, cleared only when the broker's answer
	// proves no attempt did.
	maybeWritten bool
	// bump asks for an epoch bump (KIP-360) before the partition's later
	// batches go out: their sequence numbers no longer follow the broker's.
	bump bool
	// newID asks for a new producer id instead of a bump.
	newID bool
	// rewind gives the failed batch's sequence numbers to the partition's
	// next new batch: it was the newest and certainly not written, so the
	// broker's sequence state is unaffected and no bump is needed.
	rewind bool
	// refreshMetadata asks for new metadata (the leader moved or the topic
	// changed).
	refreshMetadata bool
}

// judge decides what one error code means for a batch. It is the whole
// error matrix: every rule about what may be retried, what must fail, and
// what needs an epoch bump lives here.
func judge(code int16, f batchFacts) verdict {
	ci := lookupCode(code)
	maybe := f.maybeWritten || ci.mayAppend
	v := verdict{maybeWritten: maybe}
	switch ci.class {
	case classWritten:
		v.act = actAck
		return v
	case classSequence:
		switch {
		case f.earlierUnacked && f.earlierRefused && maybe && f.resolving:
			// The bump resends this batch alone, skipping a predecessor
			// certainly not in the log, to learn its fate, and the
			// broker neither acks it nor takes it as a duplicate. That
			// does not prove it unwritten: if it is in the log, the
			// broker took it past the gap, so it had no state for us
			// then (KIP-854 expiry, the trap of KAFKA-15591) and "a
			// broker holding our state never appends past a gap" is
			// what failed; and a broker that lost the batch's metadata
			// (its snapshot keeps a producer's last batch only) answers
			// a written batch out of order. Renumbered, it could be
			// written twice, after its predecessor (chaos seeds 15697,
			// 28603), and resent as is it would only be refused again:
			// it fails, fate unknown, and the bump fails the refused
			// predecessors as ErrOrderLost (renumber: older than a batch
			// in doubt).
			v.act, v.bump = actFail, true
		case f.earlierUnacked:
			// The gap left by an unacked predecessor explains the answer:
			// it goes again first, this one follows, still maybe written
			// if it was (no answer proves an earlier attempt unwritten).
			v.act = actRetry
		case maybe:
			// The oldest unacked batch, and the broker neither has it nor
			// expects it: it lost our state. An earlier attempt may be in
			// the log, so sending it again could duplicate it.
			v.act, v.bump = actFail, true
		default:
			// The broker lost our state (KIP-854 expiry, a new leader
			// without it): bump and renumber from 0.
			v.act, v.bump = actRetry, true
		}
	case classFenced:
		v.bump, v.newID = true, true
		v.act = actRetry
		if maybe {
			v.act = actFail
		}
	case classLeader:
		v.act, v.refreshMetadata = actRetry, true
	case classRetry:
		v.act = actRetry
	case classTooLarge:
		v.act = actFail
		if f.records > 1 && !f.maybeWritten {
			v.act = actSplit // same sequence range: no gap, no bump
		}
	case classFail:
		v.act = actFail
	}
	if (v.act == actRetry || v.act == actSplit) && !v.maybeWritten && f.laterAcked {
		// A later batch is in the log and this one is not: writing it now
		// would reorder the partition (the broker had no state for us,
		// KAFKA-15591).
		v.act = actOrderLost
	}
	if v.act == actFail && !v.bump {
		if v.maybeWritten || !f.newestSeq {
			v.bump = true // a gap, or a batch that may be there: renumber what follows
		} else {
			v.rewind = true
		}
	}
	return v
}
