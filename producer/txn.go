package producer

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/longhaul-kafka/longhaul/protocol"
)

// This file is the transaction manager's pure core (DESIGN.md,
// "Transactions"): it takes events (the application's begin, produce,
// send-offsets, commit and abort; the sender's batches sent and
// answered; the coordinators' answers) and says what to do next (the one
// transactional request to send, whether a partition's batches may go,
// when sequences restart and the gate re-arms). It does no I/O, starts no
// goroutine and reads no clock, so it is tested by tables of events.

// txnState is the transactional producer's state (Java's
// TransactionManager.State, with fenced apart from fatal).
type txnState uint8

const (
	txnUninitialized txnState = iota
	txnInitializing
	txnReady
	txnInTransaction
	txnCommitting
	txnAborting
	txnAbortableError
	txnFenced
	txnFatalError
	txnStates // the count
)

var txnStateNames = [txnStates]string{
	"uninitialized", "initializing", "ready", "in transaction", "committing",
	"aborting", "abortable error", "fenced", "fatal error",
}

func (s txnState) String() string {
	if s < txnStates {
		return txnStateNames[s]
	}
	return fmt.Sprintf("txnState(%d)", uint8(s))
}

// txnTransitions lists, for each state, the states it may move to. Any
// other move is a bug of the core or its driver.
var txnTransitions = [txnStates][]txnState{
	// Init; after a commit whose outcome is unknown the producer is
	// uninitialized again and must initialize (which first aborts what may
	// be left of the transaction).
	txnUninitialized: {txnInitializing, txnFatalError},
	txnInitializing:  {txnReady, txnAbortableError, txnFenced, txnFatalError},
	txnReady:         {txnInTransaction, txnFatalError},
	txnInTransaction: {txnCommitting, txnAborting, txnAbortableError, txnFenced, txnFatalError},
	// A commit that completes, or fails because a record failed while
	// it waited, or ends unknown.
	txnCommitting: {txnReady, txnAbortableError, txnUninitialized, txnFenced, txnFatalError},
	// An abort that completes (through an epoch bump under version 1
	// when a record failed).
	txnAborting:       {txnReady, txnFenced, txnFatalError},
	txnAbortableError: {txnAborting, txnFenced, txnFatalError},
	txnFenced:         {},
	txnFatalError:     {},
}

// Every error the core reports wraps one of the exported classes
// (transaction.go: ErrTransactionAbortable, ErrProducerFenced,
// ErrTransactionFatal, ErrCommitUnknown, ErrTransactionState,
// ErrTransactionAborted); the cause (a broker error, a record's error) is
// wrapped too.

// errTxnBug is a transition outside txnTransitions; the state did not
// change. A bug found while applying an answer makes the core fatal, so
// it is of that class.
var errTxnBug = fmt.Errorf("%w: transaction state machine bug", ErrTransactionFatal)

// txnError is an error of class (one of the exported classes) with its
// cause.
type txnError struct {
	class error
	msg   string
	cause error
}

func (e *txnError) Error() string {
	if e.cause == nil {
		return e.class.Error() + ": " + e.msg
	}
	return e.class.Error() + ": " + e.msg + ": " + e.cause.Error()
}

func (e *txnError) Unwrap() []error {
	if e.cause == nil {
		return []error{e.class}
	}
	return []error{e.class, e.cause}
}

// txnReqKind is a transactional request the core asks for.
type txnReqKind uint8

const (
	txnReqNone txnReqKind = iota
	txnReqFindCoordinator
	txnReqInitProducerID
	txnReqAddPartitions
	txnReqAddOffsets
	txnReqTxnOffsetCommit
	txnReqEndTxn
)

// api names the request kind for logs and errors.
func (k txnReqKind) api() txnAPI {
	switch k {
	case txnReqFindCoordinator:
		return txnAPIFindCoordinator
	case txnReqInitProducerID:
		return txnAPIInitProducerID
	case txnReqAddPartitions:
		return txnAPIAddPartitions
	case txnReqAddOffsets:
		return txnAPIAddOffsets
	case txnReqTxnOffsetCommit:
		return txnAPITxnOffsetCommit
	case txnReqEndTxn:
		return txnAPIEndTxn
	}
	return txnAPI(255)
}

// txnRequest is the one transactional request to send now.
type txnRequest struct {
	kind txnReqKind
	// coordinator type and key, for txnReqFindCoordinator.
	keyType int8
	key     string
	// producer is whom the request is for.
	producer protocol.TxnProducer
	// timeoutMs is transaction.timeout.ms (InitProducerId).
	timeoutMs int64
	// tv is the open transaction's version (EndTxn, TxnOffsetCommit).
	tv         int
	partitions []protocol.TopicPartition // AddPartitions
	group      protocol.GroupMetadata    // AddOffsets, TxnOffsetCommit
	offsets    []protocol.TxnOffset      // TxnOffsetCommit
	commit     bool                      // EndTxn
}

// txnOp is an application call the core completes.
type txnOp uint8

const (
	txnOpNone txnOp = iota
	txnOpInit
	txnOpSendOffsets
	txnOpCommit
	txnOpAbort
)

// txnOutcome is what an answer asks of the driver.
type txnOutcome struct {
	// backoff: wait retry.backoff.ms (growing with attempt) before
	// asking next again.
	backoff bool
	attempt int
	// renumber: the producer id or epoch changed; every partition's
	// sequences restart at 0 (positions and learned windows stay).
	renumber bool
	// rearmGate: with renumber, re-arm every partition's first-batch
	// gate.
	rearmGate bool
	// done lists the application calls this event completed, each with
	// its error (nil for success).
	done []txnDone
}

// txnDone is one application call completed.
type txnDone struct {
	op  txnOp
	err error
}

func (o *txnOutcome) complete(op txnOp, err error) { o.done = append(o.done, txnDone{op, err}) }

// txnCounts are a partition's records in the open transaction.
type txnCounts struct {
	queued   int  // accepted by Produce, not sent
	inflight int  // sent, not answered
	added    bool // version 1: AddPartitionsToTxn succeeded
}

// txnOffsetsReq is one SendOffsets call.
type txnOffsetsReq struct {
	group   protocol.GroupMetadata
	offsets []protocol.TxnOffset
	added   bool // version 1: AddOffsetsToTxn succeeded
}

// txnCore is the transaction manager's state machine. Not safe for
// concurrent use: the sender goroutine owns it.
type txnCore struct {
	state   txnState
	txnID   string
	timeout int64 // transaction.timeout.ms, only passed along
	// rearmGate says whether the version 2 epoch bump at every EndTxn
	// re-arms the first-batch gate ([rearmGateAtTxnBump]).
	rearmGate bool
	// canBump: InitProducerId v3+ or version 2 (judgeTxn).
	canBump bool

	id    int64
	epoch int16

	// The open transaction.
	tv    int
	parts map[protocol.TopicPartition]*txnCounts
	// adding is the AddPartitionsToTxn in flight, nil if none.
	adding  []protocol.TopicPartition
	offsets []*txnOffsetsReq
	// started: EndTxn must be sent to end the transaction. Version 2:
	// a batch or offsets were sent (the broker may have added the
	// partition or group even if the answer was an error). Version 1:
	// a partition or the offsets were added.
	started bool
	// err is the first error of the transaction (abortable state).
	err error
	// bumpAfterAbort: version 1, a record failed: its partition's
	// sequence is unknown, so the abort ends with an epoch bump.
	bumpAfterAbort bool
	// needBump: an InitProducerId with the current id and epoch is due
	// before anything else (after a version 1 abort, or before the first
	// version 2 transaction after version 1 ones).
	needBump bool
	// endMaybeApplied: an EndTxn(commit) was written and its answer
	// lost, or answered NOT_COORDINATOR or COORDINATOR_NOT_AVAILABLE
	// (which Kafka answers also after applying it); a later error cannot
	// tell whether it was applied.
	endMaybeApplied bool
	lastTV          int
	// abortFirst: the commit's outcome is unknown, so its transaction may
	// still be open at the coordinator; the re-init first aborts it with
	// EndTxn(abort) under the same id, epoch and version. An
	// InitProducerId meeting an open transaction would fence it and, under
	// version 1, forget the epoch it was sent with (Kafka's fence sets the
	// last epoch to none), so its retry would be refused as fenced.
	abortFirst bool

	needCoordinator bool
	// groupCoords holds the address of each group's coordinator found,
	// by group id: a SendOffsets call for a group whose coordinator is
	// kept is sent to it without a FindCoordinator, in this transaction
	// and the next ones. An entry is dropped
	// when its coordinator answers NOT_COORDINATOR or
	// COORDINATOR_NOT_AVAILABLE (or REQUEST_TIMED_OUT, judgeTxn), or its
	// TxnOffsetCommit gets no answer; COORDINATOR_LOAD_IN_PROGRESS keeps
	// it (that coordinator is the group's, still loading it), as for the
	// transaction coordinator.
	groupCoords map[string]string
	// finding is the SendOffsets call whose group coordinator the
	// FindCoordinator in flight looks for; nil: the transaction's.
	finding  *txnOffsetsReq
	inflight txnReqKind
	attempt  int
}

// rearmGateAtTxnBump reports whether the epoch bump that ends every
// transaction under version 2 must re-arm the first-batch gate on a
// leader that negotiated Produce version produceVersion. Kafka 4.1+
// (Produce v13+) refuses a transaction's first batch on a partition
// unless its sequence is 0, which is the hole the gate
// closes; 4.0 (Produce v12) accepts any first sequence there, as for a
// producer it has no state of.
func rearmGateAtTxnBump(produceVersion int16) bool { return produceVersion < 13 }

func newTxnCore(txnID string, timeoutMs int64, rearmGate, canBump bool) *txnCore {
	return &txnCore{txnID: txnID, timeout: timeoutMs, rearmGate: rearmGate, canBump: canBump, id: -1, epoch: -1, needCoordinator: true}
}

// to moves to next if the table allows it.
func (c *txnCore) to(next txnState) error {
	for _, s := range txnTransitions[c.state] {
		if s == next {
			c.state = next
			return nil
		}
	}
	return &txnError{class: errTxnBug, msg: fmt.Sprintf("%v -> %v", c.state, next)}
}

// must is to for transitions the caller checked; a bug makes the core
// fatal, as Java poisons its manager when the sender goroutine finds one.
func (c *txnCore) must(next txnState) error {
	if err := c.to(next); err != nil {
		c.state = txnFatalError
		c.err = err
		return err
	}
	return nil
}

func (c *txnCore) producer() protocol.TxnProducer {
	return protocol.TxnProducer{TransactionalID: c.txnID, ProducerID: c.id, Epoch: c.epoch}
}

// stateErr is the error of a call the state refuses: the stored error in
// the error states, ErrTransactionState otherwise.
func (c *txnCore) stateErr(call string) error {
	switch c.state {
	case txnAbortableError, txnFenced, txnFatalError:
		return c.err
	}
	return &txnError{class: ErrTransactionState, msg: fmt.Sprintf("%s while %v", call, c.state)}
}

// initTransactions starts initializing: InitProducerId is next.
func (c *txnCore) initTransactions() error {
	if c.state != txnUninitialized {
		return c.stateErr("init")
	}
	return c.to(txnInitializing)
}

// begin opens a transaction of version tv (1 or 2), chosen by the
// driver from the cluster's finalized features at this moment; it stays
// for the whole transaction.
func (c *txnCore) begin(tv int) error {
	if c.state != txnReady {
		return c.stateErr("begin")
	}
	if tv != 1 && tv != 2 {
		return &txnError{class: ErrTransactionState, msg: fmt.Sprintf("transaction version %d", tv)}
	}
	if err := c.to(txnInTransaction); err != nil {
		return err
	}
	// A version 1 epoch may have added partitions the coordinator still
	// counts; the first version 2 transaction starts on a fresh epoch
	// (Java does the same).
	if c.lastTV == 1 && tv == 2 {
		c.needBump = true
	}
	c.tv, c.lastTV = tv, tv
	c.parts = map[protocol.TopicPartition]*txnCounts{}
	c.offsets, c.adding = nil, nil
	c.started, c.err, c.bumpAfterAbort, c.endMaybeApplied = false, nil, false, false
	return nil
}

// recordQueued records that Produce accepted a record for tp. Outside a transaction
// it is refused (a transactional producer writes only inside one); in
// the abortable state with the transaction's error.
func (c *txnCore) recordQueued(tp protocol.TopicPartition) error {
	if c.state != txnInTransaction {
		return c.stateErr("produce")
	}
	p := c.parts[tp]
	if p == nil {
		p = &txnCounts{}
		c.parts[tp] = p
	}
	p.queued++
	return nil
}

// batchQueued records that the sender took a batch of n records of tp
// (Produce accepted them, and only inside a transaction: the driver
// refuses Produce elsewhere). It counts in every state, so that what the
// sender holds and what the core counts never differ: a batch taken while
// the transaction can no longer send is dropped by the abort, failed
// with the state's error (unsentFailed).
func (c *txnCore) batchQueued(tp protocol.TopicPartition, n int) {
	if c.parts == nil {
		c.parts = map[protocol.TopicPartition]*txnCounts{}
	}
	p := c.parts[tp]
	if p == nil {
		p = &txnCounts{}
		c.parts[tp] = p
	}
	p.queued += n
}

// unsentFailed records that n queued records of tp failed before they
// were sent (delivery.timeout.ms, a withdrawal, dropped by an abort):
// inside an open or committing transaction that makes it abort-only, as
// any failed record does.
func (c *txnCore) unsentFailed(tp protocol.TopicPartition, n int, err error) (txnOutcome, error) {
	p := c.parts[tp]
	if p == nil || p.queued < n {
		return txnOutcome{}, &txnError{class: errTxnBug, msg: fmt.Sprintf("%d unsent records of %s/%d failed, not queued", n, tp.Topic, tp.Partition)}
	}
	p.queued -= n
	return c.fail(&txnError{class: ErrTransactionAbortable, msg: fmt.Sprintf("record of %s/%d failed before it was sent", tp.Topic, tp.Partition), cause: err}), nil
}

// maySend reports whether a batch of tp may be sent now: while the
// transaction is open or committing, once tp is in the transaction
// (version 1: AddPartitionsToTxn answered; version 2: Produce adds it),
// and no epoch bump is due.
func (c *txnCore) maySend(tp protocol.TopicPartition) bool {
	if c.state != txnInTransaction && c.state != txnCommitting {
		return false
	}
	if c.needBump || c.inflight == txnReqInitProducerID {
		return false
	}
	p := c.parts[tp]
	return p != nil && (c.tv == 2 || p.added)
}

// batchSent records that n records of tp went out in a batch maySend
// allowed.
func (c *txnCore) batchSent(tp protocol.TopicPartition, n int) error {
	p := c.parts[tp]
	if p == nil || p.queued < n || !c.maySend(tp) {
		return &txnError{class: errTxnBug, msg: fmt.Sprintf("%d records of %s/%d sent while %v", n, tp.Topic, tp.Partition, c.state)}
	}
	p.queued -= n
	p.inflight += n
	if c.tv == 2 {
		c.started = true
	}
	return nil
}

// batchAnswered records that n sent records of tp are answered; err is nil when
// they were written, else why not (including a fate that cannot be
// known). Any failure makes the transaction abort-only with the first
// error, and a commit waiting for them fails with it.
func (c *txnCore) batchAnswered(tp protocol.TopicPartition, n int, err error) (txnOutcome, error) {
	p := c.parts[tp]
	if p == nil || p.inflight < n {
		return txnOutcome{}, &txnError{class: errTxnBug, msg: fmt.Sprintf("%d records of %s/%d answered, not in flight", n, tp.Topic, tp.Partition)}
	}
	p.inflight -= n
	if err == nil {
		return txnOutcome{}, nil
	}
	if c.tv == 1 {
		c.bumpAfterAbort = true
	}
	if errors.Is(err, kerr.ProducerFenced) {
		// The partition's leader knows a newer epoch of our id: another
		// producer initialized it.
		return c.fatal(txnFenced, ErrProducerFenced, txnAPIProduce, err), nil
	}
	return c.fail(&txnError{class: ErrTransactionAbortable, msg: fmt.Sprintf("record of %s/%d failed", tp.Topic, tp.Partition), cause: err}), nil
}

// fail puts the transaction in the abortable state with err unless it
// has an error already; a commit waiting fails with it.
func (c *txnCore) fail(err error) txnOutcome {
	var out txnOutcome
	switch c.state {
	case txnInTransaction, txnCommitting:
		if c.state == txnCommitting {
			out.complete(txnOpCommit, err)
		}
		c.err = err
		c.failOffsets(&out, err)
		c.must(txnAbortableError)
	}
	return out
}

// failOffsets fails every queued SendOffsets call with err.
func (c *txnCore) failOffsets(out *txnOutcome, err error) {
	for range c.offsets {
		out.complete(txnOpSendOffsets, err)
	}
	c.offsets = nil
}

// sendOffsets queues offsets of g's consumer to commit with the
// transaction.
func (c *txnCore) sendOffsets(g protocol.GroupMetadata, offsets []protocol.TxnOffset) error {
	if c.state != txnInTransaction {
		return c.stateErr("send offsets")
	}
	c.offsets = append(c.offsets, &txnOffsetsReq{group: g, offsets: offsets})
	return nil
}

// commit asks to commit: EndTxn(commit) goes once every record is
// answered. Refused with the transaction's error after any failure.
func (c *txnCore) commit() error {
	if c.state != txnInTransaction {
		return c.stateErr("commit")
	}
	return c.to(txnCommitting)
}

// abort asks to abort. Records not sent yet are dropped (the driver fails
// them with ErrTransactionAborted and reports unsentDropped); sent ones are waited
// for; then EndTxn(abort), if anything reached the coordinator. Queued
// SendOffsets calls fail with ErrTransactionAborted.
func (c *txnCore) abort() (txnOutcome, error) {
	if c.state != txnInTransaction && c.state != txnAbortableError {
		return txnOutcome{}, c.stateErr("abort")
	}
	var out txnOutcome
	c.failOffsets(&out, &txnError{class: ErrTransactionAborted, msg: "offsets not committed"})
	return out, c.to(txnAborting)
}

// unsent lists the partitions with records an abort drops, and how many.
func (c *txnCore) unsent() map[protocol.TopicPartition]int {
	out := map[protocol.TopicPartition]int{}
	if c.state != txnAborting && c.state != txnAbortableError {
		return out
	}
	for tp, p := range c.parts {
		if p.queued > 0 {
			out[tp] = p.queued
		}
	}
	return out
}

// unsentDropped records that the driver failed n unsent records of tp.
func (c *txnCore) unsentDropped(tp protocol.TopicPartition, n int) error {
	p := c.parts[tp]
	if p == nil || p.queued < n || (c.state != txnAborting && c.state != txnAbortableError) {
		return &txnError{class: errTxnBug, msg: fmt.Sprintf("%d records of %s/%d dropped while %v", n, tp.Topic, tp.Partition, c.state)}
	}
	p.queued -= n
	return nil
}

// allAnswered reports whether no record of the transaction is waiting
// to be sent or answered.
func (c *txnCore) allAnswered() bool {
	for _, p := range c.parts {
		if p.queued > 0 || p.inflight > 0 {
			return false
		}
	}
	return true
}

// next returns the transactional request to send now, if any, and marks
// it in flight: one at a time, in Java's order of priority (coordinator,
// epoch, partitions and offsets, EndTxn). done reports an application call
// completed without a request (a commit or abort of a transaction that
// reached no coordinator).
func (c *txnCore) next() (req txnRequest, done txnOutcome) {
	if c.inflight != txnReqNone {
		return txnRequest{}, txnOutcome{}
	}
	switch c.state {
	case txnInitializing, txnInTransaction, txnCommitting, txnAborting, txnAbortableError:
	default:
		return txnRequest{}, txnOutcome{}
	}
	if c.needCoordinator {
		c.finding = nil
		return c.send(txnRequest{kind: txnReqFindCoordinator, keyType: protocol.CoordinatorTransaction, key: c.txnID}), txnOutcome{}
	}
	if c.state == txnInitializing && c.abortFirst {
		return c.send(txnRequest{kind: txnReqEndTxn, producer: c.producer(), tv: c.tv, commit: false}), txnOutcome{}
	}
	if c.state == txnInitializing || c.needBump {
		return c.send(txnRequest{kind: txnReqInitProducerID, producer: c.producer(), timeoutMs: c.timeout}), txnOutcome{}
	}
	if c.state == txnInTransaction || c.state == txnCommitting {
		if c.tv == 1 {
			var add []protocol.TopicPartition
			for tp, p := range c.parts {
				if !p.added && p.queued > 0 {
					add = append(add, tp)
				}
			}
			if len(add) > 0 {
				c.adding = add
				return c.send(txnRequest{kind: txnReqAddPartitions, producer: c.producer(), partitions: add}), txnOutcome{}
			}
		}
		// SendOffsets calls go one at a time, in call order.
		if len(c.offsets) > 0 {
			o := c.offsets[0]
			if _, known := c.groupCoords[o.group.GroupID]; !known {
				c.finding = o
				return c.send(txnRequest{kind: txnReqFindCoordinator, keyType: protocol.CoordinatorGroup, key: o.group.GroupID}), txnOutcome{}
			}
			if c.tv == 1 && !o.added {
				return c.send(txnRequest{kind: txnReqAddOffsets, producer: c.producer(), group: o.group}), txnOutcome{}
			}
			if c.tv == 2 {
				c.started = true
			}
			return c.send(txnRequest{kind: txnReqTxnOffsetCommit, producer: c.producer(), tv: c.tv, group: o.group, offsets: o.offsets}), txnOutcome{}
		}
	}
	if c.state != txnCommitting && c.state != txnAborting {
		return txnRequest{}, txnOutcome{}
	}
	if !c.allAnswered() {
		return txnRequest{}, txnOutcome{}
	}
	commit := c.state == txnCommitting
	if !c.started {
		// Nothing reached a coordinator: EndTxn would be refused
		// (version 1) and is not needed.
		op := txnOpAbort
		if commit {
			op = txnOpCommit
		}
		c.must(txnReady)
		var out txnOutcome
		out.complete(op, nil)
		return txnRequest{}, out
	}
	return c.send(txnRequest{kind: txnReqEndTxn, producer: c.producer(), tv: c.tv, commit: commit}), txnOutcome{}
}

func (c *txnCore) send(r txnRequest) txnRequest {
	c.inflight = r.kind
	return r
}

// answered clears the request in flight, checking it was kind.
func (c *txnCore) answered(kind txnReqKind) error {
	if c.inflight != kind {
		return &txnError{class: errTxnBug, msg: fmt.Sprintf("answer to request %d while %d is in flight", kind, c.inflight)}
	}
	c.inflight = txnReqNone
	return nil
}

// retry is the outcome of an answer that asks to send again.
func (c *txnCore) retry() txnOutcome {
	c.attempt++
	return txnOutcome{backoff: true, attempt: c.attempt}
}

// verdict applies a judged error to the state; the transaction's request
// is kept for a retry.
func (c *txnCore) verdict(api txnAPI, code int16, v txnVerdict, groupRefind *txnOffsetsReq) txnOutcome {
	cause := kerr.ErrorForCode(code)
	switch v {
	case txnvOK, txnvSkip:
		c.attempt = 0
		return txnOutcome{}
	case txnvRetry:
		return c.retry()
	case txnvRefind:
		if groupRefind != nil {
			delete(c.groupCoords, groupRefind.group.GroupID)
		} else {
			c.needCoordinator = true
		}
		return c.retry()
	case txnvAbortable:
		c.attempt = 0
		if c.state == txnInitializing {
			// An init cannot be aborted: there is no transaction.
			return c.fatal(txnFatalError, ErrTransactionFatal, api, cause)
		}
		return c.fail(&txnError{class: ErrTransactionAbortable, msg: api.String(), cause: cause})
	case txnvFenced:
		return c.fatal(txnFenced, ErrProducerFenced, api, cause)
	default:
		return c.fatal(txnFatalError, ErrTransactionFatal, api, cause)
	}
}

// fatal moves to a terminal state, failing the calls in progress. After
// an EndTxn(commit) that may have been applied, the commit's outcome is
// unknown: unless fenced, the producer is uninitialized again, and the
// next init fences whatever is left of the transaction.
func (c *txnCore) fatal(to txnState, class error, api txnAPI, cause error) txnOutcome {
	err := error(&txnError{class: class, msg: api.String(), cause: cause})
	if c.state == txnCommitting && c.endMaybeApplied {
		err = &txnError{class: ErrCommitUnknown, msg: "an earlier EndTxn(commit) may have been applied", cause: err}
		if to == txnFatalError {
			to = txnUninitialized
			c.needCoordinator = true
			c.abortFirst = true
		}
	}
	var out txnOutcome
	if op := c.pendingOp(); op != txnOpNone {
		out.complete(op, err)
	}
	c.failOffsets(&out, err)
	c.err = err
	if to == txnUninitialized {
		c.err = nil
	}
	c.must(to)
	return out
}

// pendingOp is the application call waiting in the current state.
func (c *txnCore) pendingOp() txnOp {
	switch c.state {
	case txnInitializing:
		return txnOpInit
	case txnCommitting:
		return txnOpCommit
	case txnAborting:
		return txnOpAbort
	}
	return txnOpNone
}

// transportFailed records that the request in flight got no answer (connection lost,
// timeout). written is whether the broker may have seen it. Transactional
// requests are safe to repeat (the coordinator answers a repeat of what it
// did), so it is retried at the coordinator found again; an EndTxn(commit)
// that may have been applied is remembered, so that a later refusal is
// reported as an unknown outcome, not as a failure.
func (c *txnCore) transportFailed(kind txnReqKind, written bool) (txnOutcome, error) {
	if err := c.answered(kind); err != nil {
		return txnOutcome{}, err
	}
	switch kind {
	case txnReqEndTxn:
		if written && c.state == txnCommitting {
			c.endMaybeApplied = true
		}
	case txnReqAddPartitions:
		c.adding = nil
	case txnReqTxnOffsetCommit:
		if len(c.offsets) > 0 {
			delete(c.groupCoords, c.offsets[0].group.GroupID)
		}
		return c.retry(), nil
	case txnReqFindCoordinator:
		return c.retry(), nil // still needed
	}
	c.needCoordinator = true
	return c.retry(), nil
}

// groupCoordinator is the address of the coordinator found for group, ""
// if none is kept.
func (c *txnCore) groupCoordinator(group string) string { return c.groupCoords[group] }

// onCoordinator takes the FindCoordinator answer. A group coordinator's
// address is kept in groupCoords; the transaction coordinator's, by the
// driver.
func (c *txnCore) onCoordinator(res protocol.CoordinatorResult) (txnOutcome, error) {
	group := c.finding
	if err := c.answered(txnReqFindCoordinator); err != nil {
		return txnOutcome{}, err
	}
	v := judgeTxn(txnAPIFindCoordinator, res.ErrorCode, false, c.canBump)
	if v == txnvRefind {
		v = txnvRetry // COORDINATOR_NOT_AVAILABLE: ask again
	}
	if v != txnvOK {
		return c.verdict(txnAPIFindCoordinator, res.ErrorCode, v, nil), nil
	}
	// attempt keeps counting: the request the coordinator was looked
	// for has not succeeded yet.
	if group != nil {
		if c.groupCoords == nil {
			c.groupCoords = map[string]string{}
		}
		c.groupCoords[group.group.GroupID] = res.Addr
	} else {
		c.needCoordinator = false
	}
	return txnOutcome{}, nil
}

// onInit takes the InitProducerId answer.
func (c *txnCore) onInit(res protocol.InitTxnResult) (txnOutcome, error) {
	if err := c.answered(txnReqInitProducerID); err != nil {
		return txnOutcome{}, err
	}
	if v := judgeTxn(txnAPIInitProducerID, res.ErrorCode, false, c.canBump); v != txnvOK {
		return c.verdict(txnAPIInitProducerID, res.ErrorCode, v, nil), nil
	}
	c.attempt = 0
	c.id, c.epoch = res.ProducerID, res.Epoch
	out := txnOutcome{renumber: true, rearmGate: true}
	switch {
	case c.state == txnInitializing:
		out.complete(txnOpInit, nil)
		return out, c.must(txnReady)
	case c.state == txnAborting:
		c.needBump = false
		out.complete(txnOpAbort, nil)
		return out, c.must(txnReady)
	default:
		c.needBump = false
		return out, nil
	}
}

// onAddPartitions takes the AddPartitionsToTxn answer.
func (c *txnCore) onAddPartitions(res []protocol.PartitionErrorCode) (txnOutcome, error) {
	if err := c.answered(txnReqAddPartitions); err != nil {
		return txnOutcome{}, err
	}
	asked := c.adding
	c.adding = nil
	worst, worstCode := txnvOK, int16(0)
	for _, r := range res {
		v := judgeTxn(txnAPIAddPartitions, r.ErrorCode, false, c.canBump)
		if v > worst {
			worst, worstCode = v, r.ErrorCode
		}
	}
	if worst == txnvOK || worst == txnvSkip {
		for _, tp := range asked {
			if p := c.parts[tp]; p != nil {
				p.added = true
			}
		}
		c.started = true
		c.attempt = 0
		return txnOutcome{}, nil
	}
	return c.verdict(txnAPIAddPartitions, worstCode, worst, nil), nil
}

// onAddOffsets takes the AddOffsetsToTxn answer for the first queued
// SendOffsets.
func (c *txnCore) onAddOffsets(code int16) (txnOutcome, error) {
	if err := c.answered(txnReqAddOffsets); err != nil {
		return txnOutcome{}, err
	}
	v := judgeTxn(txnAPIAddOffsets, code, false, c.canBump)
	if v != txnvOK {
		return c.verdict(txnAPIAddOffsets, code, v, nil), nil
	}
	c.attempt = 0
	c.started = true // the group is in the transaction, even if the call failed since
	if len(c.offsets) > 0 {
		c.offsets[0].added = true
	}
	return txnOutcome{}, nil
}

// onTxnOffsetCommit takes the TxnOffsetCommit answer for the first queued
// SendOffsets, which it completes.
func (c *txnCore) onTxnOffsetCommit(res []protocol.PartitionErrorCode) (txnOutcome, error) {
	if err := c.answered(txnReqTxnOffsetCommit); err != nil {
		return txnOutcome{}, err
	}
	if len(c.offsets) == 0 {
		return txnOutcome{}, nil // the call failed already (abort)
	}
	o := c.offsets[0]
	worst, worstCode := txnvOK, int16(0)
	for _, r := range res {
		if v := judgeTxn(txnAPITxnOffsetCommit, r.ErrorCode, false, c.canBump); v > worst {
			worst, worstCode = v, r.ErrorCode
		}
	}
	if worst != txnvOK {
		return c.verdict(txnAPITxnOffsetCommit, worstCode, worst, o), nil
	}
	c.attempt = 0
	c.offsets = c.offsets[1:]
	var out txnOutcome
	out.complete(txnOpSendOffsets, nil)
	return out, nil
}

// onEndTxn takes the EndTxn answer.
func (c *txnCore) onEndTxn(res protocol.EndTxnResult) (txnOutcome, error) {
	if err := c.answered(txnReqEndTxn); err != nil {
		return txnOutcome{}, err
	}
	if c.state == txnInitializing {
		return c.onReinitAbort(res), nil
	}
	aborting := c.state == txnAborting
	if !aborting && (res.ErrorCode == kerr.NotCoordinator.Code || res.ErrorCode == kerr.CoordinatorNotAvailable.Code) {
		// Kafka answers these also when the commit was written to its
		// log: the coordinator moved before it answered, or the write's
		// replication timed out. Like a lost answer, a later refusal
		// cannot tell whether the commit happened.
		c.endMaybeApplied = true
	}
	v := judgeTxn(txnAPIEndTxn, res.ErrorCode, aborting, c.canBump)
	if v == txnvAbortable && !aborting {
		// The commit cannot go on; only an abort remains. The commit
		// fails with the coordinator's error.
		err := &txnError{class: ErrTransactionAbortable, msg: "EndTxn(commit)", cause: kerr.ErrorForCode(res.ErrorCode)}
		c.err = err
		c.attempt = 0
		var out txnOutcome
		out.complete(txnOpCommit, err)
		return out, c.must(txnAbortableError)
	}
	if v != txnvOK {
		return c.verdict(txnAPIEndTxn, res.ErrorCode, v, nil), nil
	}
	c.attempt = 0
	op := txnOpCommit
	if aborting {
		op = txnOpAbort
	}
	var out txnOutcome
	out.complete(op, nil)
	if c.tv == 2 {
		// Every version 2 transaction ends on the next epoch (or a new
		// producer id): sequences restart at 0.
		c.id, c.epoch = res.ProducerID, res.Epoch
		out.renumber, out.rearmGate = true, c.rearmGate
	} else if aborting && c.bumpAfterAbort {
		// Version 1 keeps the epoch across transactions; after a failed
		// record the partition's sequence is unknown, so bump it.
		c.needBump = true
		return txnOutcome{}, nil
	}
	return out, c.must(txnReady)
}

// onReinitAbort takes the answer to the EndTxn(abort) a re-init sends
// first (abortFirst). Nothing open (INVALID_TXN_STATE: the commit was
// applied, or no transaction) or aborted: InitProducerId follows with the
// current pair, under version 2 the one the abort answered. An unknown
// producer id: InitProducerId asks for a new one. Fenced: another
// producer holds the id, and its transaction is left alone.
func (c *txnCore) onReinitAbort(res protocol.EndTxnResult) txnOutcome {
	switch res.ErrorCode {
	case 0:
		if c.tv == 2 {
			c.id, c.epoch = res.ProducerID, res.Epoch
		}
	case kerr.InvalidTxnState.Code:
	case kerr.InvalidProducerIDMapping.Code:
		c.id, c.epoch = -1, -1
	default:
		return c.verdict(txnAPIEndTxn, res.ErrorCode, judgeTxn(txnAPIEndTxn, res.ErrorCode, true, c.canBump), nil)
	}
	c.abortFirst = false
	c.attempt = 0
	return txnOutcome{}
}
