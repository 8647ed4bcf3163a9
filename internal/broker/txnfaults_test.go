package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// markers returns how many transaction markers partition part of topic t
// holds.
func markers(c *Cluster, part int32) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	pt := c.ptxn[c.partition("t", part)]
	if pt == nil {
		return 0
	}
	return len(pt.control)
}

// txnOnTwo starts a transaction version 1 transaction of transactional id
// "a" with 2 records on each of partitions 0 and 1, at node 0.
func txnOnTwo(t *testing.T, c *Cluster) (*txnWire, int64, int16) {
	t.Helper()
	if err := c.SetTransactionVersion(1); err != nil {
		t.Fatal(err)
	}
	if err := c.MoveCoordinator("a", true, 0); err != nil {
		t.Fatal(err)
	}
	x := newTxnWire(t, c, "a")
	pid, epoch := x.mustInit()
	wantCode(t, "add", x.add(3, pid, epoch, "t", 0, 1), nil)
	for part := range int32(2) {
		// Partitions 0 and 1 are led by node 0 of a one-node view: move
		// them there so the wire client reaches them.
		c.MoveLeader("t", part, 0)
		wantCode(t, "produce", x.produce(11, part, pid, epoch, 0, 2).ErrorCode, nil)
	}
	return x, pid, epoch
}

// TestTxnLostMarkers: a lost marker keeps the transaction prepared
// (CONCURRENT_TRANSACTIONS, the partition's records unreadable with
// read_committed) until the coordinator writes it again; then every
// partition holds one marker and every record is committed.
func TestTxnLostMarkers(t *testing.T) {
	c := startCluster(t, Config{Nodes: 2, Topics: []TopicConfig{{Name: "t", Partitions: 2}}})
	x, pid, epoch := txnOnTwo(t, c)
	c.HoldMarkers(true)
	c.LoseMarkers(1)
	wantCode(t, "commit", x.end(4, pid, epoch, true).ErrorCode, nil)
	c.mu.Lock()
	c.markerDelay = markerRetryBackoff * 20 // the retry is written only when this test says so
	c.mu.Unlock()
	c.HoldMarkers(false) // writes the held markers: one of them is lost
	if st := c.TxnStats(); st.LostMarkers != 1 || st.Markers != 1 {
		t.Fatalf("stats %+v, want 1 lost marker and 1 written", st)
	}
	if info, _ := c.Transaction("a"); info.State != "PrepareCommit" {
		t.Fatalf("state %s with a marker lost, want PrepareCommit", info.State)
	}
	wantCode(t, "EndTxn while a marker is missing", x.end(4, pid, epoch, true).ErrorCode, kerr.ConcurrentTransactions)
	if got := len(c.CommittedRecords("t", 0)) + len(c.CommittedRecords("t", 1)); got != 2 {
		t.Fatalf("%d records readable with one of two markers written, want 2", got)
	}
	waitState(t, c, "a", "CompleteCommit")
	for part := range int32(2) {
		if n := markers(c, part); n != 1 {
			t.Fatalf("partition %d: %d markers, want 1", part, n)
		}
		if n := len(c.CommittedRecords("t", part)); n != 2 {
			t.Fatalf("partition %d: %d committed records, want 2", part, n)
		}
	}
	if st := c.TxnStats(); st.Committed != 1 || st.Markers != 2 {
		t.Fatalf("stats %+v, want 1 committed, 2 markers", st)
	}
}

// TestTxnFailOverBetweenMarkers: the coordinator failing over after the
// first of two markers moves the transactional id to the next node (the
// old one answers NOT_COORDINATOR), and the new coordinator writes both
// markers again: the partition marked first holds two, the other one,
// every record is committed once, and the id's next transaction works at
// the new coordinator.
func TestTxnFailOverBetweenMarkers(t *testing.T) {
	c := startCluster(t, Config{Nodes: 2, Topics: []TopicConfig{{Name: "t", Partitions: 2}}})
	x, pid, epoch := txnOnTwo(t, c)
	c.FailOverBetweenMarkers(1)
	wantCode(t, "commit", x.end(4, pid, epoch, true).ErrorCode, nil)
	waitState(t, c, "a", "CompleteCommit")
	if got := c.Coordinator("a", true); got != 1 {
		t.Fatalf("coordinator %d after the failover, want 1", got)
	}
	if st := c.TxnStats(); st.MarkerFailovers != 1 || st.Markers != 3 || st.Committed != 1 {
		t.Fatalf("stats %+v, want 1 failover, 3 markers, 1 committed", st)
	}
	if a, b := markers(c, 0), markers(c, 1); a != 2 || b != 1 {
		t.Fatalf("markers %d and %d, want 2 on the partition marked before the failover and 1", a, b)
	}
	for part := range int32(2) {
		if n := len(c.CommittedRecords("t", part)); n != 2 {
			t.Fatalf("partition %d: %d committed records, want 2", part, n)
		}
		if lso, end := c.LastStableOffset("t", part), c.LogEndOffset("t", part); lso != end {
			t.Fatalf("partition %d: last stable offset %d, end %d", part, lso, end)
		}
	}
	wantCode(t, "add at the old coordinator", x.add(3, pid, epoch, "t", 0), kerr.NotCoordinator)
	// A transaction of one partition and no group writes one marker: no
	// failover is armed any more, and none would happen.
	c.FailOverBetweenMarkers(1)
	if err := c.MoveCoordinator("a", true, 0); err != nil {
		t.Fatal(err)
	}
	wantCode(t, "add", x.add(3, pid, epoch, "t", 0), nil)
	wantCode(t, "produce", x.produce(11, 0, pid, epoch, 2, 1).ErrorCode, nil)
	wantCode(t, "commit", x.end(4, pid, epoch, true).ErrorCode, nil)
	waitState(t, c, "a", "CompleteCommit")
	if st := c.TxnStats(); st.MarkerFailovers != 1 || c.Coordinator("a", true) != 0 {
		t.Fatalf("stats %+v, coordinator %d: a one-marker transaction failed over", st, c.Coordinator("a", true))
	}
	c.LoseMarkers(3)
	c.FailOverBetweenMarkers(0)
	c.LoseMarkers(0)
	c.mu.Lock()
	armed := c.txnFaults
	c.mu.Unlock()
	if armed.lostMarkers != 0 || armed.failovers != 0 {
		t.Fatalf("armed %+v after clearing", armed)
	}
	if got := c.LogEndOffset("t", 2); got != -1 {
		t.Fatalf("LogEndOffset of an unknown partition: %d, want -1", got)
	}
}

// TestTxnLenientStartsCounted: a lenient broker (Kafka 4.0) counts the
// transactions' first batches it took at a sequence other than 0, and
// only those: not the batches after them, nor a first batch at 0.
func TestTxnLenientStartsCounted(t *testing.T) {
	c := startCluster(t, Config{Topics: []TopicConfig{{Name: "t", Partitions: 1}}})
	c.SetLenientTransactionStart(true)
	x := newTxnWire(t, c, "a")
	pid, epoch := x.mustInit()
	wantCode(t, "seq 3", x.produce(12, 0, pid, epoch, 3, 1).ErrorCode, nil)
	wantCode(t, "seq 4", x.produce(12, 0, pid, epoch, 4, 1).ErrorCode, nil)
	y := newTxnWire(t, c, "b")
	pid2, epoch2 := y.mustInit()
	wantCode(t, "b: seq 0", y.produce(12, 0, pid2, epoch2, 0, 2).ErrorCode, nil)
	if st := c.TxnStats(); st.LenientStarts != 1 {
		t.Fatalf("%d lenient starts, want 1", st.LenientStarts)
	}
	ls := c.LenientStarts()
	if len(ls) != 1 || ls[0].Topic != "t" || ls[0].Partition != 0 || ls[0].ProducerID != pid || ls[0].ProducerEpoch != epoch || ls[0].Sequence != 3 || ls[0].At.IsZero() {
		t.Fatalf("lenient starts %+v, want the batch of %d/%d at sequence 3", ls, pid, epoch)
	}
}
