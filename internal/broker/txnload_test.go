package broker

import (
	"math"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// wireTo is a txnWire of transactional id "a" to address addr.
func wireTo(t *testing.T, c *Cluster, addr string) *txnWire {
	return &txnWire{t: t, c: c, w: dialWire(t, addr), id: "a"}
}

// txnAt starts a two-node cluster whose node 0 coordinates transactional
// id "a" at transaction version tv, and initializes "a" there.
func txnAt(t *testing.T, tv int16) (*Cluster, *txnWire, int64, int16) {
	t.Helper()
	c := startCluster(t, Config{Nodes: 2, Topics: []TopicConfig{{Name: "t", Partitions: 1}}})
	if err := c.SetTransactionVersion(tv); err != nil {
		t.Fatal(err)
	}
	if err := c.MoveCoordinator("a", true, 0); err != nil {
		t.Fatal(err)
	}
	c.MoveLeader("t", 0, 0)
	x := newTxnWire(t, c, "a")
	pid, epoch := x.mustInit()
	return c, x, pid, epoch
}

// TestTxnLoadForgetsLastEpoch: a coordinator that loads a transactional
// id (its __transaction_state partition moved, its coordinator failed
// over between a bump and its answer, a new process took the node) does
// not know the epoch before the id's last bump, as Kafka's log value
// does not hold it: the retry of an InitProducerId bump the old
// coordinator applied is PRODUCER_FENCED, while the coordinator that
// bumped answers it the current pair. The current pair still bumps.
func TestTxnLoadForgetsLastEpoch(t *testing.T) {
	for _, tv := range []int16{1, 2} {
		for _, how := range []string{"MoveCoordinator", "FailOverBeforeAnswer", "MoveNode"} {
			c, x, pid, epoch := txnAt(t, tv)
			var retry *txnWire
			switch how {
			case "MoveCoordinator":
				bump := x.init(4, 60000, pid, epoch)
				wantCode(t, how+": bump", bump.ErrorCode, nil)
				again := x.init(4, 60000, pid, epoch)
				wantCode(t, how+": retry at the coordinator that bumped", again.ErrorCode, nil)
				if again.ProducerID != pid || again.ProducerEpoch != epoch+1 {
					t.Fatalf("tv%d %s: retry answered %d/%d, want %d/%d", tv, how, again.ProducerID, again.ProducerEpoch, pid, epoch+1)
				}
				if err := c.MoveCoordinator("a", true, 1); err != nil {
					t.Fatal(err)
				}
				retry = wireTo(t, c, c.Addrs()[1])
			case "FailOverBeforeAnswer":
				c.FailOverBeforeAnswer(22, 1)
				bump := x.init(4, 60000, pid, epoch)
				wantCode(t, how+": bump", bump.ErrorCode, kerr.NotCoordinator)
				if bump.ProducerID != -1 || bump.ProducerEpoch != -1 {
					t.Fatalf("tv%d %s: NOT_COORDINATOR carries %d/%d", tv, how, bump.ProducerID, bump.ProducerEpoch)
				}
				if info, _ := c.Transaction("a"); info.ProducerEpoch != epoch+1 {
					t.Fatalf("tv%d %s: epoch %d after the bump, want %d (applied)", tv, how, info.ProducerEpoch, epoch+1)
				}
				if got := c.Coordinator("a", true); got != 1 {
					t.Fatalf("tv%d %s: coordinator %d, want 1", tv, how, got)
				}
				if st := c.TxnStats(); st.AnswerFailovers != 1 {
					t.Fatalf("tv%d %s: stats %+v, want 1 answer failover", tv, how, st)
				}
				wantCode(t, how+": at the old coordinator", x.init(4, 60000, pid, epoch+1).ErrorCode, kerr.NotCoordinator)
				retry = wireTo(t, c, c.Addrs()[1])
			case "MoveNode":
				wantCode(t, how+": bump", x.init(4, 60000, pid, epoch).ErrorCode, nil)
				addr, err := c.MoveNode(0, NodeMove{})
				if err != nil {
					t.Fatal(err)
				}
				same := wireTo(t, c, addr)
				wantCode(t, how+": retry at the same process, moved", same.init(4, 60000, pid, epoch).ErrorCode, nil)
				if addr, err = c.MoveNode(0, NodeMove{Replace: true}); err != nil {
					t.Fatal(err)
				}
				retry = wireTo(t, c, addr)
			}
			wantCode(t, how+": retry at the coordinator that loaded", retry.init(4, 60000, pid, epoch).ErrorCode, kerr.ProducerFenced)
			if st := c.TxnStats(); st.LoadFencedRetries != 1 {
				t.Fatalf("tv%d %s: stats %+v, want 1 retry fenced after a load", tv, how, st)
			}
			bump := retry.init(4, 60000, pid, epoch+1)
			wantCode(t, how+": the current pair", bump.ErrorCode, nil)
			if bump.ProducerID != pid || bump.ProducerEpoch != epoch+2 {
				t.Fatalf("tv%d %s: the current pair bumped to %d/%d, want %d/%d", tv, how, bump.ProducerID, bump.ProducerEpoch, pid, epoch+2)
			}
		}
	}
	c := startCluster(t, Config{Nodes: 2})
	c.FailOverBeforeAnswer(26, 2)
	c.FailOverBeforeAnswer(0, 0)
	c.mu.Lock()
	armed := len(c.txnFaults.beforeAnswer)
	c.mu.Unlock()
	if armed != 0 {
		t.Fatalf("%d failovers armed after clearing", armed)
	}
}

// TestTxnNewInstanceForgetsLastEpoch: an InitProducerId without the
// producer id and epoch (a new instance of the application) bumps the
// epoch and forgets the one before, as Kafka does: the old instance's
// InitProducerId with its epoch is PRODUCER_FENCED, not taken as a
// retry of the new instance's bump.
func TestTxnNewInstanceForgetsLastEpoch(t *testing.T) {
	c := startCluster(t, Config{Topics: []TopicConfig{{Name: "t", Partitions: 1}}})
	old := newTxnWire(t, c, "a")
	pid, epoch := old.mustInit()
	pid2, epoch2 := newTxnWire(t, c, "a").mustInit()
	if pid2 != pid || epoch2 != epoch+1 {
		t.Fatalf("the new instance got %d/%d, want %d/%d", pid2, epoch2, pid, epoch+1)
	}
	wantCode(t, "the old instance's bump", old.init(4, 60000, pid, epoch).ErrorCode, kerr.ProducerFenced)
	if info, _ := c.Transaction("a"); info.ProducerEpoch != epoch2 {
		t.Fatalf("epoch %d after the old instance's init, want %d", info.ProducerEpoch, epoch2)
	}
	if st := c.TxnStats(); st.LoadFencedRetries != 0 {
		t.Fatalf("stats %+v: a fence without a load counted as one after a load", st)
	}
}

// TestTxnLoadKeepsEndTxnRetry: an EndTxn retried at a coordinator that
// loaded the transactional id after the first attempt was applied (the
// failover came between its change and its answer) is answered as a
// retry: under version 2 Kafka tells it by the epoch, one below the
// id's, which its log holds; under version 1 by the completed state.
func TestTxnLoadKeepsEndTxnRetry(t *testing.T) {
	for _, tv := range []int16{1, 2} {
		c, x, pid, epoch := txnAt(t, tv)
		endV, produceV := int16(4), int16(11)
		if tv == 2 {
			endV, produceV = 5, 12
		} else {
			wantCode(t, "add", x.add(3, pid, epoch, "t", 0), nil)
		}
		wantCode(t, "produce", x.produce(produceV, 0, pid, epoch, 0, 2).ErrorCode, nil)
		c.FailOverBeforeAnswer(26, 1)
		wantCode(t, "commit", x.end(endV, pid, epoch, true).ErrorCode, kerr.NotCoordinator)
		waitState(t, c, "a", "CompleteCommit")
		y := wireTo(t, c, c.Addrs()[1])
		again := y.end(endV, pid, epoch, true)
		wantCode(t, "the commit retried at the new coordinator", again.ErrorCode, nil)
		wantCode(t, "an abort at the same epoch", y.end(endV, pid, epoch, false).ErrorCode, kerr.InvalidTxnState)
		if tv == 2 && (again.ProducerID != pid || again.ProducerEpoch != epoch+1) {
			t.Fatalf("tv2: the retry answered %d/%d, want %d/%d", again.ProducerID, again.ProducerEpoch, pid, epoch+1)
		}
		if n := len(c.CommittedRecords("t", 0)); n != 2 {
			t.Fatalf("tv%d: %d committed records, want 2", tv, n)
		}
	}
}

// TestTxnFenceFollowsClusterVersion: the fence of an ongoing transaction
// follows the cluster's finalized transaction.version at the moment of
// the fence, not the version the transaction started with: Kafka 4.4.0's
// coordinator ends a fenced (or timed out) transaction with the
// server's version, since no client request carries one. A version 1
// transaction fenced once the feature is 2 keeps the epoch the fence
// met, so the client's retry with it is answered the current pair; a
// version 2 transaction fenced once the feature is 1 forgets it
// (PRODUCER_FENCED). Either way an EndTxn v5 abort at the fenced epoch is
// a retry of the abort (the epoch is one below the id's) and a commit is
// INVALID_TXN_STATE, while EndTxn v4 is PRODUCER_FENCED.
func TestTxnFenceFollowsClusterVersion(t *testing.T) {
	for _, started := range []int16{1, 2} {
		c, x, pid, epoch := txnAt(t, started)
		if started == 1 {
			wantCode(t, "add", x.add(3, pid, epoch, "t", 0), nil)
			wantCode(t, "produce", x.produce(11, 0, pid, epoch, 0, 2).ErrorCode, nil)
		} else {
			wantCode(t, "produce", x.produce(12, 0, pid, epoch, 0, 2).ErrorCode, nil)
		}
		if err := c.SetTransactionVersion(3 - started); err != nil {
			t.Fatal(err)
		}
		wantCode(t, "fencing init", x.init(4, 60000, pid, epoch).ErrorCode, kerr.ConcurrentTransactions)
		waitState(t, c, "a", "CompleteAbort")
		wantCode(t, "EndTxn v4 at the fenced epoch", x.end(4, pid, epoch, false).ErrorCode, kerr.ProducerFenced)
		wantCode(t, "EndTxn v5 commit at the fenced epoch", x.end(5, pid, epoch, true).ErrorCode, kerr.InvalidTxnState)
		abort := x.end(5, pid, epoch, false)
		wantCode(t, "EndTxn v5 abort at the fenced epoch", abort.ErrorCode, nil)
		if abort.ProducerID != pid || abort.ProducerEpoch != epoch+1 {
			t.Fatalf("started at %d: the abort answered %d/%d, want %d/%d", started, abort.ProducerID, abort.ProducerEpoch, pid, epoch+1)
		}
		resp := x.initRetry(pid, epoch)
		if started == 2 {
			wantCode(t, "retry after a fence under version 1", resp.ErrorCode, kerr.ProducerFenced)
			continue
		}
		wantCode(t, "retry after a fence under version 2", resp.ErrorCode, nil)
		if resp.ProducerID != pid || resp.ProducerEpoch != epoch+1 {
			t.Fatalf("started at 1: the retry answered %d/%d, want %d/%d", resp.ProducerID, resp.ProducerEpoch, pid, epoch+1)
		}
		if n := len(c.CommittedRecords("t", 0)); n != 0 {
			t.Fatalf("%d committed records of the fenced transaction", n)
		}
	}
}

// TestTxnExhaustedEpochRetry: at an exhausted epoch a bump moves to a
// new producer id at epoch 0; the coordinator that moved answers a
// retry with the old pair (the old id, the exhausted epoch) the new pair,
// InitProducerId and EndTxn v5 alike; a coordinator that loaded the id
// fences the InitProducerId retry (it does not know the last epoch) and
// answers the EndTxn retry (told by the old producer id, kept in the log,
// and the epoch).
func TestTxnExhaustedEpochRetry(t *testing.T) {
	exhaust := func(c *Cluster) {
		c.mu.Lock()
		c.txns["a"].epoch = math.MaxInt16 - 1
		c.mu.Unlock()
	}
	const last = math.MaxInt16 - 1

	c, x, pid, _ := txnAt(t, 2)
	exhaust(c)
	bump := x.init(4, 60000, pid, last)
	wantCode(t, "bump at the exhausted epoch", bump.ErrorCode, nil)
	if bump.ProducerID == pid || bump.ProducerEpoch != 0 {
		t.Fatalf("bump at the exhausted epoch answered %d/%d, want a new id at 0", bump.ProducerID, bump.ProducerEpoch)
	}
	again := x.init(4, 60000, pid, last)
	if again.ErrorCode != 0 || again.ProducerID != bump.ProducerID || again.ProducerEpoch != 0 {
		t.Fatalf("retry answered %d/%d (%v), want %d/0", again.ProducerID, again.ProducerEpoch, kerr.ErrorForCode(again.ErrorCode), bump.ProducerID)
	}
	if err := c.MoveCoordinator("a", true, 1); err != nil {
		t.Fatal(err)
	}
	y := wireTo(t, c, c.Addrs()[1])
	wantCode(t, "retry at the coordinator that loaded", y.init(4, 60000, pid, last).ErrorCode, kerr.ProducerFenced)

	c, x, pid, _ = txnAt(t, 2)
	exhaust(c)
	wantCode(t, "produce", x.produce(12, 0, pid, last, 0, 1).ErrorCode, nil)
	end := x.end(5, pid, last, true)
	wantCode(t, "commit at the exhausted epoch", end.ErrorCode, nil)
	if end.ProducerID == pid || end.ProducerEpoch != 0 {
		t.Fatalf("commit at the exhausted epoch answered %d/%d, want a new id at 0", end.ProducerID, end.ProducerEpoch)
	}
	waitState(t, c, "a", "CompleteCommit")
	if err := c.MoveCoordinator("a", true, 1); err != nil {
		t.Fatal(err)
	}
	y = wireTo(t, c, c.Addrs()[1])
	retry := y.end(5, pid, last, true)
	wantCode(t, "the commit retried at the coordinator that loaded", retry.ErrorCode, nil)
	if retry.ProducerID != end.ProducerID || retry.ProducerEpoch != 0 {
		t.Fatalf("the commit's retry answered %d/%d, want %d/0", retry.ProducerID, retry.ProducerEpoch, end.ProducerID)
	}
}
