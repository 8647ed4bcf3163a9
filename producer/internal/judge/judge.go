// Package judge is the producer's error matrix: [Matrix.Judge] decides what
// one partition's answer to one attempt (or its absence) means for its
// batch, and [Matrix.OrderLost] what a later batch's acknowledgement means
// for a batch waiting for retry; the producer (response.go) only applies
// the verdicts. Keeping the decision a pure function of (matrix, code,
// facts) lets one table test cover every code a ProduceResponse can carry,
// and a negative control pass a matrix with one row or rule swapped for the
// bug it fixed, without a switch in the producer.
package judge

import "github.com/twmb/franz-go/pkg/kerr"

// Class groups produce error codes by what the sender must do.
type Class uint8

const (
	ClassWritten  Class = iota // acknowledged: 0, DUPLICATE_SEQUENCE_NUMBER
	ClassSequence              // the broker's sequence state disagrees with ours
	ClassFenced                // our epoch or id is no longer valid
	ClassLeader                // the partition moved or is moving: refresh metadata, retry
	ClassRetry                 // transient: retry as is
	ClassTooLarge              // the batch is too large: split it
	ClassFail                  // these records can never be written as sent
)

// CodeInfo is what Kafka's broker code says about one error code: its
// row of the matrix.
type CodeInfo struct {
	Class Class
	// MayAppend is true when the broker can answer the code after it
	// appended the batch: Kafka's DelayedProduce (acks=all waiting for the
	// ISR) completes an appended batch with NOT_LEADER_OR_FOLLOWER,
	// UNKNOWN_TOPIC_OR_PARTITION or KAFKA_STORAGE_ERROR when the partition
	// moves or goes offline, with REQUEST_TIMED_OUT when the ISR is slow,
	// and with NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR shrank; a
	// follower that fetched the batch may keep it. Every other code comes
	// from checks made before the append (leadership, ISR size, sequence,
	// epoch, validation, authorization, quotas), so the batch is not in
	// the log from that attempt.
	MayAppend bool
}

// Pseudo error codes for outcomes without a partition answer, judged like
// broker codes.
const (
	CodeUnsent int16 = -1000 // the request never reached the broker
	CodeLost   int16 = -1001 // sent, and no answer: it may have been appended
)

// produceCodes lists every code a ProduceResponse partition can carry, with
// its class, and the pseudo-codes. Codes not listed are judged by
// unknownCode.
var produceCodes = map[int16]CodeInfo{
	CodeUnsent:                                   {ClassRetry, false},
	CodeLost:                                     {ClassRetry, true},
	0:                                            {ClassWritten, false},
	kerr.DuplicateSequenceNumber.Code:            {ClassWritten, false},
	kerr.OutOfOrderSequenceNumber.Code:           {ClassSequence, false},
	kerr.UnknownProducerID.Code:                  {ClassSequence, false},
	kerr.InvalidProducerEpoch.Code:               {ClassFenced, false},
	kerr.ProducerFenced.Code:                     {ClassFenced, false},
	kerr.InvalidProducerIDMapping.Code:           {ClassFenced, false},
	kerr.NotLeaderForPartition.Code:              {ClassLeader, true},
	kerr.UnknownTopicOrPartition.Code:            {ClassLeader, true},
	kerr.KafkaStorageError.Code:                  {ClassLeader, true},
	kerr.LeaderNotAvailable.Code:                 {ClassLeader, false},
	kerr.FencedLeaderEpoch.Code:                  {ClassLeader, false},
	kerr.UnknownLeaderEpoch.Code:                 {ClassLeader, false},
	kerr.ReplicaNotAvailable.Code:                {ClassLeader, false},
	kerr.BrokerNotAvailable.Code:                 {ClassLeader, false},
	kerr.ListenerNotFound.Code:                   {ClassLeader, false},
	kerr.UnknownTopicID.Code:                     {ClassLeader, false},
	kerr.InconsistentTopicID.Code:                {ClassLeader, false},
	kerr.RequestTimedOut.Code:                    {ClassRetry, true},
	kerr.NotEnoughReplicasAfterAppend.Code:       {ClassRetry, true},
	kerr.NetworkException.Code:                   {ClassRetry, true},
	kerr.NotEnoughReplicas.Code:                  {ClassRetry, false},
	kerr.CorruptMessage.Code:                     {ClassRetry, false},
	kerr.ThrottlingQuotaExceeded.Code:            {ClassRetry, false},
	kerr.ConcurrentTransactions.Code:             {ClassRetry, false},
	kerr.MessageTooLarge.Code:                    {ClassTooLarge, false},
	kerr.RecordListTooLarge.Code:                 {ClassTooLarge, false},
	kerr.InvalidRecord.Code:                      {ClassFail, false},
	kerr.InvalidTimestamp.Code:                   {ClassFail, false},
	kerr.InvalidTopicException.Code:              {ClassFail, false},
	kerr.InvalidRequiredAcks.Code:                {ClassFail, false},
	kerr.InvalidRequest.Code:                     {ClassFail, false},
	kerr.UnsupportedForMessageFormat.Code:        {ClassFail, false},
	kerr.UnsupportedCompressionType.Code:         {ClassFail, false},
	kerr.UnsupportedVersion.Code:                 {ClassFail, false},
	kerr.TopicAuthorizationFailed.Code:           {ClassFail, false},
	kerr.ClusterAuthorizationFailed.Code:         {ClassFail, false},
	kerr.TransactionalIDAuthorizationFailed.Code: {ClassFail, false},
	kerr.InvalidTxnState.Code:                    {ClassFail, false},
	kerr.PolicyViolation.Code:                    {ClassFail, false},
	kerr.TransactionAbortable.Code:               {ClassFail, false},
}

// unknownCode is the class of a code the table does not list: a newer
// broker's code or a broker bug. Nothing is known of the batch's fate, so it
// may have been appended; retriable codes are retried, others fail.
func unknownCode(code int16) CodeInfo {
	if kerr.IsRetriable(kerr.ErrorForCode(code)) {
		return CodeInfo{ClassRetry, true}
	}
	return CodeInfo{ClassFail, true}
}

// Matrix is the error matrix: the row of every code, and the rules that
// depend on the batch's neighbours or its history. [Production] is the producer's; a
// negative control passes the producer another, with the row or rule its
// bug broke. The zero Matrix is not usable.
type Matrix struct {
	// Codes holds the rows; a code without one is judged by its kerr
	// retriability, as possibly appended.
	Codes map[int16]CodeInfo
	// Sequence decides an answer of ClassSequence, whose meaning depends
	// on the batches around it; maybe is the batch's "may be in the log"
	// flag after this attempt.
	Sequence func(f Facts, maybe bool) Verdict
	// OrderLost reports whether a batch certainly not written must fail
	// with ErrOrderLost rather than be written after its successors.
	OrderLost func(f OrderFacts) bool
	// KeepSplit reports whether a batch waiting to be split stays so,
	// given the verdict v on this attempt ([Verdict.KeepSplit]).
	KeepSplit func(f Facts, v Verdict) bool
}

// Production is the error matrix the producer applies.
var Production = Matrix{Codes: produceCodes, Sequence: SequenceVerdict, OrderLost: OrderLost, KeepSplit: KeepSplitRule}

func (m *Matrix) lookup(code int16) CodeInfo {
	if ci, ok := m.Codes[code]; ok {
		return ci
	}
	return unknownCode(code)
}

// Facts is what the sender knows of a batch when its answer arrives.
type Facts struct {
	MaybeWritten   bool // an earlier attempt may be in the log
	EarlierUnacked bool // a batch of the partition sent before it is not acked yet
	EarlierRefused bool // one of those is certainly not in the log and not in flight (so EarlierUnacked is set)
	LaterAcked     bool // a batch of the partition sent after it was acked
	Resolving      bool // an epoch bump waits: only maybe-written batches are resent, refused ones skipped
	NewestSeq      bool // no batch of the partition has a later sequence number
	SplitPending   bool // an earlier answer found it too large: it waits to be split
	Records        int  // records in the batch
}

// Act is what the sender does with a batch.
type Act uint8

const (
	ActAck       Act = iota // success: callbacks with offsets
	ActRetry                // send again, same epoch and sequence, after a backoff
	ActFail                 // fail the records
	ActOrderLost            // fail as ErrOrderLost: not written, and a later batch was
	ActSplit                // split into two batches with the same sequence range
)

// OrderFacts is what decides whether a batch certainly not in the log fails
// as ErrOrderLost.
type OrderFacts struct {
	LaterAcked   bool // a batch of the partition sent after it was acknowledged
	MaybeWritten bool // an attempt of it may be in the log
	// AtAck is set when the question is asked as that later batch's
	// acknowledgement arrives (the batch waits for retry), not as the
	// batch's own answer does; Leading then tells that no batch of the
	// partition older than it waits for retry.
	AtAck, Leading bool
	// AtBump is set when the question is asked as an epoch bump renumbers
	// the batches waiting for retry; LaterInDoubt then tells that a batch
	// of the partition sent after it failed with its fate unknown.
	AtBump, LaterInDoubt bool
}

// OrderLost is the production rule: a batch certainly not written while a
// later one is in the log would reorder the partition if written now (the
// broker had no state for us, KAFKA-15591), wherever it waits.
//
// At an epoch bump the batches waiting for retry are renumbered from 0 under
// the new epoch, as new batches the broker cannot match with an earlier
// attempt: one sent before a batch that was acked, or that may be in the log
// (failed with its fate unknown), would (or could) land after it, so it
// fails, whatever its own attempts were (the bump has resolved those that
// may be written first).
func OrderLost(f OrderFacts) bool {
	if f.AtBump {
		return f.LaterAcked || f.LaterInDoubt
	}
	return f.LaterAcked && !f.MaybeWritten
}

// KeepSplitRule is the production rule for [Verdict.KeepSplit]: a batch
// waiting to be split stays so unless this attempt, sent whole behind
// another retry, may be in the log. Halves
// carry sub-ranges of its sequences, which the broker cannot match as
// duplicates of the written whole (a half would be refused as out of order,
// then failed as ErrOrderLost while its records are in the log); sent whole
// again, it is acked as a duplicate, or refused as too large and fails,
// fate unknown.
func KeepSplitRule(f Facts, v Verdict) bool {
	return f.SplitPending && !v.MaybeWritten
}

// Verdict is the matrix's answer for a batch.
type Verdict struct {
	Act Act
	// OffsetUnknown is set for an acknowledgement without the batch's
	// offset (DUPLICATE_SEQUENCE_NUMBER: written by an earlier attempt).
	OffsetUnknown bool
	// MaybeWritten is the batch's new "may be in the log" flag: set by an
	// attempt that may have appended, cleared only when the broker's answer
	// proves no attempt did.
	MaybeWritten bool
	// Bump asks for an epoch bump (KIP-360) before the partition's later
	// batches go out: their sequence numbers no longer follow the broker's.
	Bump bool
	// NewID asks for a new producer id instead of a bump.
	NewID bool
	// Rewind gives the failed batch's sequence numbers to the partition's
	// next new batch: it was the newest and certainly not written, so the
	// broker's sequence state is unaffected and no bump is needed.
	Rewind bool
	// RefreshMetadata asks for new metadata (the leader moved or the topic
	// changed).
	RefreshMetadata bool
	// KeepSplit tells that a batch waiting to be split ([Facts.SplitPending])
	// still is ([Matrix.KeepSplit]); [ActSplit] asks for a split anew. Not
	// set on an acknowledgement.
	KeepSplit bool
}

// Judge decides what one error code (a broker's, or [CodeUnsent] or
// [CodeLost]) means for a batch with facts f. It is the whole error
// matrix: every rule about what may be acknowledged or retried, what must
// fail, and what needs an epoch bump lives here.
func (m *Matrix) Judge(code int16, f Facts) Verdict {
	ci := m.lookup(code)
	maybe := f.MaybeWritten || ci.MayAppend
	v := Verdict{MaybeWritten: maybe}
	switch ci.Class {
	case ClassWritten:
		v.Act, v.OffsetUnknown = ActAck, code != 0
		return v
	case ClassSequence:
		v = m.Sequence(f, maybe)
	case ClassFenced:
		v.Bump, v.NewID = true, true
		v.Act = ActRetry
		if maybe {
			v.Act = ActFail
		}
	case ClassLeader:
		v.Act, v.RefreshMetadata = ActRetry, true
	case ClassRetry:
		v.Act = ActRetry
	case ClassTooLarge:
		v.Act = ActFail
		if f.Records > 1 && !f.MaybeWritten {
			v.Act = ActSplit // same sequence range: no gap, no bump
		}
	case ClassFail:
		v.Act = ActFail
	}
	if (v.Act == ActRetry || v.Act == ActSplit) && m.OrderLost(OrderFacts{LaterAcked: f.LaterAcked, MaybeWritten: v.MaybeWritten}) {
		v.Act = ActOrderLost
	}
	if v.Act == ActFail && !v.Bump {
		if v.MaybeWritten || !f.NewestSeq {
			v.Bump = true // a gap, or a batch that may be there: renumber what follows
		} else {
			v.Rewind = true
		}
	}
	v.KeepSplit = m.KeepSplit(f, v)
	return v
}

// SequenceVerdict is the production rule for OUT_OF_ORDER_SEQUENCE_NUMBER and
// UNKNOWN_PRODUCER_ID: the broker's sequence state disagrees with ours.
func SequenceVerdict(f Facts, maybe bool) Verdict {
	v := Verdict{MaybeWritten: maybe}
	if f.EarlierRefused && maybe && f.Resolving {
		// The bump resends this batch alone, skipping a predecessor
		// certainly not in the log, to learn its fate, and the broker
		// neither acks it nor takes it as a duplicate. That does not
		// prove it unwritten: if it is in the log, the broker took it
		// past the gap, so it had no state for us then (KIP-854 expiry,
		// the trap of KAFKA-15591) and "a broker holding our state never
		// appends past a gap" is what failed; and a broker that lost the
		// batch's metadata (its snapshot keeps a producer's last batch
		// only) answers a written batch out of order. Renumbered, it
		// could be written twice, after its predecessor, and resent as is
		// it would only be refused again: it fails, fate unknown, and the
		// bump fails the refused predecessors as ErrOrderLost (renumber:
		// older than a batch in doubt).
		v.Act, v.Bump = ActFail, true
		return v
	}
	switch {
	case f.EarlierUnacked:
		// The gap left by an unacked predecessor explains the answer: it
		// goes again first, this one follows, still maybe written if it
		// was (no answer proves an earlier attempt unwritten).
		v.Act = ActRetry
	case maybe:
		// The oldest unacked batch, and the broker neither has it nor
		// expects it: it lost our state. An earlier attempt may be in the
		// log, so sending it again could duplicate it.
		v.Act, v.Bump = ActFail, true
	default:
		// The broker lost our state (KIP-854 expiry, a new leader without
		// it): bump and renumber from 0.
		v.Act, v.Bump = ActRetry, true
	}
	return v
}
