package producer

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/longhaul-kafka/longhaul/protocol"
)

var (
	tp0 = protocol.TopicPartition{Topic: "t", Partition: 0}
	tp1 = protocol.TopicPartition{Topic: "t", Partition: 1}
	tp2 = protocol.TopicPartition{Topic: "u", Partition: 0}
)

// txnHarness drives a txnCore in tests: each step asserts the request the
// core asks for and answers it.
type txnHarness struct {
	t *testing.T
	c *txnCore
}

func newTxnHarness(t *testing.T, rearmGate bool) *txnHarness {
	return &txnHarness{t: t, c: newTxnCore("tx", 60000, rearmGate, true)}
}

// expect takes the next request and checks its kind.
func (h *txnHarness) expect(kind txnReqKind) txnRequest {
	h.t.Helper()
	req, _ := h.c.next()
	require.Equal(h.t, kind, req.kind, "next request while %v", h.c.state)
	return req
}

// idle checks that the core asks for nothing now.
func (h *txnHarness) idle() {
	h.t.Helper()
	req, out := h.c.next()
	require.Equal(h.t, txnReqNone, req.kind, "next request while %v", h.c.state)
	require.Empty(h.t, out.done)
}

func (h *txnHarness) ok(out txnOutcome, err error) txnOutcome {
	h.t.Helper()
	require.NoError(h.t, err)
	return out
}

// found answers a FindCoordinator.
func (h *txnHarness) found() {
	h.t.Helper()
	h.expect(txnReqFindCoordinator)
	h.ok(h.c.onCoordinator(protocol.CoordinatorResult{NodeID: 1, Addr: "b:1"}))
}

// initialized runs init to ready with producer id 7 epoch 0.
func (h *txnHarness) initialized() {
	h.t.Helper()
	require.NoError(h.t, h.c.initTransactions())
	h.found()
	req := h.expect(txnReqInitProducerID)
	require.Equal(h.t, protocol.TxnProducer{TransactionalID: "tx", ProducerID: -1, Epoch: -1}, req.producer)
	require.Equal(h.t, int64(60000), req.timeoutMs)
	out := h.ok(h.c.onInit(protocol.InitTxnResult{ProducerID: 7, Epoch: 0}))
	require.Equal(h.t, []txnDone{{txnOpInit, nil}}, out.done)
	require.True(h.t, out.renumber)
	require.Equal(h.t, txnReady, h.c.state)
}

// sent queues n records of tp and sends them in one batch.
func (h *txnHarness) sent(tp protocol.TopicPartition, n int) {
	h.t.Helper()
	for range n {
		require.NoError(h.t, h.c.recordQueued(tp))
	}
	require.True(h.t, h.c.maySend(tp))
	require.NoError(h.t, h.c.batchSent(tp, n))
}

func doneOp(out txnOutcome, op txnOp) (error, bool) {
	for _, d := range out.done {
		if d.op == op {
			return d.err, true
		}
	}
	return nil, false
}

// TestTxnTransitionTable: exactly the moves of txnTransitions are taken;
// any other is reported as a bug and leaves the state unchanged; every
// state has its own name; fenced and fatal are terminal.
func TestTxnTransitionTable(t *testing.T) {
	names := map[string]bool{}
	for from := range txnStates {
		name := from.String()
		require.False(t, names[name] || strings.HasPrefix(name, "txnState("), "state %d name %q", from, name)
		names[name] = true
		for to := range txnStates {
			allowed := false
			for _, s := range txnTransitions[from] {
				allowed = allowed || s == to
			}
			c := &txnCore{state: from}
			err := c.to(to)
			if allowed {
				require.NoError(t, err, "%v -> %v", from, to)
				require.Equal(t, to, c.state)
				continue
			}
			require.ErrorIs(t, err, errTxnBug, "%v -> %v", from, to)
			require.Equal(t, from, c.state, "a refused move changed the state")
			require.Contains(t, err.Error(), from.String()+" -> "+to.String())
		}
	}
	require.Empty(t, txnTransitions[txnFenced])
	require.Empty(t, txnTransitions[txnFatalError])
	require.Equal(t, "txnState(200)", txnState(200).String())

	// The driver's bug makes the core fatal, as Java poisons its manager.
	c := &txnCore{state: txnReady}
	require.ErrorIs(t, c.must(txnCommitting), errTxnBug)
	require.Equal(t, txnFatalError, c.state)
}

// TestTxnProduceOutsideTransaction: a transactional producer writes only
// inside a transaction.
func TestTxnProduceOutsideTransaction(t *testing.T) {
	h := newTxnHarness(t, false)
	require.ErrorIs(t, h.c.recordQueued(tp0), ErrTransactionState)
	h.initialized()
	require.ErrorIs(t, h.c.recordQueued(tp0), ErrTransactionState)
	require.ErrorIs(t, h.c.commit(), ErrTransactionState)
	_, err := h.c.abort()
	require.ErrorIs(t, err, ErrTransactionState)
	require.ErrorIs(t, h.c.sendOffsets(protocol.GroupMetadata{GroupID: "g"}, nil), ErrTransactionState)
	require.ErrorIs(t, h.c.initTransactions(), ErrTransactionState)
	require.ErrorIs(t, h.c.begin(3), ErrTransactionState)
	require.NoError(t, h.c.begin(2))
	require.ErrorIs(t, h.c.begin(2), ErrTransactionState, "a transaction is open")
	require.NoError(t, h.c.recordQueued(tp0))
	require.NoError(t, h.c.commit())
	require.ErrorIs(t, h.c.recordQueued(tp0), ErrTransactionState, "produce while committing")
}

// TestTxnV1AddsPartitionsBeforeSending: under version 1 no batch of a
// partition goes before AddPartitionsToTxn answered for it; partitions
// touched later are added by a later request.
func TestTxnV1AddsPartitionsBeforeSending(t *testing.T) {
	h := newTxnHarness(t, false)
	h.initialized()
	require.NoError(t, h.c.begin(1))
	require.NoError(t, h.c.recordQueued(tp0))
	require.NoError(t, h.c.recordQueued(tp1))
	require.False(t, h.c.maySend(tp0))
	req := h.expect(txnReqAddPartitions)
	require.ElementsMatch(t, []protocol.TopicPartition{tp0, tp1}, req.partitions)
	require.Equal(t, protocol.TxnProducer{TransactionalID: "tx", ProducerID: 7, Epoch: 0}, req.producer)
	require.False(t, h.c.maySend(tp0), "in flight is not added")
	require.Error(t, h.c.batchSent(tp0, 1), "sending before the add is a bug")
	h.idle() // one request at a time
	require.NoError(t, h.c.recordQueued(tp2))
	h.ok(h.c.onAddPartitions([]protocol.PartitionErrorCode{{TopicPartition: tp0}, {TopicPartition: tp1}}))
	require.True(t, h.c.maySend(tp0))
	require.True(t, h.c.maySend(tp1))
	require.False(t, h.c.maySend(tp2))
	req = h.expect(txnReqAddPartitions)
	require.Equal(t, []protocol.TopicPartition{tp2}, req.partitions)
	h.ok(h.c.onAddPartitions([]protocol.PartitionErrorCode{{TopicPartition: tp2}}))
	require.True(t, h.c.maySend(tp2))
	h.idle()
}

// TestTxnV2SendsWithoutAdding: under version 2 Produce adds the
// partition; no AddPartitionsToTxn is asked for.
func TestTxnV2SendsWithoutAdding(t *testing.T) {
	h := newTxnHarness(t, false)
	h.initialized()
	require.NoError(t, h.c.begin(2))
	require.False(t, h.c.maySend(tp0), "nothing queued")
	require.NoError(t, h.c.recordQueued(tp0))
	require.True(t, h.c.maySend(tp0))
	h.idle()
}

// TestTxnEndTxnWaitsForEveryRecord: EndTxn(commit) is asked for only once
// every record of the transaction was sent and answered.
func TestTxnEndTxnWaitsForEveryRecord(t *testing.T) {
	for _, tv := range []int{1, 2} {
		h := newTxnHarness(t, false)
		h.initialized()
		require.NoError(t, h.c.begin(tv))
		for _, tp := range []protocol.TopicPartition{tp0, tp1} {
			require.NoError(t, h.c.recordQueued(tp))
			require.NoError(t, h.c.recordQueued(tp))
		}
		if tv == 1 {
			h.expect(txnReqAddPartitions)
			h.ok(h.c.onAddPartitions([]protocol.PartitionErrorCode{{TopicPartition: tp0}, {TopicPartition: tp1}}))
		}
		require.NoError(t, h.c.batchSent(tp0, 2))
		require.NoError(t, h.c.commit())
		h.idle() // tp0 in flight, tp1 unsent
		require.True(t, h.c.maySend(tp1), "a commit sends what is queued")
		require.NoError(t, h.c.batchSent(tp1, 1))
		h.ok(h.c.batchAnswered(tp0, 2, nil))
		h.idle()
		require.NoError(t, h.c.batchSent(tp1, 1))
		h.ok(h.c.batchAnswered(tp1, 1, nil))
		h.idle() // the last record is in flight
		h.ok(h.c.batchAnswered(tp1, 1, nil))
		req := h.expect(txnReqEndTxn)
		require.True(t, req.commit)
		require.Equal(t, tv, req.tv)
		next := protocol.EndTxnResult{ProducerID: -1, Epoch: -1}
		if tv == 2 {
			next = protocol.EndTxnResult{ProducerID: 7, Epoch: 1}
		}
		out := h.ok(h.c.onEndTxn(next))
		require.Equal(t, []txnDone{{txnOpCommit, nil}}, out.done)
		require.Equal(t, txnReady, h.c.state)
	}
}

// TestTxnCommitRefusedAfterFailedRecord: any record that failed, or whose
// fate is unknown, makes the transaction abort-only: commit is refused
// with that record's error (the first), and so is Produce.
func TestTxnCommitRefusedAfterFailedRecord(t *testing.T) {
	first := errors.New("first failure")
	h := newTxnHarness(t, false)
	h.initialized()
	require.NoError(t, h.c.begin(2))
	h.sent(tp0, 2)
	h.sent(tp1, 1)
	h.ok(h.c.batchAnswered(tp0, 2, first))
	h.ok(h.c.batchAnswered(tp1, 1, ErrDeliveryTimeout))
	require.Equal(t, txnAbortableError, h.c.state)
	err := h.c.commit()
	require.ErrorIs(t, err, ErrTransactionAbortable)
	require.ErrorIs(t, err, first)
	require.NotErrorIs(t, err, ErrDeliveryTimeout, "the first error is kept")
	require.ErrorIs(t, h.c.recordQueued(tp0), first)
	require.Equal(t, txnAbortableError, h.c.state)
	h.idle() // no EndTxn until abort
	_, err = h.c.abort()
	require.NoError(t, err)
	req := h.expect(txnReqEndTxn)
	require.False(t, req.commit)
}

// TestTxnCommitFailsWhenARecordFailsWhileWaiting: a commit waiting for its
// records fails with the first record's error, and only abort remains.
func TestTxnCommitFailsWhenARecordFailsWhileWaiting(t *testing.T) {
	boom := errors.New("boom")
	h := newTxnHarness(t, false)
	h.initialized()
	require.NoError(t, h.c.begin(2))
	h.sent(tp0, 1)
	require.NoError(t, h.c.commit())
	out := h.ok(h.c.batchAnswered(tp0, 1, boom))
	err, ok := doneOp(out, txnOpCommit)
	require.True(t, ok)
	require.ErrorIs(t, err, ErrTransactionAbortable)
	require.ErrorIs(t, err, boom)
	require.Equal(t, txnAbortableError, h.c.state)
	h.idle()
}

// TestTxnAbortDropsUnsentAndWaitsForSent: abort drops records not sent
// (the driver fails them) and waits for the sent ones before
// EndTxn(abort); a record failing meanwhile changes nothing.
func TestTxnAbortDropsUnsentAndWaitsForSent(t *testing.T) {
	h := newTxnHarness(t, false)
	h.initialized()
	require.NoError(t, h.c.begin(2))
	h.sent(tp1, 2)
	for range 3 {
		require.NoError(t, h.c.recordQueued(tp0))
	}
	require.Empty(t, h.c.unsent(), "nothing is dropped before abort")
	_, err := h.c.abort()
	require.NoError(t, err)
	require.Equal(t, map[protocol.TopicPartition]int{tp0: 3}, h.c.unsent())
	require.False(t, h.c.maySend(tp0), "an abort sends nothing more")
	h.idle()
	require.NoError(t, h.c.unsentDropped(tp0, 3))
	require.Empty(t, h.c.unsent())
	h.idle() // tp1 still in flight
	h.ok(h.c.batchAnswered(tp1, 2, errors.New("late failure")))
	require.Equal(t, txnAborting, h.c.state)
	req := h.expect(txnReqEndTxn)
	require.False(t, req.commit)
	out := h.ok(h.c.onEndTxn(protocol.EndTxnResult{ProducerID: 7, Epoch: 1}))
	require.Equal(t, []txnDone{{txnOpAbort, nil}}, out.done)
	require.True(t, out.renumber)
	require.Equal(t, txnReady, h.c.state)
}

// TestTxnEndWithoutAnythingSent: a transaction that reached no
// coordinator ends without EndTxn (version 1 would refuse it).
func TestTxnEndWithoutAnythingSent(t *testing.T) {
	for _, commit := range []bool{true, false} {
		for _, tv := range []int{1, 2} {
			h := newTxnHarness(t, false)
			h.initialized()
			require.NoError(t, h.c.begin(tv))
			op := txnOpAbort
			if commit {
				op = txnOpCommit
				require.NoError(t, h.c.commit())
			} else {
				_, err := h.c.abort()
				require.NoError(t, err)
			}
			req, out := h.c.next()
			require.Equal(t, txnReqNone, req.kind)
			require.Equal(t, []txnDone{{op, nil}}, out.done)
			require.Equal(t, txnReady, h.c.state)
		}
	}
	// Version 2: a batch sent (even one that failed) may have added the
	// partition, so the abort is sent.
	h := newTxnHarness(t, false)
	h.initialized()
	require.NoError(t, h.c.begin(2))
	h.sent(tp0, 1)
	h.ok(h.c.batchAnswered(tp0, 1, errors.New("refused")))
	_, err := h.c.abort()
	require.NoError(t, err)
	h.expect(txnReqEndTxn)
}

// TestTxnV2EpochBumpAtEveryEnd: under version 2 each EndTxn answer carries
// the next epoch (or a new id): sequences restart at 0, the next
// requests carry it, and the gate re-arms only if the core was built so.
func TestTxnV2EpochBumpAtEveryEnd(t *testing.T) {
	for _, rearm := range []bool{false, true} {
		h := newTxnHarness(t, rearm)
		h.initialized()
		require.NoError(t, h.c.begin(2))
		h.sent(tp0, 1)
		h.ok(h.c.batchAnswered(tp0, 1, nil))
		require.NoError(t, h.c.commit())
		h.expect(txnReqEndTxn)
		out := h.ok(h.c.onEndTxn(protocol.EndTxnResult{ProducerID: 8, Epoch: 0})) // overflow: new id
		require.True(t, out.renumber)
		require.Equal(t, rearm, out.rearmGate)
		require.NoError(t, h.c.begin(2))
		h.sent(tp0, 1)
		h.ok(h.c.batchAnswered(tp0, 1, nil))
		require.NoError(t, h.c.commit())
		req := h.expect(txnReqEndTxn)
		require.Equal(t, protocol.TxnProducer{TransactionalID: "tx", ProducerID: 8, Epoch: 0}, req.producer)
	}
	// The decision: 4.0 (Produce v12) accepts any first sequence of a
	// transaction on a partition, 4.1+ (v13+) only 0.
	require.True(t, rearmGateAtTxnBump(12))
	require.False(t, rearmGateAtTxnBump(13))
	require.False(t, rearmGateAtTxnBump(14))
}

// TestTxnV1KeepsEpochAcrossTransactions: version 1 commits and clean
// aborts do not renumber; an abort after a failed record bumps the epoch
// (InitProducerId with the current id and epoch) before the next begin.
func TestTxnV1KeepsEpochAcrossTransactions(t *testing.T) {
	h := newTxnHarness(t, false)
	h.initialized()
	add := func(tps ...protocol.TopicPartition) {
		for _, tp := range tps {
			require.NoError(t, h.c.recordQueued(tp))
		}
		h.expect(txnReqAddPartitions)
		var res []protocol.PartitionErrorCode
		for _, tp := range tps {
			res = append(res, protocol.PartitionErrorCode{TopicPartition: tp})
		}
		h.ok(h.c.onAddPartitions(res))
	}
	require.NoError(t, h.c.begin(1))
	add(tp0)
	require.NoError(t, h.c.batchSent(tp0, 1))
	h.ok(h.c.batchAnswered(tp0, 1, nil))
	require.NoError(t, h.c.commit())
	h.expect(txnReqEndTxn)
	out := h.ok(h.c.onEndTxn(protocol.EndTxnResult{ProducerID: -1, Epoch: -1}))
	require.False(t, out.renumber)
	require.Equal(t, int16(0), h.c.epoch)

	require.NoError(t, h.c.begin(1))
	add(tp0)
	require.NoError(t, h.c.batchSent(tp0, 1))
	h.ok(h.c.batchAnswered(tp0, 1, errors.New("OUT_OF_ORDER_SEQUENCE_NUMBER")))
	_, err := h.c.abort()
	require.NoError(t, err)
	h.expect(txnReqEndTxn)
	out = h.ok(h.c.onEndTxn(protocol.EndTxnResult{ProducerID: -1, Epoch: -1}))
	require.Empty(t, out.done, "the abort completes after the bump")
	require.Equal(t, txnAborting, h.c.state)
	req := h.expect(txnReqInitProducerID)
	require.Equal(t, protocol.TxnProducer{TransactionalID: "tx", ProducerID: 7, Epoch: 0}, req.producer)
	out = h.ok(h.c.onInit(protocol.InitTxnResult{ProducerID: 7, Epoch: 1}))
	require.Equal(t, []txnDone{{txnOpAbort, nil}}, out.done)
	require.True(t, out.renumber)
	require.True(t, out.rearmGate)
	require.Equal(t, txnReady, h.c.state)
}

// TestTxnV1ThenV2BumpsFirst: the first version 2 transaction after
// version 1 ones starts on a fresh epoch: nothing is sent before the bump.
func TestTxnV1ThenV2BumpsFirst(t *testing.T) {
	h := newTxnHarness(t, false)
	h.initialized()
	require.NoError(t, h.c.begin(1))
	require.NoError(t, h.c.commit())
	_, _ = h.c.next()
	require.NoError(t, h.c.begin(2))
	require.NoError(t, h.c.recordQueued(tp0))
	require.False(t, h.c.maySend(tp0))
	h.expect(txnReqInitProducerID)
	require.False(t, h.c.maySend(tp0))
	out := h.ok(h.c.onInit(protocol.InitTxnResult{ProducerID: 7, Epoch: 1}))
	require.True(t, out.renumber)
	require.Empty(t, out.done)
	require.True(t, h.c.maySend(tp0))
}

// TestTxnRetriableAnswers: NOT_COORDINATOR and COORDINATOR_NOT_AVAILABLE
// find the coordinator again, then repeat the request; load in progress
// and CONCURRENT_TRANSACTIONS repeat it after a growing backoff; a lost
// answer finds the coordinator again.
func TestTxnRetriableAnswers(t *testing.T) {
	for _, tc := range []struct {
		code   int16
		refind bool
	}{
		{kerr.NotCoordinator.Code, true},
		{kerr.CoordinatorNotAvailable.Code, true},
		{kerr.CoordinatorLoadInProgress.Code, false},
		{kerr.ConcurrentTransactions.Code, false},
	} {
		h := newTxnHarness(t, false)
		require.NoError(t, h.c.initTransactions())
		h.found()
		h.expect(txnReqInitProducerID)
		out := h.ok(h.c.onInit(protocol.InitTxnResult{ErrorCode: tc.code, ProducerID: -1, Epoch: -1}))
		require.True(t, out.backoff)
		require.Equal(t, 1, out.attempt)
		if tc.refind {
			h.found()
		}
		h.expect(txnReqInitProducerID)
		out = h.ok(h.c.onInit(protocol.InitTxnResult{ErrorCode: tc.code, ProducerID: -1, Epoch: -1}))
		require.Equal(t, 2, out.attempt, "backoff grows")
		if tc.refind {
			h.found()
		}
		h.expect(txnReqInitProducerID)
		h.ok(h.c.onInit(protocol.InitTxnResult{ProducerID: 7}))
		require.Equal(t, txnReady, h.c.state)

		require.NoError(t, h.c.begin(1))
		require.NoError(t, h.c.recordQueued(tp0))
		h.expect(txnReqAddPartitions)
		h.ok(h.c.onAddPartitions([]protocol.PartitionErrorCode{{TopicPartition: tp0, ErrorCode: tc.code}}))
		require.False(t, h.c.maySend(tp0))
		if tc.refind {
			h.found()
		}
		h.expect(txnReqAddPartitions)
		h.ok(h.c.onAddPartitions([]protocol.PartitionErrorCode{{TopicPartition: tp0}}))
		require.True(t, h.c.maySend(tp0))
	}
	h := newTxnHarness(t, false)
	require.NoError(t, h.c.initTransactions())
	h.found()
	h.expect(txnReqInitProducerID)
	out := h.ok(h.c.transportFailed(txnReqInitProducerID, true))
	require.True(t, out.backoff)
	h.found()
	h.expect(txnReqInitProducerID)
	_, err := h.c.transportFailed(txnReqEndTxn, true)
	require.ErrorIs(t, err, errTxnBug, "an answer to a request not in flight")
}

// TestTxnFencedIsTerminal: PRODUCER_FENCED (and INVALID_PRODUCER_EPOCH) on
// a coordinator request fails the call with the fenced class; afterwards
// every call gets that error.
func TestTxnFencedIsTerminal(t *testing.T) {
	for _, code := range []int16{kerr.ProducerFenced.Code, kerr.InvalidProducerEpoch.Code} {
		h := newTxnHarness(t, false)
		h.initialized()
		require.NoError(t, h.c.begin(2))
		h.sent(tp0, 1)
		h.ok(h.c.batchAnswered(tp0, 1, nil))
		require.NoError(t, h.c.commit())
		h.expect(txnReqEndTxn)
		out := h.ok(h.c.onEndTxn(protocol.EndTxnResult{ErrorCode: code, ProducerID: -1, Epoch: -1}))
		err, ok := doneOp(out, txnOpCommit)
		require.True(t, ok)
		require.ErrorIs(t, err, ErrProducerFenced)
		require.ErrorIs(t, err, kerr.ErrorForCode(code))
		require.NotErrorIs(t, err, ErrCommitUnknown)
		require.Equal(t, txnFenced, h.c.state)
		require.ErrorIs(t, h.c.begin(2), ErrProducerFenced)
		_, err = h.c.abort()
		require.ErrorIs(t, err, ErrProducerFenced)
		require.ErrorIs(t, h.c.initTransactions(), ErrProducerFenced)
		h.idle()
	}
}

// TestTxnCommitOutcomeUnknown: after an EndTxn(commit) whose answer was
// lost, or answered NOT_COORDINATOR or COORDINATOR_NOT_AVAILABLE (Kafka
// answers them also when the commit was written to its log and the
// coordinator moved, or the write's replication timed out, before it
// answered), a refusal cannot tell whether the commit happened: the
// commit fails with the unknown-outcome class and the producer must
// initialize again. After an answer that says nothing was done
// (COORDINATOR_LOAD_IN_PROGRESS, CONCURRENT_TRANSACTIONS), or none, the
// same refusal is fatal.
func TestTxnCommitOutcomeUnknown(t *testing.T) {
	const lostAnswer = -2
	for _, first := range []int16{lostAnswer, kerr.NotCoordinator.Code, kerr.CoordinatorNotAvailable.Code,
		kerr.CoordinatorLoadInProgress.Code, kerr.ConcurrentTransactions.Code, 0} {
		lost := first == lostAnswer || first == kerr.NotCoordinator.Code || first == kerr.CoordinatorNotAvailable.Code
		h := newTxnHarness(t, false)
		h.initialized()
		require.NoError(t, h.c.begin(2))
		h.sent(tp0, 1)
		h.ok(h.c.batchAnswered(tp0, 1, nil))
		require.NoError(t, h.c.commit())
		h.expect(txnReqEndTxn)
		switch first {
		case lostAnswer:
			out := h.ok(h.c.transportFailed(txnReqEndTxn, true))
			require.True(t, out.backoff)
			h.found()
			h.expect(txnReqEndTxn)
		case 0:
		default:
			out := h.ok(h.c.onEndTxn(protocol.EndTxnResult{ErrorCode: first, ProducerID: -1, Epoch: -1}))
			require.True(t, out.backoff, "%v is retried", kerr.ErrorForCode(first))
			require.Empty(t, out.done)
			if first != kerr.CoordinatorLoadInProgress.Code && first != kerr.ConcurrentTransactions.Code {
				h.found()
			}
			h.expect(txnReqEndTxn)
		}
		out := h.ok(h.c.onEndTxn(protocol.EndTxnResult{ErrorCode: kerr.InvalidTxnState.Code, ProducerID: -1, Epoch: -1}))
		err, ok := doneOp(out, txnOpCommit)
		require.True(t, ok)
		require.ErrorIs(t, err, kerr.InvalidTxnState)
		if !lost {
			require.ErrorIs(t, err, ErrTransactionFatal)
			require.NotErrorIs(t, err, ErrCommitUnknown)
			require.Equal(t, txnFatalError, h.c.state)
			continue
		}
		require.ErrorIs(t, err, ErrCommitUnknown)
		require.Equal(t, txnUninitialized, h.c.state)
		require.NoError(t, h.c.initTransactions())
		h.found()
		req := h.expect(txnReqEndTxn)
		require.False(t, req.commit, "the re-init aborts what may be open first")
		h.ok(h.c.onEndTxn(protocol.EndTxnResult{ErrorCode: kerr.InvalidTxnState.Code, ProducerID: -1, Epoch: -1}))
		req = h.expect(txnReqInitProducerID)
		require.Equal(t, int64(7), req.producer.ProducerID, "the re-init names the current id, so a fence is seen")
	}
}

// TestTxnReinitAbortsFirst: after ErrCommitUnknown the re-init sends
// EndTxn(abort) with the transaction's id, epoch and version, then
// InitProducerId: with the current pair after success or INVALID_TXN_STATE
// (under version 2 the pair the abort answered), without an id after
// INVALID_PRODUCER_ID_MAPPING; CONCURRENT_TRANSACTIONS sends the abort
// again; PRODUCER_FENCED and INVALID_PRODUCER_EPOCH fail the init as
// fenced.
func TestTxnReinitAbortsFirst(t *testing.T) {
	type answer struct {
		code      int16
		id        int64
		epoch     int16
		wantID    int64 // the InitProducerId's pair; wantID -2: fenced
		wantEpoch int16
	}
	for _, tv := range []int{1, 2} {
		for _, a := range []answer{
			{0, -1, -1, 7, 0},
			{kerr.InvalidTxnState.Code, -1, -1, 7, 0},
			{kerr.InvalidProducerIDMapping.Code, -1, -1, -1, -1},
			{kerr.ProducerFenced.Code, -1, -1, -2, 0},
			{kerr.InvalidProducerEpoch.Code, -1, -1, -2, 0},
		} {
			if tv == 2 && a.code == 0 {
				a.id, a.epoch, a.wantEpoch = 7, 1, 1 // the abort bumped the epoch
			}
			h := newTxnHarness(t, false)
			h.initialized()
			require.NoError(t, h.c.begin(tv))
			if tv == 1 {
				require.NoError(t, h.c.recordQueued(tp0))
				h.expect(txnReqAddPartitions)
				h.ok(h.c.onAddPartitions([]protocol.PartitionErrorCode{{TopicPartition: tp0}}))
				require.NoError(t, h.c.batchSent(tp0, 1))
			} else {
				h.sent(tp0, 1)
			}
			h.ok(h.c.batchAnswered(tp0, 1, nil))
			require.NoError(t, h.c.commit())
			h.expect(txnReqEndTxn)
			h.ok(h.c.transportFailed(txnReqEndTxn, true))
			h.found()
			h.expect(txnReqEndTxn)
			h.ok(h.c.onEndTxn(protocol.EndTxnResult{ErrorCode: kerr.InvalidTxnState.Code, ProducerID: -1, Epoch: -1}))
			require.Equal(t, txnUninitialized, h.c.state)
			require.NoError(t, h.c.initTransactions())
			h.found()
			req := h.expect(txnReqEndTxn)
			require.False(t, req.commit)
			require.Equal(t, tv, req.tv)
			require.Equal(t, protocol.TxnProducer{TransactionalID: "tx", ProducerID: 7, Epoch: 0}, req.producer)
			out := h.ok(h.c.onEndTxn(protocol.EndTxnResult{ErrorCode: kerr.ConcurrentTransactions.Code, ProducerID: -1, Epoch: -1}))
			require.True(t, out.backoff)
			h.expect(txnReqEndTxn)
			out = h.ok(h.c.onEndTxn(protocol.EndTxnResult{ErrorCode: a.code, ProducerID: a.id, Epoch: a.epoch}))
			if a.wantID == -2 {
				err, ok := doneOp(out, txnOpInit)
				require.True(t, ok, "tv%d code %d", tv, a.code)
				require.ErrorIs(t, err, ErrProducerFenced)
				require.Equal(t, txnFenced, h.c.state)
				continue
			}
			require.Empty(t, out.done)
			req = h.expect(txnReqInitProducerID)
			require.Equal(t, protocol.TxnProducer{TransactionalID: "tx", ProducerID: a.wantID, Epoch: a.wantEpoch}, req.producer, "tv%d code %d", tv, a.code)
			h.ok(h.c.onInit(protocol.InitTxnResult{ProducerID: 7, Epoch: 5}))
			require.Equal(t, txnReady, h.c.state)
		}
	}
}

// TestTxnSendOffsets: version 1 adds the group's offsets partition
// (AddOffsetsToTxn) before TxnOffsetCommit; version 2 sends
// TxnOffsetCommit alone; both at the group's coordinator, found first. A
// transaction with offsets only is ended with EndTxn.
func TestTxnSendOffsets(t *testing.T) {
	g := protocol.GroupMetadata{GroupID: "g", Generation: 3, MemberID: "m"}
	offs := []protocol.TxnOffset{{TopicPartition: tp0, Offset: 10, LeaderEpoch: -1}}
	for _, tv := range []int{1, 2} {
		h := newTxnHarness(t, false)
		h.initialized()
		require.NoError(t, h.c.begin(tv))
		require.NoError(t, h.c.sendOffsets(g, offs))
		req := h.expect(txnReqFindCoordinator)
		require.Equal(t, protocol.CoordinatorGroup, req.keyType)
		require.Equal(t, "g", req.key)
		h.ok(h.c.onCoordinator(protocol.CoordinatorResult{NodeID: 2, Addr: "b:2"}))
		if tv == 1 {
			req = h.expect(txnReqAddOffsets)
			require.Equal(t, g, req.group)
			h.ok(h.c.onAddOffsets(0))
		}
		req = h.expect(txnReqTxnOffsetCommit)
		require.Equal(t, tv, req.tv)
		require.Equal(t, g, req.group)
		require.Equal(t, offs, req.offsets)
		out := h.ok(h.c.onTxnOffsetCommit([]protocol.PartitionErrorCode{{TopicPartition: tp0}}))
		require.Equal(t, []txnDone{{txnOpSendOffsets, nil}}, out.done)
		require.NoError(t, h.c.commit())
		req = h.expect(txnReqEndTxn)
		require.True(t, req.commit)
	}
}

// TestTxnSendOffsetsFencedMember: a consumer that lost its membership
// (KIP-447) makes the transaction abortable, not the producer fenced; a
// NOT_COORDINATOR from the group coordinator finds it again.
func TestTxnSendOffsetsFencedMember(t *testing.T) {
	for _, code := range []int16{kerr.IllegalGeneration.Code, kerr.UnknownMemberID.Code, kerr.FencedInstanceID.Code} {
		h := newTxnHarness(t, false)
		h.initialized()
		require.NoError(t, h.c.begin(2))
		require.NoError(t, h.c.sendOffsets(protocol.GroupMetadata{GroupID: "g"}, []protocol.TxnOffset{{TopicPartition: tp0}}))
		h.expect(txnReqFindCoordinator)
		h.ok(h.c.onCoordinator(protocol.CoordinatorResult{NodeID: 2, Addr: "b:2"}))
		h.expect(txnReqTxnOffsetCommit)
		h.ok(h.c.onTxnOffsetCommit([]protocol.PartitionErrorCode{{TopicPartition: tp0, ErrorCode: kerr.NotCoordinator.Code}}))
		req := h.expect(txnReqFindCoordinator)
		require.Equal(t, "g", req.key, "the group's coordinator, not the transaction's")
		h.ok(h.c.onCoordinator(protocol.CoordinatorResult{NodeID: 3, Addr: "b:3"}))
		h.expect(txnReqTxnOffsetCommit)
		out := h.ok(h.c.onTxnOffsetCommit([]protocol.PartitionErrorCode{{TopicPartition: tp0, ErrorCode: code}}))
		err, ok := doneOp(out, txnOpSendOffsets)
		require.True(t, ok)
		require.ErrorIs(t, err, ErrTransactionAbortable)
		require.ErrorIs(t, err, kerr.ErrorForCode(code))
		require.Equal(t, txnAbortableError, h.c.state)
		_, err = h.c.abort()
		require.NoError(t, err)
		h.expect(txnReqEndTxn) // TxnOffsetCommit v5 may have added the group
	}
}

// TestTxnAbortFailsQueuedOffsets: offsets not yet committed when the
// transaction aborts fail with ErrTransactionAborted.
func TestTxnAbortFailsQueuedOffsets(t *testing.T) {
	h := newTxnHarness(t, false)
	h.initialized()
	require.NoError(t, h.c.begin(1))
	require.NoError(t, h.c.sendOffsets(protocol.GroupMetadata{GroupID: "g"}, nil))
	out, err := h.c.abort()
	require.NoError(t, err)
	require.Len(t, out.done, 1)
	require.Equal(t, txnOpSendOffsets, out.done[0].op)
	require.ErrorIs(t, out.done[0].err, ErrTransactionAborted)
	_, out = h.c.next()
	require.Equal(t, []txnDone{{txnOpAbort, nil}}, out.done)
}

// TestTxnAbortableEndTxnCommit: TRANSACTION_ABORTABLE on EndTxn(commit)
// leaves only abort; on EndTxn(abort) it is fatal (no abort loop).
func TestTxnAbortableEndTxnCommit(t *testing.T) {
	h := newTxnHarness(t, false)
	h.initialized()
	require.NoError(t, h.c.begin(2))
	h.sent(tp0, 1)
	h.ok(h.c.batchAnswered(tp0, 1, nil))
	require.NoError(t, h.c.commit())
	h.expect(txnReqEndTxn)
	out := h.ok(h.c.onEndTxn(protocol.EndTxnResult{ErrorCode: kerr.TransactionAbortable.Code, ProducerID: -1, Epoch: -1}))
	err, _ := doneOp(out, txnOpCommit)
	require.ErrorIs(t, err, ErrTransactionAbortable)
	require.Equal(t, txnAbortableError, h.c.state)
	_, err = h.c.abort()
	require.NoError(t, err)
	h.expect(txnReqEndTxn)
	out = h.ok(h.c.onEndTxn(protocol.EndTxnResult{ErrorCode: kerr.TransactionAbortable.Code, ProducerID: -1, Epoch: -1}))
	err, _ = doneOp(out, txnOpAbort)
	require.ErrorIs(t, err, ErrTransactionFatal)
	require.Equal(t, txnFatalError, h.c.state)
}

// TestJudgeTxn spot-checks the error classes per request (Java's
// TransactionManager handlers, KIP-1050).
func TestJudgeTxn(t *testing.T) {
	for _, tc := range []struct {
		api      txnAPI
		code     int16
		aborting bool
		canBump  bool
		want     txnVerdict
	}{
		{txnAPIEndTxn, 0, false, true, txnvOK},
		{txnAPIEndTxn, kerr.NotCoordinator.Code, false, true, txnvRefind},
		{txnAPIInitProducerID, kerr.CoordinatorNotAvailable.Code, false, true, txnvRefind},
		{txnAPIInitProducerID, kerr.CoordinatorLoadInProgress.Code, false, true, txnvRetry},
		{txnAPIInitProducerID, kerr.ConcurrentTransactions.Code, false, true, txnvRetry},
		{txnAPIInitProducerID, kerr.TransactionalIDAuthorizationFailed.Code, false, true, txnvFatal},
		{txnAPIInitProducerID, kerr.ClusterAuthorizationFailed.Code, false, true, txnvFatal},
		{txnAPIInitProducerID, kerr.InvalidTransactionTimeout.Code, false, true, txnvFatal},
		{txnAPIInitProducerID, kerr.ProducerFenced.Code, false, true, txnvFenced},
		{txnAPIAddPartitions, kerr.InvalidProducerEpoch.Code, false, true, txnvFenced},
		{txnAPIAddPartitions, kerr.TopicAuthorizationFailed.Code, false, true, txnvAbortable},
		{txnAPIAddPartitions, kerr.OperationNotAttempted.Code, false, true, txnvSkip},
		{txnAPIAddPartitions, kerr.UnknownTopicOrPartition.Code, false, true, txnvRetry},
		{txnAPIAddPartitions, kerr.InvalidTxnState.Code, false, true, txnvFatal},
		{txnAPIAddPartitions, kerr.InvalidProducerIDMapping.Code, false, true, txnvFatal},
		{txnAPIAddPartitions, kerr.UnknownProducerID.Code, false, true, txnvAbortable},
		{txnAPIAddPartitions, kerr.UnknownProducerID.Code, false, false, txnvFatal},
		{txnAPIAddOffsets, kerr.GroupAuthorizationFailed.Code, false, true, txnvAbortable},
		{txnAPIAddOffsets, kerr.TopicAuthorizationFailed.Code, false, true, txnvFatal},
		{txnAPITxnOffsetCommit, kerr.IllegalGeneration.Code, false, true, txnvAbortable},
		{txnAPITxnOffsetCommit, kerr.RequestTimedOut.Code, false, true, txnvRefind},
		{txnAPIEndTxn, kerr.IllegalGeneration.Code, false, true, txnvFatal},
		{txnAPIEndTxn, kerr.TransactionAbortable.Code, false, true, txnvAbortable},
		{txnAPIEndTxn, kerr.TransactionAbortable.Code, true, true, txnvFatal},
		{txnAPIEndTxn, kerr.UnknownServerError.Code, false, true, txnvFatal},
		{txnAPIFindCoordinator, kerr.TransactionalIDAuthorizationFailed.Code, false, true, txnvFatal},
		{txnAPIFindCoordinator, kerr.GroupAuthorizationFailed.Code, false, true, txnvAbortable},
	} {
		require.Equal(t, tc.want, judgeTxn(tc.api, tc.code, tc.aborting, tc.canBump), "%v %v aborting=%v canBump=%v", tc.api, kerr.ErrorForCode(tc.code), tc.aborting, tc.canBump)
	}
	require.Equal(t, "EndTxn", txnAPIEndTxn.String())
	require.Equal(t, "fenced", txnvFenced.String())
	require.Equal(t, "txnAPI(?)", txnAPI(99).String())
	require.Equal(t, "txnVerdict(?)", txnVerdict(99).String())
}
