package producertest

import (
	"time"

	"github.com/longhaul-kafka/longhaul/internal/broker"
)

// DefaultMarkerDelay is how long the cluster's transaction coordinator
// takes, unless [Cluster.SetMarkerDelay] says otherwise, to write a
// transaction's markers after answering its commit or abort.
const DefaultMarkerDelay = broker.DefaultMarkerDelay

// CommittedRecords returns what a read_committed consumer reads of a
// partition: the committed records, in offset order, without records of
// aborted or still open transactions and without transaction markers; nil
// for an unknown partition. Records of non-transactional producers are
// committed as soon as they are written.
func (c *Cluster) CommittedRecords(topic string, partition int32) []Record {
	return records(c.c.CommittedRecords(topic, partition))
}

// LastStableOffset returns a partition's last stable offset, up to which
// read_committed consumers read: the first offset of its oldest open
// transaction, or the end of the log if none is open; -1 for an unknown
// partition.
func (c *Cluster) LastStableOffset(topic string, partition int32) int64 {
	return c.c.LastStableOffset(topic, partition)
}

// CommittedOffset returns a consumer group's committed offset of a
// partition and whether it has one. An offset sent in a transaction counts
// once the transaction committed and its markers were written; an aborted
// transaction's offsets never count.
func (c *Cluster) CommittedOffset(group, topic string, partition int32) (int64, bool) {
	return c.c.CommittedOffset(group, topic, partition)
}

// SetTransactionVersion sets the cluster's transaction.version feature, as
// an operator does with kafka-features. Producers read it from ApiVersions
// to choose their protocol: 2 (the default, as on Kafka 4.0 and later
// formatted fresh) adds partitions by producing and bumps the producer
// epoch at every commit or abort (KIP-890); 0 and 1 are the protocol of
// Kafka 3.x, where a producer adds each partition to its transaction
// first. The change reaches a connection when it next asks ApiVersions.
// Other values are an error.
func (c *Cluster) SetTransactionVersion(v int16) error { return c.c.SetTransactionVersion(v) }

// SetMarkerDelay sets how long the transaction coordinator takes to write
// a transaction's markers after answering its commit or abort, for
// transactions ending from now on; until then the transaction is
// completing, its records are not readable with read_committed, and the
// producer's next transaction meets CONCURRENT_TRANSACTIONS (which a
// producer retries). Negative values count as 0.
func (c *Cluster) SetMarkerDelay(d time.Duration) { c.c.SetMarkerDelay(d) }

// HoldMarkers(true) keeps the markers of transactions ending from now on
// unwritten until HoldMarkers(false) writes them: a test can hold a
// transaction in its completing state for as long as it needs.
func (c *Cluster) HoldMarkers(hold bool) { c.c.HoldMarkers(hold) }

// TransactionCoordinator returns the node coordinating a transactional
// id's transactions.
func (c *Cluster) TransactionCoordinator(transactionalID string) int32 {
	return c.c.Coordinator(transactionalID, true)
}

// MoveTransactionCoordinator makes node coordinate a transactional id, as
// when the leader of its __transaction_state partition moves: the old
// coordinator answers NOT_COORDINATOR from then on, and the transaction's
// state, including markers still to write, moves along. An unknown node is
// an error, and nothing changes.
func (c *Cluster) MoveTransactionCoordinator(transactionalID string, node int32) error {
	return c.c.MoveCoordinator(transactionalID, true, node)
}

// GroupCoordinator returns the node coordinating a consumer group.
func (c *Cluster) GroupCoordinator(group string) int32 {
	return c.c.Coordinator(group, false)
}

// MoveGroupCoordinator makes node coordinate a consumer group (its
// members, offsets and offsets sent in transactions), as when the leader
// of its __consumer_offsets partition moves: the old coordinator answers
// NOT_COORDINATOR from then on. An unknown node is an error, and nothing
// changes.
func (c *Cluster) MoveGroupCoordinator(group string, node int32) error {
	return c.c.MoveCoordinator(group, false, node)
}

// InjectCoordinatorError makes the next n requests to any transaction or
// group coordinator (finding one included) answer the Kafka error code,
// for example kerr.CoordinatorLoadInProgress.Code or
// kerr.NotCoordinator.Code, without doing anything else. n <= 0 clears
// what is left.
func (c *Cluster) InjectCoordinatorError(code int16, n int) {
	c.c.InjectCoordinatorError(-1, code, n)
}

// TimeOutTransaction aborts a transactional id's open transaction now, as
// the coordinator does once the producer's transaction.timeout.ms has
// passed; it reports whether there was one. The producer is fenced from
// that transaction: its commit fails and its records are never read with
// read_committed. Transactions also time out on their own when their
// timeout passes.
func (c *Cluster) TimeOutTransaction(transactionalID string) bool {
	return c.c.TimeOutTransaction(transactionalID)
}

// Transaction is a transactional id's state at its coordinator, from
// [Cluster.Transaction].
type Transaction struct {
	// ProducerID and ProducerEpoch are what the id's producer holds.
	ProducerID    int64
	ProducerEpoch int16
	// State is Kafka's name of the transaction's state: Empty, Ongoing,
	// PrepareCommit, PrepareAbort (markers not yet written),
	// CompleteCommit or CompleteAbort.
	State string
	// TimedOut says the coordinator aborted the last transaction because
	// it outlived its timeout.
	TimedOut bool
}

// Transaction returns a transactional id's state and whether the cluster
// knows the id.
func (c *Cluster) Transaction(transactionalID string) (Transaction, bool) {
	t, ok := c.c.Transaction(transactionalID)
	return Transaction{ProducerID: t.ProducerID, ProducerEpoch: t.ProducerEpoch, State: t.State, TimedOut: t.TimedOut}, ok
}

// TransactionStats are the transaction coordinator's counters since
// [Start], from [Cluster.TransactionStats].
type TransactionStats struct {
	// Committed and Aborted count transactions whose markers were written.
	Committed, Aborted int64
	// ConcurrentTransactions counts answers of CONCURRENT_TRANSACTIONS:
	// requests that met a transaction still completing.
	ConcurrentTransactions int64
	// Fenced counts open transactions aborted because another producer
	// initialized the same transactional id; TimedOut those aborted on
	// their timeout.
	Fenced, TimedOut int64
}

// TransactionStats returns the transaction coordinator's counters.
func (c *Cluster) TransactionStats() TransactionStats {
	s := c.c.TxnStats()
	return TransactionStats{Committed: s.Committed, Aborted: s.Aborted, ConcurrentTransactions: s.ConcurrentTransactions,
		Fenced: s.Fenced, TimedOut: s.TimedOut}
}

// DenyTransactionalID(id, true) makes the cluster refuse a transactional
// id as a broker whose ACLs deny it does: the producer's transactional
// requests, and its records, fail with
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED. DenyTransactionalID(id, false)
// allows it again.
func (c *Cluster) DenyTransactionalID(transactionalID string, deny bool) {
	c.c.DenyTransactionalID(transactionalID, deny)
}
