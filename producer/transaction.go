package producer

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/longhaul-kafka/longhaul/protocol"
)

// The error classes of a transactional producer (KIP-1050). Every error
// the transactional calls return, except ctx's error (wrapped),
// [ErrInCallback] and [ErrClosed], and every record error caused by the
// transaction, wraps one of them; the cause (the broker's error, a
// record's [*DeliveryError]) is wrapped too, so errors.Is finds both the
// class and the Kafka error (for example kerr.ProducerFenced), and
// errors.As finds the record's DeliveryError.
var (
	// ErrTransactionAbortable: the transaction can only be aborted; after
	// AbortTransaction the next transaction may begin. A record that
	// failed or whose fate is unknown makes the transaction abortable.
	ErrTransactionAbortable = errors.New("producer: transaction must be aborted")
	// ErrProducerFenced: another producer with the same transactional.id
	// took over (or the coordinator fenced this producer's epoch): only
	// Close is left.
	ErrProducerFenced = errors.New("producer: fenced by another producer with the same transactional.id")
	// ErrTransactionFatal: the transactional producer cannot go on (the
	// transactional id is not authorized, the coordinator answered what it
	// never should): Close it.
	ErrTransactionFatal = errors.New("producer: transactional producer failed")
	// ErrCommitUnknown: a commit's answer was lost (or was NOT_COORDINATOR
	// or COORDINATOR_NOT_AVAILABLE, which Kafka answers also after
	// applying it) and what came after does not tell whether it happened. The producer is uninitialized
	// again: the next BeginTransaction initializes it, which first aborts
	// the transaction if it is still open. If another producer took the
	// transactional id meanwhile, that init returns [ErrProducerFenced]
	// and leaves the other producer's transaction alone.
	ErrCommitUnknown = errors.New("producer: commit outcome unknown")
	// ErrTransactionState: the call is not allowed in the producer's
	// transaction state (CommitTransaction without BeginTransaction,
	// Produce outside a transaction on a transactional producer, any
	// transactional call on a producer without transactional.id); nothing
	// changed.
	ErrTransactionState = errors.New("producer: not allowed in this transaction state")
	// ErrTransactionAborted fails a record that AbortTransaction dropped
	// before it was sent, and a SendOffsetsToTransaction call it ended.
	ErrTransactionAborted = errors.New("producer: transaction aborted; record not sent")
)

// GroupMetadata is a consumer's group membership, sent with the offsets
// committed in a transaction ([Producer.SendOffsetsToTransaction]) so
// that the group coordinator refuses a zombie's commit (KIP-447): a
// consumer that lost its membership (a rebalance since) cannot commit.
type GroupMetadata struct {
	GroupID string
	// Generation is the group's generation, -1 if unknown.
	Generation int32
	// MemberID is the consumer's member id, "" if unknown.
	MemberID string
	// InstanceID is the static member's group.instance.id, nil if none.
	InstanceID *string
}

// TransactionOffset is one consumed position committed with a
// transaction: Offset is the next offset the consumer reads (the last
// processed record's offset plus one), as Kafka's consumers commit.
type TransactionOffset struct {
	Topic     string
	Partition int32
	Offset    int64
	// LeaderEpoch is the leader epoch of the last record consumed, -1 if
	// unknown.
	LeaderEpoch int32
	// Metadata is stored with the offset ("" for none).
	Metadata string
}

// txnStats count the transactions that ended, for Stats.
type txnStats struct{ committed, aborted atomic.Int64 }

// txnEnded counts a transaction that ended (err nil).
func (s *sender) txnEnded(commit bool, err error) {
	switch {
	case err != nil:
	case commit:
		s.txnStats.committed.Add(1)
	default:
		s.txnStats.aborted.Add(1)
	}
}

// errNotTransactional is the error of a transactional call on a producer
// without transactional.id.
var errNotTransactional = &txnError{class: ErrTransactionState, msg: "the producer has no transactional.id (the TransactionalID option)"}

// txnCheck makes the checks every transactional call makes first.
func (p *Producer) txnCheck(ctx context.Context) error {
	mustContext(ctx)
	if !p.acc.transactional() {
		return errNotTransactional
	}
	if p.onOwnGoroutine() {
		return ErrInCallback
	}
	return nil
}

// onSender runs f on the sender goroutine and waits for it (or the
// sender's end: ErrClosed).
func (p *Producer) onSender(f func() error) error {
	call := newTxnCall()
	p.post(func() { call.finish(f()) })
	return p.await(context.Background(), call, "transaction")
}

// await waits for call, ctx or the sender's end.
func (p *Producer) await(ctx context.Context, call *txnCall, what string) error {
	select {
	case <-call.done:
		return call.err
	case <-ctx.Done():
		return fmt.Errorf("producer: %s: %w", what, ctx.Err())
	case <-p.senderDone:
		select {
		case <-call.done:
			return call.err
		default:
			return fmt.Errorf("producer: %s: %w", what, ErrClosed)
		}
	}
}

// InitTransactions initializes the transactional producer (Java's
// initTransactions): it finds the transactional id's coordinator and gets
// the producer id and epoch, which fences any earlier producer with the
// same transactional.id and waits until the coordinator has aborted that
// producer's open transaction. A consume-transform-produce service calls
// it before it reads its committed offsets, so that it reads them after
// the previous instance's transaction ended. Without it, the first
// BeginTransaction initializes.
//
// It returns nil once initialized, also when called again after that. If
// ctx ends first it returns ctx's error, wrapped, and initialization goes
// on in the background: call it again to wait for the outcome. It fails
// with [ErrTransactionFatal] when the coordinator refuses the
// transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED, or a
// transaction.timeout.ms above its transaction.max.timeout.ms), with
// [ErrTransactionState] on a producer without transactional.id, and with
// [ErrInCallback] from a record callback or a hook. A nil ctx panics.
func (p *Producer) InitTransactions(ctx context.Context) error {
	if err := p.txnCheck(ctx); err != nil {
		return err
	}
	call := newTxnCall()
	p.post(func() { p.s.txn.init(call) })
	return p.await(ctx, call, "init transactions")
}

// BeginTransaction starts a transaction: the records produced from its
// return until CommitTransaction or AbortTransaction are written
// atomically (all committed or none). When InitTransactions was not
// called it initializes first, as InitTransactions does, waiting at most
// max.block.ms. It returns [ErrTransactionState] while a transaction is
// open or the last one's CommitTransaction or AbortTransaction has not
// completed, the transaction's error while it can only be aborted
// ([ErrTransactionAbortable]), and [ErrProducerFenced] or
// [ErrTransactionFatal] once the producer can only be closed.
//
// Each transaction uses the protocol the brokers offer at its start
// (KIP-890's transaction version 2, or version 1) for its whole life.
func (p *Producer) BeginTransaction() error {
	if err := p.txnCheck(context.Background()); err != nil {
		return err
	}
	var refused error
	p.acc.transaction(func(m *txnMirror) bool {
		switch {
		case m.open && m.failure() != nil:
			refused = m.failure()
		case m.open:
			refused = &txnError{class: ErrTransactionState, msg: "BeginTransaction while a transaction is open"}
		case m.end != nil && !m.end.call.finished():
			refused = &txnError{class: ErrTransactionState, msg: "BeginTransaction before the last transaction's CommitTransaction or AbortTransaction completed"}
		}
		return false
	})
	if refused != nil {
		return refused
	}
	err := p.onSender(func() error { return p.s.txn.begin() })
	if errors.Is(err, errTxnNeedInit) {
		ctx, cancel := context.WithTimeout(context.Background(), p.cfg.maxBlock)
		err = p.InitTransactions(ctx)
		cancel()
		if err == nil {
			err = p.onSender(func() error { return p.s.txn.begin() })
		}
	}
	return err
}

// SendOffsetsToTransaction commits a consumer group's offsets with the
// open transaction (KIP-447): they count for the group only if the
// transaction commits. group is the consumer's group metadata, with which
// the group coordinator refuses the commit of a consumer that lost its
// membership; the transaction is then abortable. It returns once the
// coordinator holds the offsets for the transaction, or the error that
// makes the transaction abortable; [ErrTransactionState] outside a
// transaction or without group.GroupID. If ctx ends first it returns ctx's error, wrapped, and the
// offsets are still sent: CommitTransaction waits for them, and fails if
// they failed.
func (p *Producer) SendOffsetsToTransaction(ctx context.Context, group GroupMetadata, offsets []TransactionOffset) error {
	if err := p.txnCheck(ctx); err != nil {
		return err
	}
	var open bool
	var terr error
	p.acc.transaction(func(m *txnMirror) bool {
		open, terr = m.open, m.failure()
		return false
	})
	if terr != nil {
		return terr
	}
	if !open {
		return &txnError{class: ErrTransactionState, msg: "SendOffsetsToTransaction outside a transaction"}
	}
	if group.GroupID == "" {
		return &txnError{class: ErrTransactionState, msg: "SendOffsetsToTransaction without a group id"}
	}
	g := protocol.GroupMetadata{GroupID: group.GroupID, Generation: group.Generation, MemberID: group.MemberID, InstanceID: group.InstanceID}
	offs := make([]protocol.TxnOffset, len(offsets))
	for i, o := range offsets {
		offs[i] = protocol.TxnOffset{TopicPartition: protocol.TopicPartition{Topic: o.Topic, Partition: o.Partition}, Offset: o.Offset, LeaderEpoch: o.LeaderEpoch}
		if o.Metadata != "" {
			md := o.Metadata
			offs[i].Metadata = &md
		}
	}
	call := newTxnCall()
	p.post(func() { p.s.txn.sendOffsets(call, g, offs) })
	return p.await(ctx, call, "send offsets to transaction")
}

// CommitTransaction commits the open transaction: it waits until every
// record produced in it has been sent and answered and its callback has
// run (records still buffered are sent first, without waiting for
// linger.ms), and until its SendOffsetsToTransaction calls are answered,
// then asks the coordinator to commit. It returns nil once the commit is
// decided: the records and offsets become visible to read_committed
// consumers as soon as the coordinator has written its markers.
//
// If any record of the transaction failed or its fate is unknown, the
// transaction is not committed: CommitTransaction returns an error
// wrapping [ErrTransactionAbortable] and the first such record's error
// (errors.As finds its [*DeliveryError]), Java's rule; call
// AbortTransaction then. It returns [ErrProducerFenced] when another
// producer took the transactional id, [ErrCommitUnknown] when the
// commit's answer was lost and its outcome cannot be known,
// [ErrTransactionState] without an open transaction.
//
// If ctx ends first it returns ctx's error, wrapped, and the commit goes
// on in the background: call CommitTransaction again to wait for its
// outcome (as Java's commitTransaction may be retried after a timeout);
// until that call has returned the outcome, AbortTransaction and
// BeginTransaction return [ErrTransactionState]. A nil ctx panics.
func (p *Producer) CommitTransaction(ctx context.Context) error {
	if err := p.txnCheck(ctx); err != nil {
		return err
	}
	var end *txnEnd
	again := false
	flushed := p.acc.transaction(func(m *txnMirror) bool {
		switch {
		case m.open:
			m.open = false
			end = &txnEnd{commit: true, call: newTxnCall()}
			m.end = end
			return true // waits for the records produced before it
		case m.end != nil && m.end.commit && !m.end.observed:
			end, again = m.end, true // called again after its ctx ended
		}
		return false
	})
	switch {
	case flushed != nil:
		p.wakeSender()
		call := end.call
		if p.cfg.regress.on(txnEndEarly) {
			p.post(func() { p.s.txn.commit(call) })
			break
		}
		go func() {
			select {
			case <-flushed:
			case <-p.senderDone:
				call.finish(fmt.Errorf("producer: commit transaction: %w", ErrClosed))
				return
			}
			p.post(func() { p.s.txn.commit(call) })
		}()
	case again:
	default:
		return p.onSender(func() error { return p.s.txn.core.stateErr("commit") })
	}
	return p.endResult(ctx, end, "commit transaction")
}

// endResult waits for a commit's or abort's outcome and marks it observed.
func (p *Producer) endResult(ctx context.Context, end *txnEnd, what string) error {
	err := p.await(ctx, end.call, what)
	if end.call.finished() {
		p.acc.transaction(func(*txnMirror) bool {
			end.observed = true
			return false
		})
	}
	return err
}

// AbortTransaction aborts the open transaction, or the one whose commit
// failed as abortable: records not sent yet are dropped (their callbacks
// get an error wrapping [ErrTransactionAborted]), records already sent are
// waited for (their callbacks may still report success: the records are
// in the log, aborted, and read_committed consumers skip them), then the
// coordinator is asked to abort. It returns nil once the abort is
// decided; then the next transaction may begin. It returns
// [ErrTransactionState] without a transaction to abort, and while a
// CommitTransaction has not returned its outcome. If ctx ends first it
// returns ctx's error, wrapped, and the abort goes on in the background:
// call AbortTransaction again to wait for its outcome. A nil ctx panics.
func (p *Producer) AbortTransaction(ctx context.Context) error {
	if err := p.txnCheck(ctx); err != nil {
		return err
	}
	var end *txnEnd
	started, committing := false, false
	p.acc.transaction(func(m *txnMirror) bool {
		switch {
		case m.end != nil && !m.end.commit && !m.end.observed:
			end = m.end // called again after its ctx ended
		case m.end != nil && m.end.commit && (!m.end.call.finished() || !m.end.observed):
			committing = true
		default:
			m.open = false
			end = &txnEnd{call: newTxnCall()}
			m.end = end
			started = true
		}
		return false
	})
	if committing {
		return &txnError{class: ErrTransactionState, msg: "AbortTransaction while CommitTransaction has not returned its outcome: call CommitTransaction again"}
	}
	if started {
		call := end.call
		p.post(func() { p.s.txn.abort(call) })
	}
	return p.endResult(ctx, end, "abort transaction")
}

// refused is why Produce refuses a record of a transactional producer:
// outside a transaction, or in one that can only be aborted. Called with
// acc.mu held (accumulator.produce).
func (m *txnMirror) refused() error {
	if err := m.failure(); err != nil {
		return err
	}
	if !m.open {
		return &txnError{class: ErrTransactionState, msg: "Produce outside a transaction: call BeginTransaction first"}
	}
	return nil
}

// closeTransaction aborts the open transaction (or the one whose commit
// failed) before Close, bounded by ctx.
func (p *Producer) closeTransaction(ctx context.Context) {
	open := false
	p.acc.transaction(func(m *txnMirror) bool {
		open = m.open || (m.end != nil && m.end.commit && m.end.call.finished() && m.end.call.err != nil && errors.Is(m.end.call.err, ErrTransactionAbortable))
		return false
	})
	if !open {
		return
	}
	if err := p.AbortTransaction(ctx); err != nil {
		p.log.Warn("Close: aborting the open transaction failed", "err", err)
	}
}
