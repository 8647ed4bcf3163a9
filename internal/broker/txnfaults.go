package broker

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/longhaul-kafka/longhaul/protocol"
)

// Faults of the transaction coordinator's marker phase, and the
// vocabulary of coordinator faults the randomized tests draw from.

// txnFaults are the armed marker faults. c.mu guards them.
type txnFaults struct {
	lostMarkers int // marker writes to lose (LoseMarkers)
	failovers   int // transactions whose coordinator fails over between markers
	// beforeAnswer are the armed failovers between a request's change
	// and its answer (FailOverBeforeAnswer).
	beforeAnswer []coordFault
	// lenient are the transaction starts only a lenient broker took
	// (LenientStarts).
	lenient []LenientStart
}

// LenientStart is a transaction's first batch on a partition that a
// lenient broker ([Cluster.SetLenientTransactionStart], Kafka 4.0) took at
// a sequence other than 0: the records of the transaction before it are
// not in the log there.
type LenientStart struct {
	Topic         string
	Partition     int32
	ProducerID    int64
	ProducerEpoch int16
	Sequence      int32 // the batch's first sequence
	At            time.Time
}

// lenientStart notes an appended lenient start. c.mu is held.
func (c *Cluster) lenientStart(p *partition, info protocol.BatchInfo, now time.Time) {
	c.txnStats.LenientStarts++
	c.txnFaults.lenient = append(c.txnFaults.lenient, LenientStart{Topic: p.t.name, Partition: p.index,
		ProducerID: info.ProducerID, ProducerEpoch: info.ProducerEpoch, Sequence: info.BaseSequence, At: now})
}

// LenientStarts returns the transaction starts taken at a sequence other
// than 0 since [Start], oldest first (their count is
// [TxnStats].LenientStarts).
func (c *Cluster) LenientStarts() []LenientStart {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]LenientStart(nil), c.txnFaults.lenient...)
}

// markerRetryBackoff is how long the coordinator waits before writing a
// lost marker again (Kafka's marker channel retries on its next send
// loop, after its backoff).
const markerRetryBackoff = 50 * time.Millisecond

// LoseMarkers makes the next n marker writes fail, as when a partition's
// leader is unavailable to the coordinator's WriteTxnMarkers: the
// coordinator writes each again after a backoff, the transaction staying
// prepared (its transactional id's requests answered
// CONCURRENT_TRANSACTIONS, read_committed readers held at the last stable
// offset of the partitions not marked) until every marker is written.
// n <= 0 clears what is armed.
func (c *Cluster) LoseMarkers(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.txnFaults.lostMarkers = addCount(c.txnFaults.lostMarkers, n)
}

// FailOverBetweenMarkers makes the transaction coordinator fail over
// between the markers of each of the next n transactions that write two
// or more (partitions and consumer groups counted): once the markers of
// half the partitions (at least one) are written, the transactional id's
// coordinator moves to the next node (its old node answers
// NOT_COORDINATOR from then on), and the new coordinator, loading the
// prepared transaction, writes every marker again after the marker delay,
// carrying a higher coordinator epoch: the partitions marked before the
// failover get a second marker, as from Kafka. n <= 0 clears what is
// armed.
func (c *Cluster) FailOverBetweenMarkers(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.txnFaults.failovers = addCount(c.txnFaults.failovers, n)
}

// failOverCoordinator moves m's coordinator to the next node, which
// writes all of m's markers again. c.mu is held.
func (c *Cluster) failOverCoordinator(m *txnMeta) {
	c.txnFaults.failovers--
	c.txnStats.MarkerFailovers++
	i := coordPartition(m.id)
	c.moveTxnCoordinator(i, (c.coordLeaders[1][i]+1)%int32(len(c.nodes)))
	m.unmarked = append(m.unmarked[:0], m.parts...)
	c.scheduleMarkers(m, c.markerDelay)
}

// moveTxnCoordinator makes node lead __transaction_state partition i,
// with a higher coordinator epoch; the new coordinator loads the
// partition. c.mu is held.
func (c *Cluster) moveTxnCoordinator(i int, node int32) {
	c.coordLeaders[1][i] = node
	c.coordEpoch++
	c.loadTxnPartition(i)
}

// loadTxnPartition is a coordinator loading __transaction_state
// partition i: of each transactional id there it knows what Kafka's log
// value holds (producer id, epoch, the producer id before an exhausted
// epoch, state, partitions, timeout) and not the epoch before the last
// bump, which Kafka keeps in memory only (its TransactionLog reads
// lastProducerEpoch as none). So a retried InitProducerId bump whose
// first attempt the old coordinator applied is PRODUCER_FENCED by the new
// one; a retried EndTxn is told by its epoch and answered as before.
// c.mu is held.
func (c *Cluster) loadTxnPartition(i int) {
	for id, m := range c.txns {
		if coordPartition(id) == i && m.lastEpoch >= 0 {
			m.lastEpoch, m.forgotten = -1, m.lastEpoch
		}
	}
}

// FailOverBeforeAnswer makes the transaction coordinator fail over
// between the change and the answer of each of the next n requests of
// API key apiKey it applies: InitProducerId (22: a new producer id, a
// bump, a retry answered, a fence) or EndTxn (26: a transaction
// prepared); -1 means either. The change stands (as when Kafka's
// __transaction_state append was replicated before its leader moved),
// the transactional id's coordinator moves to the next node, which loads
// it (forgetting the epoch before the last bump), and the request is
// answered NOT_COORDINATOR, as Kafka answers when its coordinator epoch
// changed while the append completed. The client's retry at the new
// coordinator meets the state after the change: a retried InitProducerId
// bump is PRODUCER_FENCED, a retried EndTxn is answered as a retry.
// Counted in [TxnStats].AnswerFailovers. n <= 0 clears what is armed.
func (c *Cluster) FailOverBeforeAnswer(apiKey int16, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n <= 0 {
		c.txnFaults.beforeAnswer = nil
		return
	}
	c.txnFaults.beforeAnswer = append(c.txnFaults.beforeAnswer, coordFault{key: apiKey, n: n})
}

// answerApplied returns the code to answer a request of API key apiKey
// that changed m, code without an armed FailOverBeforeAnswer; with one,
// m's coordinator fails over and the answer is NOT_COORDINATOR. c.mu is
// held.
func (c *Cluster) answerApplied(m *txnMeta, apiKey int16, code int16) int16 {
	for i := range c.txnFaults.beforeAnswer {
		f := &c.txnFaults.beforeAnswer[i]
		if f.key != apiKey && f.key != -1 {
			continue
		}
		if f.n--; f.n <= 0 {
			c.txnFaults.beforeAnswer = append(c.txnFaults.beforeAnswer[:i], c.txnFaults.beforeAnswer[i+1:]...)
		}
		c.txnStats.AnswerFailovers++
		j := coordPartition(m.id)
		c.moveTxnCoordinator(j, (c.coordLeaders[1][j]+1)%int32(len(c.nodes)))
		return kerr.NotCoordinator.Code
	}
	return code
}

// TxnCoordinatorErrors are the errors a transaction coordinator answers
// while it moves, loads its partition or completes the previous
// transaction, each with the API keys that can carry it: tests arm them
// with [Cluster.InjectCoordinatorError]. FindCoordinator (10) answers
// only the first two; CONCURRENT_TRANSACTIONS comes from InitProducerId
// (22), AddPartitionsToTxn (24), AddOffsetsToTxn (25), EndTxn (26) and
// TxnOffsetCommit (28).
var TxnCoordinatorErrors = []struct {
	Err  *kerr.Error
	Keys []int16
}{
	{kerr.CoordinatorNotAvailable, []int16{10, 22, 24, 25, 26, 28}},
	{kerr.CoordinatorLoadInProgress, []int16{10, 22, 24, 25, 26, 28}},
	{kerr.NotCoordinator, []int16{22, 24, 25, 26, 28}},
	{kerr.ConcurrentTransactions, []int16{22, 24, 25, 26, 28}},
}

// Kafka40ProduceMaxVersion is the highest Produce version Kafka 4.0
// serves. A cluster behaving as Kafka 4.0 caps Produce there
// ([Config].ProduceMaxVersions) and accepts a transaction's first batch at
// any sequence ([Cluster.SetLenientTransactionStart]), since the check
// came with Kafka 4.1 (Produce v13).
const Kafka40ProduceMaxVersion = 12

// LogEndOffset returns a partition's log end offset (its high
// watermark: the offset the next batch gets), -1 for an unknown
// partition. A partition with no open transaction has its last stable
// offset there.
func (c *Cluster) LogEndOffset(topic string, partition int32) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.partition(topic, partition)
	if p == nil {
		return -1
	}
	return p.next
}
