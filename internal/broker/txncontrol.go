package broker

import (
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// TxnStats are the coordinator's counters since [Start].
type TxnStats struct {
	// Committed and Aborted count transactions whose markers were
	// written (an abort with nothing to mark included).
	Committed, Aborted int64
	// Markers counts the control batches written.
	Markers int64
	// ConcurrentTransactions counts answers of CONCURRENT_TRANSACTIONS
	// (InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn,
	// TxnOffsetCommit and transactional Produce).
	ConcurrentTransactions int64
	// Fenced counts ongoing transactions aborted by an InitProducerId of
	// their transactional id; TimedOut those aborted by their timeout.
	Fenced, TimedOut int64
	// LostMarkers counts marker writes lost and written again later
	// ([Cluster.LoseMarkers]); MarkerFailovers the coordinators that
	// failed over between the markers of one transaction
	// ([Cluster.FailOverBetweenMarkers]).
	LostMarkers, MarkerFailovers int64
	// AnswerFailovers counts the coordinators that failed over between
	// a request's change and its answer ([Cluster.FailOverBeforeAnswer]).
	AnswerFailovers int64
	// LoadFencedRetries counts InitProducerId requests fenced because
	// they carried the epoch before the last bump and the coordinator
	// had loaded the transactional id since, forgetting it: retries of a
	// bump applied before a coordinator move, most likely.
	LoadFencedRetries int64
	// LenientStarts counts transactions' first batches on a partition
	// taken at a sequence other than 0, which only a lenient broker
	// ([Cluster.SetLenientTransactionStart], Kafka 4.0) takes: the
	// records before it in the transaction are missing from the log
	// there, a gap the producer opened.
	LenientStarts int64
}

// TxnStats returns the coordinator's counters.
func (c *Cluster) TxnStats() TxnStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.txnStats
}

// TxnInfo is a transactional id's state at its coordinator, from
// [Cluster.Transaction].
type TxnInfo struct {
	// ProducerID and ProducerEpoch are the id and epoch the coordinator
	// hands out for the transactional id.
	ProducerID    int64
	ProducerEpoch int16
	// State is Kafka's name of the transaction's state: Empty, Ongoing,
	// PrepareCommit, PrepareAbort, CompleteCommit or CompleteAbort.
	State string
	// Partitions counts the partitions of the ongoing (or preparing)
	// transaction, Groups its consumer groups.
	Partitions, Groups int
	// TimedOut says the coordinator aborted the last transaction because
	// it outlived its timeout.
	TimedOut bool
}

// Transaction returns a transactional id's state and whether the
// coordinator knows the id.
func (c *Cluster) Transaction(transactionalID string) (TxnInfo, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.txns[transactionalID]
	if m == nil {
		return TxnInfo{}, false
	}
	return TxnInfo{ProducerID: m.pid, ProducerEpoch: m.epoch, State: m.state.String(),
		Partitions: len(m.parts), Groups: len(m.groups), TimedOut: m.timedOut}, true
}

// SetTransactionVersion sets the cluster's finalized transaction.version
// feature (0, 1 or 2), as kafka-features upgrade and downgrade do; the
// FinalizedFeaturesEpoch of ApiVersions grows with each call. Clients read
// the feature from ApiVersions to choose their protocol: version 2
// (KIP-890, the default, as on Kafka 4.0+ formatted fresh) has Produce
// v12+ add partitions, TxnOffsetCommit v5 groups and EndTxn v5 bump the
// epoch; below 2 a client adds them by AddPartitionsToTxn and
// AddOffsetsToTxn and keeps its epoch. As on Kafka 4.4 the coordinator
// serves both protocols whatever the feature says: the request versions
// decide (a transactional Produce v11 or below to a partition not added
// fails). The change reaches a connection when it next asks. Any other
// value returns a *ConfigError.
func (c *Cluster) SetTransactionVersion(v int16) error {
	if v < 0 || v > 2 {
		return &ConfigError{"transaction.version", fmt.Sprint(v), "must be 0, 1 or 2"}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.txnVersion = v
	c.featuresEpoch++
	return nil
}

// TransactionVersion returns the finalized transaction.version.
func (c *Cluster) TransactionVersion() int16 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.txnVersion
}

// SetMarkerDelay sets how long the coordinator takes to write a
// transaction's markers after answering EndTxn (or after fencing or timing
// out a transaction), for transactions ended from now on; until then the
// transaction is being completed and its transactional id's requests are
// answered CONCURRENT_TRANSACTIONS. Default [DefaultMarkerDelay]; negative
// values are taken as 0.
func (c *Cluster) SetMarkerDelay(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.markerDelay = max(d, 0)
}

// HoldMarkers(true) holds the markers of every transaction ended from now
// on until HoldMarkers(false), which writes them (in the order the
// transactions ended) and restores the marker delay: a test can keep a
// transaction being completed for as long as it needs, without timing.
func (c *Cluster) HoldMarkers(hold bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.markersHeld = hold
	if hold {
		return
	}
	held := c.heldMarkers
	c.heldMarkers = nil
	for _, write := range held {
		write()
	}
}

// Coordinator returns the node coordinating a transactional id
// (transaction true) or a consumer group.
func (c *Cluster) Coordinator(key string, transaction bool) int32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.coordinator(keyTypeOf(transaction), key)
}

func keyTypeOf(transaction bool) int8 {
	if transaction {
		return coordTxn
	}
	return coordGroup
}

// MoveCoordinator makes node coordinate a transactional id (transaction
// true) or a consumer group, and every other key of its __transaction_state
// or __consumer_offsets partition, as a leader change of that partition
// does: the old node answers NOT_COORDINATOR from then on, FindCoordinator
// names the new one, and the state moves with it (markers pending are
// written by the new coordinator, carrying a higher coordinator epoch).
// A transaction coordinator loads the state as Kafka's does from its log:
// it does not know the epoch before the last bump, so an InitProducerId
// retrying a bump the old coordinator applied is PRODUCER_FENCED. An
// unknown node returns [ErrUnknownNode] and changes nothing.
func (c *Cluster) MoveCoordinator(key string, transaction bool, node int32) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, err := c.node(node); err != nil {
		return err
	}
	i := coordPartition(key)
	if transaction {
		c.moveTxnCoordinator(i, node)
		return nil
	}
	c.coordLeaders[0][i] = node
	c.coordEpoch++
	return nil
}

// InjectCoordinatorError makes the next n coordinator requests of API key
// apiKey answer code, on whichever node is asked: FindCoordinator (10,
// per key looked up), InitProducerId (22, transactional only),
// AddPartitionsToTxn (24), AddOffsetsToTxn (25), EndTxn (26),
// TxnOffsetCommit (28), OffsetCommit (8) and OffsetFetch (9); apiKey -1
// means any of them. Typical codes are NOT_COORDINATOR,
// COORDINATOR_NOT_AVAILABLE and COORDINATOR_LOAD_IN_PROGRESS
// ([CoordinatorErrorCodes]). Nothing else of the request happens. n <= 0
// clears every armed coordinator error.
func (c *Cluster) InjectCoordinatorError(apiKey int16, code int16, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n <= 0 {
		c.coordFaults = nil
		return
	}
	c.coordFaults = append(c.coordFaults, coordFault{key: apiKey, code: code, n: n})
}

// TimeOutTransaction aborts a transactional id's ongoing transaction now,
// as the coordinator does once transaction.timeout.ms passed: the epoch
// is bumped, fencing the producer (its batches then get
// INVALID_PRODUCER_EPOCH; under transaction version 1 its coordinator
// requests PRODUCER_FENCED, under 2 its EndTxn commit INVALID_TXN_STATE
// while its abort succeeds), and the abort's markers are written as for
// any abort. It reports whether
// the id had an ongoing transaction. Transactions also time out by
// themselves once their timeout (InitProducerId's) passed since their
// first partition or group was added.
func (c *Cluster) TimeOutTransaction(transactionalID string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.txns[transactionalID]
	if m == nil || m.state != txnOngoing {
		return false
	}
	c.txnStats.TimedOut++
	m.timedOut = true
	c.fence(m)
	return true
}

// SetLenientTransactionStart(true) makes the broker accept a
// transaction's first batch on a partition at any sequence under
// transaction version 2, as Kafka 4.0 does; by default (false) a first
// batch on a partition where the producer retains no batch of its epoch
// must have sequence 0 (OUT_OF_ORDER_SEQUENCE_NUMBER otherwise), as
// Kafka 4.1 and later require.
func (c *Cluster) SetLenientTransactionStart(on bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lenientTxnStart = on
}

// LastStableOffset returns a partition's last stable offset: the first
// offset of its earliest open transaction, or its high watermark; -1 for
// an unknown partition.
func (c *Cluster) LastStableOffset(topic string, partition int32) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.partition(topic, partition)
	if p == nil {
		return -1
	}
	return c.lso(p)
}

// CommittedRecords returns what a read_committed consumer reads of a
// partition: the records below the last stable offset that no aborted
// transaction wrote, in offset order, without transaction markers; nil
// for an unknown partition. Key, Value and Headers share the broker's
// memory and must not be modified.
func (c *Cluster) CommittedRecords(topic string, partition int32) []LogRecord {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.partition(topic, partition)
	if p == nil {
		return nil
	}
	lso := c.lso(p)
	pt := c.ptxn[p]
	var out []LogRecord
	for _, rec := range p.logRecords() {
		if rec.Offset >= lso {
			break
		}
		if pt != nil && (pt.control[rec.Offset] || pt.abortedAt(rec.ProducerID, rec.Offset)) {
			continue
		}
		out = append(out, rec)
	}
	return out
}

// abortedAt reports whether pid's record at offset belongs to an aborted
// transaction.
func (pt *partTxn) abortedAt(pid int64, offset int64) bool {
	for _, a := range pt.aborted {
		if a.pid == pid && offset >= a.first && offset < a.last {
			return true
		}
	}
	return false
}

// CommittedOffset returns a consumer group's committed offset of a
// partition, as OffsetFetch answers it, and whether there is one. Offsets
// a transaction committed count once its markers are written.
func (c *Cluster) CommittedOffset(group, topic string, partition int32) (int64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.groups[group]
	if g == nil {
		return -1, false
	}
	e, ok := g.committed[topicPart{topic, partition}]
	if !ok {
		return -1, false
	}
	return e.offset, true
}

// DenyTransactionalID(id, true) makes the cluster refuse the transactional
// id as an ACL without WRITE on it would: InitProducerId,
// AddPartitionsToTxn, AddOffsetsToTxn, EndTxn and TxnOffsetCommit naming
// it, and Produce carrying it, answer TRANSACTIONAL_ID_AUTHORIZATION_FAILED
// before anything else. DenyTransactionalID(id, false) allows it again.
func (c *Cluster) DenyTransactionalID(transactionalID string, deny bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !deny {
		delete(c.deniedTxnIDs, transactionalID)
		return
	}
	if c.deniedTxnIDs == nil {
		c.deniedTxnIDs = make(map[string]bool)
	}
	c.deniedTxnIDs[transactionalID] = true
}

// SetTimedOutCommitError sets what EndTxn v5 answers a commit, at the old
// epoch, of a transaction the coordinator aborted on its timeout:
// INVALID_TXN_STATE (the default, what Kafka 4.4.0 answers) or, with
// PRODUCER_FENCED's code, what Kafka answers since KAFKA-20785. Other codes
// restore the default.
func (c *Cluster) SetTimedOutCommitError(code int16) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.timedOutCommit = 0
	if code == kerr.ProducerFenced.Code {
		c.timedOutCommit = code
	}
}
