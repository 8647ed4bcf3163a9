package broker

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/longhaul-kafka/longhaul/protocol"
)

// txnWire drives the coordinator over one raw connection to node 0 (the
// coordinator of every key on a one-node cluster).
type txnWire struct {
	t  *testing.T
	c  *Cluster
	w  *wireClient
	id string
}

func newTxnWire(t *testing.T, c *Cluster, id string) *txnWire {
	return &txnWire{t: t, c: c, w: dialWire(t, c.Addr()), id: id}
}

func (x *txnWire) init(version int16, timeoutMs int32, pid int64, epoch int16) *kmsg.InitProducerIDResponse {
	req := kmsg.NewPtrInitProducerIDRequest()
	req.Version = version
	req.TransactionalID = kmsg.StringPtr(x.id)
	req.TransactionTimeoutMillis = timeoutMs
	req.ProducerID, req.ProducerEpoch = pid, epoch
	return x.w.do(req).(*kmsg.InitProducerIDResponse)
}

// mustInit runs InitProducerId v4 until it is not CONCURRENT_TRANSACTIONS
// and returns the id and epoch.
func (x *txnWire) mustInit() (int64, int16) {
	x.t.Helper()
	for range 500 {
		resp := x.init(4, 60000, -1, -1)
		if resp.ErrorCode == kerr.ConcurrentTransactions.Code {
			time.Sleep(2 * time.Millisecond)
			continue
		}
		if resp.ErrorCode != 0 {
			x.t.Fatalf("InitProducerId: %v", kerr.ErrorForCode(resp.ErrorCode))
		}
		return resp.ProducerID, resp.ProducerEpoch
	}
	x.t.Fatal("InitProducerId: CONCURRENT_TRANSACTIONS for a second")
	return 0, 0
}

func (x *txnWire) add(version int16, pid int64, epoch int16, topic string, parts ...int32) int16 {
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.Version = version
	req.TransactionalID, req.ProducerID, req.ProducerEpoch = x.id, pid, epoch
	rt := kmsg.NewAddPartitionsToTxnRequestTopic()
	rt.Topic, rt.Partitions = topic, parts
	req.Topics = append(req.Topics, rt)
	resp := x.w.do(req).(*kmsg.AddPartitionsToTxnResponse)
	return resp.Topics[0].Partitions[0].ErrorCode
}

func (x *txnWire) end(version int16, pid int64, epoch int16, commit bool) *kmsg.EndTxnResponse {
	req := kmsg.NewPtrEndTxnRequest()
	req.Version = version
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = x.id, pid, epoch, commit
	return x.w.do(req).(*kmsg.EndTxnResponse)
}

// produce sends one transactional batch of n records and returns the
// partition response.
func (x *txnWire) produce(version int16, part int32, pid int64, epoch int16, seq int32, n int) kmsg.ProduceResponseTopicPartition {
	x.t.Helper()
	var bb protocol.BatchBuilder
	for i := range n {
		bb.Append(1700000000000, nil, []byte{'x', byte('0' + i%10)}, nil)
	}
	b, err := bb.Build(nil, protocol.BatchHeader{ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq, Transactional: true})
	if err != nil {
		x.t.Fatal(err)
	}
	req := produceReq(x.c, version, "t", part, b)
	req.TransactionID = kmsg.StringPtr(x.id)
	return partResp(x.t, x.w.do(req))
}

func wantCode(t *testing.T, what string, got int16, want *kerr.Error) {
	t.Helper()
	var code int16
	if want != nil {
		code = want.Code
	}
	if got != code {
		t.Fatalf("%s: got %v, want %v", what, kerr.ErrorForCode(got), want)
	}
}

// TestTxnConcurrentTransactions holds a committed transaction's markers:
// until they are written, InitProducerId, AddPartitionsToTxn, EndTxn and a
// transaction version 2 produce of the next transaction are answered
// CONCURRENT_TRANSACTIONS, and the partition's last stable offset stays
// at the transaction's first offset; once released everything proceeds.
func TestTxnConcurrentTransactions(t *testing.T) {
	for _, tv := range []int16{1, 2} {
		c := startCluster(t, Config{Topics: []TopicConfig{{Name: "t", Partitions: 2}}})
		if err := c.SetTransactionVersion(tv); err != nil {
			t.Fatal(err)
		}
		x := newTxnWire(t, c, "a")
		pid, epoch := x.mustInit()
		pv := int16(11)
		endV := int16(4)
		if tv == 2 {
			pv, endV = 12, 5
		} else {
			wantCode(t, "add", x.add(3, pid, epoch, "t", 0), nil)
		}
		wantCode(t, "produce", x.produce(pv, 0, pid, epoch, 0, 3).ErrorCode, nil)
		if lso := c.LastStableOffset("t", 0); lso != 0 {
			t.Fatalf("tv%d: LSO %d with the transaction open, want 0", tv, lso)
		}
		c.HoldMarkers(true)
		end := x.end(endV, pid, epoch, true)
		wantCode(t, "end", end.ErrorCode, nil)
		next := epoch
		if tv == 2 {
			next = epoch + 1
			if end.ProducerEpoch != next || end.ProducerID != pid {
				t.Fatalf("EndTxn v5 answered %d/%d, want %d/%d", end.ProducerID, end.ProducerEpoch, pid, next)
			}
		}
		if info, _ := c.Transaction("a"); info.State != "PrepareCommit" {
			t.Fatalf("tv%d: state %s with markers held, want PrepareCommit", tv, info.State)
		}
		wantCode(t, "EndTxn again", x.end(endV, pid, epoch, true).ErrorCode, kerr.ConcurrentTransactions)
		wantCode(t, "AddPartitionsToTxn", x.add(3, pid, next, "t", 1), kerr.ConcurrentTransactions)
		if tv == 2 {
			wantCode(t, "produce of the next transaction", x.produce(12, 1, pid, next, 0, 1).ErrorCode, kerr.ConcurrentTransactions)
		}
		wantCode(t, "InitProducerId", x.init(4, 60000, -1, -1).ErrorCode, kerr.ConcurrentTransactions)
		if lso := c.LastStableOffset("t", 0); lso != 0 {
			t.Fatalf("tv%d: LSO %d with markers held, want 0", tv, lso)
		}
		if n := len(c.CommittedRecords("t", 0)); n != 0 {
			t.Fatalf("tv%d: %d committed records before the marker", tv, n)
		}
		c.HoldMarkers(false)
		if info, _ := c.Transaction("a"); info.State != "CompleteCommit" {
			t.Fatalf("tv%d: state %s after release, want CompleteCommit", tv, info.State)
		}
		if lso := c.LastStableOffset("t", 0); lso != 4 {
			t.Fatalf("tv%d: LSO %d after the marker, want 4 (3 records and the marker)", tv, lso)
		}
		if n := len(c.CommittedRecords("t", 0)); n != 3 {
			t.Fatalf("tv%d: %d committed records, want 3", tv, n)
		}
		wantCode(t, "EndTxn retry", x.end(endV, pid, epoch, true).ErrorCode, nil)
		wantCode(t, "EndTxn retry with the other result", x.end(endV, pid, epoch, false).ErrorCode, kerr.InvalidTxnState)
		if st := c.TxnStats(); st.ConcurrentTransactions < 3+int64(tv-1) || st.Committed != 1 || st.Markers != 1 {
			t.Fatalf("tv%d: stats %+v", tv, st)
		}
	}
}

// TestTxnVersion1NeedsAddPartitions: a transactional produce to a
// partition not added to the transaction fails at v11 and below
// (INVALID_TXN_STATE up to v10, TRANSACTION_ABORTABLE at v11) under either
// transaction version, and Produce v12 adds it under either, as Kafka
// 4.4.0 answered a probe with transaction.version 1 finalized.
func TestTxnVersion1NeedsAddPartitions(t *testing.T) {
	c := startCluster(t, Config{Topics: []TopicConfig{{Name: "t", Partitions: 2}}})
	if err := c.SetTransactionVersion(1); err != nil {
		t.Fatal(err)
	}
	x := newTxnWire(t, c, "a")
	pid, epoch := x.mustInit()
	wantCode(t, "v10", x.produce(10, 0, pid, epoch, 0, 1).ErrorCode, kerr.InvalidTxnState)
	wantCode(t, "v11", x.produce(11, 0, pid, epoch, 0, 1).ErrorCode, kerr.TransactionAbortable)
	wantCode(t, "add", x.add(3, pid, epoch, "t", 0), nil)
	wantCode(t, "v11 after add", x.produce(11, 0, pid, epoch, 0, 1).ErrorCode, nil)
	wantCode(t, "other partition", x.produce(11, 1, pid, epoch, 0, 1).ErrorCode, kerr.TransactionAbortable)
	if err := c.SetTransactionVersion(2); err != nil {
		t.Fatal(err)
	}
	wantCode(t, "v11 under tv2", x.produce(11, 1, pid, epoch, 0, 1).ErrorCode, kerr.TransactionAbortable)
	if err := c.SetTransactionVersion(1); err != nil {
		t.Fatal(err)
	}
	wantCode(t, "v12 under tv1", x.produce(12, 1, pid, epoch, 0, 1).ErrorCode, nil)
	if info, _ := c.Transaction("a"); info.Partitions != 2 || info.State != "Ongoing" {
		t.Fatalf("transaction %+v, want 2 partitions, Ongoing", info)
	}
	if got := len(c.Records("t", 0)) + len(c.Records("t", 1)); got != 2 {
		t.Fatalf("%d records appended, want the 2 accepted", got)
	}
}

// TestTxnVersion2FirstSequence: under transaction version 2 a
// transaction's first batch on a fresh partition must have sequence 0
// (Kafka 4.1+), unless SetLenientTransactionStart (Kafka 4.0).
func TestTxnVersion2FirstSequence(t *testing.T) {
	c := startCluster(t, Config{Topics: []TopicConfig{{Name: "t", Partitions: 1}}})
	x := newTxnWire(t, c, "a")
	pid, epoch := x.mustInit()
	wantCode(t, "seq 3", x.produce(12, 0, pid, epoch, 3, 1).ErrorCode, kerr.OutOfOrderSequenceNumber)
	c.SetLenientTransactionStart(true)
	wantCode(t, "seq 3, lenient", x.produce(12, 0, pid, epoch, 3, 1).ErrorCode, nil)
}

// TestTxnEpochBumpPerTransaction: under transaction version 2 every
// EndTxn v5 answers the next epoch; its markers carry it, so the old
// epoch's batches are fenced (INVALID_PRODUCER_EPOCH) and the next
// transaction starts at sequence 0. Under version 1 the epoch stays and
// sequences continue.
func TestTxnEpochBumpPerTransaction(t *testing.T) {
	c := startCluster(t, Config{Topics: []TopicConfig{{Name: "t", Partitions: 1}}})
	c.SetMarkerDelay(0)
	x := newTxnWire(t, c, "a")
	pid, epoch := x.mustInit()
	wantCode(t, "produce", x.produce(12, 0, pid, epoch, 0, 2).ErrorCode, nil)
	end := x.end(5, pid, epoch, true)
	wantCode(t, "end", end.ErrorCode, nil)
	waitState(t, c, "a", "CompleteCommit")
	wantCode(t, "old epoch", x.produce(12, 0, pid, epoch, 2, 1).ErrorCode, kerr.InvalidProducerEpoch)
	wantCode(t, "new epoch seq 0", x.produce(12, 0, end.ProducerID, end.ProducerEpoch, 0, 1).ErrorCode, nil)
	// An abort with nothing produced is allowed under version 2 and
	// bumps the epoch; a commit with nothing is INVALID_TXN_STATE.
	end2 := x.end(5, end.ProducerID, end.ProducerEpoch, false)
	wantCode(t, "abort", end2.ErrorCode, nil)
	waitState(t, c, "a", "CompleteAbort")
	empty := x.end(5, end2.ProducerID, end2.ProducerEpoch, false)
	wantCode(t, "empty abort", empty.ErrorCode, nil)
	if empty.ProducerEpoch != end2.ProducerEpoch+1 {
		t.Fatalf("empty abort answered epoch %d, want %d", empty.ProducerEpoch, end2.ProducerEpoch+1)
	}
	wantCode(t, "empty commit", x.end(5, empty.ProducerID, empty.ProducerEpoch, true).ErrorCode, kerr.InvalidTxnState)

	// Version 1: the epoch stays, sequences continue.
	y := newTxnWire(t, c, "b")
	pid, epoch = y.mustInit()
	wantCode(t, "add", y.add(3, pid, epoch, "t", 0), nil)
	wantCode(t, "produce", y.produce(11, 0, pid, epoch, 0, 2).ErrorCode, nil)
	if end := y.end(4, pid, epoch, true); end.ErrorCode != 0 {
		t.Fatal(kerr.ErrorForCode(end.ErrorCode))
	}
	waitState(t, c, "b", "CompleteCommit")
	wantCode(t, "add", y.add(3, pid, epoch, "t", 0), nil)
	wantCode(t, "seq 0 again", y.produce(11, 0, pid, epoch, 0, 1).ErrorCode, kerr.OutOfOrderSequenceNumber)
	wantCode(t, "seq 2", y.produce(11, 0, pid, epoch, 2, 1).ErrorCode, nil)
}

// waitState waits until the transactional id's state is want.
func waitState(t *testing.T, c *Cluster, id, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		info, _ := c.Transaction(id)
		if info.State == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("transactional id %s: state %s, want %s", id, info.State, want)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestTxnInitProducerIDFences: an InitProducerId of a transactional id
// with an ongoing transaction bumps the epoch, aborts the transaction
// (CONCURRENT_TRANSACTIONS until its markers are written) and the retry
// gets a further epoch; the fenced producer's requests then fail.
func TestTxnInitProducerIDFences(t *testing.T) {
	c := startCluster(t, Config{Topics: []TopicConfig{{Name: "t", Partitions: 1}}})
	if err := c.SetTransactionVersion(1); err != nil {
		t.Fatal(err)
	}
	old := newTxnWire(t, c, "a")
	pid, epoch := old.mustInit()
	wantCode(t, "add", old.add(3, pid, epoch, "t", 0), nil)
	wantCode(t, "produce", old.produce(11, 0, pid, epoch, 0, 2).ErrorCode, nil)

	zombieKiller := newTxnWire(t, c, "a")
	c.HoldMarkers(true)
	wantCode(t, "fencing init", zombieKiller.init(4, 60000, -1, -1).ErrorCode, kerr.ConcurrentTransactions)
	wantCode(t, "init while aborting", zombieKiller.init(4, 60000, -1, -1).ErrorCode, kerr.ConcurrentTransactions)
	c.HoldMarkers(false)
	pid2, epoch2 := zombieKiller.mustInit()
	if pid2 != pid || epoch2 != epoch+2 {
		t.Fatalf("after fencing: %d/%d, want %d/%d", pid2, epoch2, pid, epoch+2)
	}
	wantCode(t, "fenced EndTxn", old.end(4, pid, epoch, true).ErrorCode, kerr.ProducerFenced)
	wantCode(t, "fenced EndTxn v1", old.end(1, pid, epoch, true).ErrorCode, kerr.InvalidProducerEpoch)
	wantCode(t, "fenced add", old.add(3, pid, epoch, "t", 0), kerr.ProducerFenced)
	wantCode(t, "fenced produce", old.produce(11, 0, pid, epoch, 2, 1).ErrorCode, kerr.InvalidProducerEpoch)
	wantCode(t, "fenced init (KIP-360 at the old epoch)", old.init(4, 60000, pid, epoch).ErrorCode, kerr.ProducerFenced)
	wantCode(t, "fenced init v3", old.init(3, 60000, pid, epoch).ErrorCode, kerr.InvalidProducerEpoch)
	if n := len(c.CommittedRecords("t", 0)); n != 0 {
		t.Fatalf("%d committed records of the fenced transaction", n)
	}
	if st := c.TxnStats(); st.Fenced != 1 || st.Aborted != 1 {
		t.Fatalf("stats %+v, want 1 fenced, 1 aborted", st)
	}
	// KIP-360: the current pair bumps, and a retry of that bump is
	// answered the same pair.
	bump := zombieKiller.init(4, 60000, pid2, epoch2)
	wantCode(t, "bump", bump.ErrorCode, nil)
	again := zombieKiller.init(4, 60000, pid2, epoch2)
	if again.ErrorCode != 0 || again.ProducerEpoch != bump.ProducerEpoch || bump.ProducerEpoch != epoch2+1 {
		t.Fatalf("bump %d then retry %d (%v), want %d twice", bump.ProducerEpoch, again.ProducerEpoch, kerr.ErrorForCode(again.ErrorCode), epoch2+1)
	}
}

// TestTxnTimeout: a transaction outliving its timeout is aborted by the
// coordinator, which bumps the epoch: under version 1 the producer's
// EndTxn is PRODUCER_FENCED; under version 2 its abort is accepted as a
// retry and its commit is INVALID_TXN_STATE (Kafka 4.4.0). Its batches are
// aborted.
func TestTxnTimeout(t *testing.T) {
	for _, tv := range []int16{1, 2} {
		c := startCluster(t, Config{Topics: []TopicConfig{{Name: "t", Partitions: 1}}})
		if err := c.SetTransactionVersion(tv); err != nil {
			t.Fatal(err)
		}
		x := newTxnWire(t, c, "a")
		resp := x.init(4, 50, -1, -1) // a 50 ms timeout
		pid, epoch := resp.ProducerID, resp.ProducerEpoch
		if tv == 1 {
			wantCode(t, "add", x.add(3, pid, epoch, "t", 0), nil)
			wantCode(t, "produce", x.produce(11, 0, pid, epoch, 0, 2).ErrorCode, nil)
		} else {
			wantCode(t, "produce", x.produce(12, 0, pid, epoch, 0, 2).ErrorCode, nil)
		}
		waitState(t, c, "a", "CompleteAbort")
		info, _ := c.Transaction("a")
		if !info.TimedOut || info.ProducerEpoch != epoch+1 {
			t.Fatalf("tv%d: after the timeout %+v, want TimedOut at epoch %d", tv, info, epoch+1)
		}
		if tv == 1 {
			wantCode(t, "commit", x.end(4, pid, epoch, true).ErrorCode, kerr.ProducerFenced)
		} else {
			wantCode(t, "commit", x.end(5, pid, epoch, true).ErrorCode, kerr.InvalidTxnState)
			abort := x.end(5, pid, epoch, false)
			wantCode(t, "abort", abort.ErrorCode, nil)
			if abort.ProducerEpoch != epoch+1 {
				t.Fatalf("abort after the timeout answered epoch %d, want %d", abort.ProducerEpoch, epoch+1)
			}
		}
		if n := len(c.CommittedRecords("t", 0)); n != 0 {
			t.Fatalf("tv%d: %d committed records of the timed-out transaction", tv, n)
		}
		if c.TimeOutTransaction("a") {
			t.Fatal("TimeOutTransaction reported an ongoing transaction after the abort")
		}
	}
}

// TestTxnCoordinatorChecks: requests for a transactional id at a node not
// coordinating it are NOT_COORDINATOR; FindCoordinator names the
// coordinator (batched and not), MoveCoordinator moves it, and injected
// coordinator errors are answered once each.
func TestTxnCoordinatorChecks(t *testing.T) {
	c := startCluster(t, Config{Nodes: 3, Topics: []TopicConfig{{Name: "t", Partitions: 1}}})
	const id = "some-id"
	coord := c.Coordinator(id, true)
	if want := int32(coordPartition(id) % 3); coord != want {
		t.Fatalf("coordinator %d, want %d", coord, want)
	}
	find := func(version int16, keyType int8, key string) (int32, int16) {
		w := dialWire(t, c.Addr())
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.Version, req.CoordinatorType = version, keyType
		if version >= 4 {
			req.CoordinatorKeys = []string{key}
			resp := w.do(req).(*kmsg.FindCoordinatorResponse)
			return resp.Coordinators[0].NodeID, resp.Coordinators[0].ErrorCode
		}
		req.CoordinatorKey = key
		resp := w.do(req).(*kmsg.FindCoordinatorResponse)
		return resp.NodeID, resp.ErrorCode
	}
	for _, v := range []int16{1, 3, 4, 6} {
		if n, code := find(v, 1, id); n != coord || code != 0 {
			t.Fatalf("FindCoordinator v%d: node %d code %d, want %d", v, n, code, coord)
		}
	}
	other := (coord + 1) % 3
	w := dialWire(t, c.Addrs()[other])
	x := &txnWire{t: t, c: c, w: w, id: id}
	wantCode(t, "init at another node", x.init(4, 60000, -1, -1).ErrorCode, kerr.NotCoordinator)
	if err := c.MoveCoordinator(id, true, other); err != nil {
		t.Fatal(err)
	}
	if n, _ := find(4, 1, id); n != other {
		t.Fatalf("after the move FindCoordinator names %d, want %d", n, other)
	}
	c.InjectCoordinatorError(22, kerr.CoordinatorLoadInProgress.Code, 1)
	wantCode(t, "injected", x.init(4, 60000, -1, -1).ErrorCode, kerr.CoordinatorLoadInProgress)
	pid, epoch := x.mustInit()
	c.InjectCoordinatorError(10, kerr.CoordinatorNotAvailable.Code, 1)
	if _, code := find(4, 1, id); code != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("injected FindCoordinator error: got %d", code)
	}
	c.InjectCoordinatorError(-1, kerr.NotCoordinator.Code, 1)
	wantCode(t, "injected any", x.end(5, pid, epoch, false).ErrorCode, kerr.NotCoordinator)
	wantCode(t, "after the injection", x.end(5, pid, epoch, false).ErrorCode, nil)
	if err := c.MoveCoordinator(id, true, 7); err == nil {
		t.Fatal("MoveCoordinator to an unknown node: no error")
	}
}

// TestJavaHash pins coordPartition to Java's String.hashCode.
func TestJavaHash(t *testing.T) {
	for s, want := range map[string]int32{"": 0, "a": 97, "hello": 99162322, "é€": 233*31 + 8364, "polygenelubricants": math.MinInt32} {
		if got := javaHash(s); got != want {
			t.Errorf("javaHash(%q) = %d, want %d", s, got, want)
		}
	}
	if p := coordPartition("polygenelubricants"); p != 0 {
		t.Errorf("coordPartition of a MinInt32 hash = %d, want 0 (Utils.abs)", p)
	}
}

// TestTxnDenyTransactionalID: a denied transactional id is
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED at every coordinator request and
// at Produce; allowed again, it works.
func TestTxnDenyTransactionalID(t *testing.T) {
	c := startCluster(t, Config{Topics: []TopicConfig{{Name: "t", Partitions: 1}}})
	x := newTxnWire(t, c, "a")
	pid, epoch := x.mustInit()
	c.DenyTransactionalID("a", true)
	denied := kerr.TransactionalIDAuthorizationFailed
	wantCode(t, "init", x.init(4, 60000, -1, -1).ErrorCode, denied)
	wantCode(t, "add", x.add(3, pid, epoch, "t", 0), denied)
	wantCode(t, "produce", x.produce(12, 0, pid, epoch, 0, 1).ErrorCode, denied)
	wantCode(t, "TxnOffsetCommit", x.txnCommit(5, pid, epoch, "g", "", -1, 1), denied)
	add := kmsg.NewPtrAddOffsetsToTxnRequest()
	add.Version, add.TransactionalID, add.ProducerID, add.ProducerEpoch, add.Group = 3, "a", pid, epoch, "g"
	wantCode(t, "AddOffsetsToTxn", x.w.do(add).(*kmsg.AddOffsetsToTxnResponse).ErrorCode, denied)
	wantCode(t, "end", x.end(5, pid, epoch, false).ErrorCode, denied)
	c.DenyTransactionalID("a", false)
	wantCode(t, "produce allowed", x.produce(12, 0, pid, epoch, 0, 1).ErrorCode, nil)
}

// TestTxnTimedOutCommitError: a commit of a transaction that timed out is
// INVALID_TXN_STATE, as Kafka 4.4.0 answers it (probed);
// SetTimedOutCommitError(PRODUCER_FENCED) gives KAFKA-20785's answer, any
// other code the default again.
func TestTxnTimedOutCommitError(t *testing.T) {
	c := startCluster(t, Config{Topics: []TopicConfig{{Name: "t", Partitions: 1}}})
	c.SetMarkerDelay(0)
	x := newTxnWire(t, c, "a")
	pid, epoch := x.mustInit()
	wantCode(t, "produce", x.produce(12, 0, pid, epoch, 0, 1).ErrorCode, nil)
	if !c.TimeOutTransaction("a") {
		t.Fatal("no ongoing transaction")
	}
	waitState(t, c, "a", "CompleteAbort")
	wantCode(t, "commit, default", x.end(5, pid, epoch, true).ErrorCode, kerr.InvalidTxnState)
	c.SetTimedOutCommitError(kerr.ProducerFenced.Code)
	wantCode(t, "commit, KAFKA-20785", x.end(5, pid, epoch, true).ErrorCode, kerr.ProducerFenced)
	c.SetTimedOutCommitError(kerr.UnknownServerError.Code)
	wantCode(t, "commit, default again", x.end(5, pid, epoch, true).ErrorCode, kerr.InvalidTxnState)
}

// TestTxnKafka24Node: a Kafka 2.4 node offers the transaction requests at
// their 2.4 versions and no transaction.version feature, and kgo's
// transactions work against a cluster of such nodes (version 1).
func TestTxnKafka24Node(t *testing.T) {
	c := startCluster(t, Config{Nodes: 2, Kafka24Nodes: []int32{0, 1}, Topics: []TopicConfig{{Name: "t", Partitions: 2}}})
	w := dialWire(t, c.Addr())
	av := kmsg.NewPtrApiVersionsRequest()
	av.Version = 3
	resp := w.do(av).(*kmsg.ApiVersionsResponse)
	maxOf := map[int16]int16{}
	for _, k := range resp.ApiKeys {
		maxOf[k.ApiKey] = k.MaxVersion
	}
	for key, want := range map[int16]int16{0: 8, 10: 3, 22: 2, 24: 1, 26: 1, 28: 2, 11: 6} {
		if maxOf[key] != want {
			t.Errorf("key %d: max v%d, want v%d", key, maxOf[key], want)
		}
	}
	if len(resp.FinalizedFeatures) != 0 || len(resp.SupportedFeatures) != 0 {
		t.Errorf("features %+v %+v on a Kafka 2.4 node", resp.SupportedFeatures, resp.FinalizedFeatures)
	}
	cl := txnClient(t, c, "old")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := produceTxn(ctx, cl, 2, []string{"a", "b"}, true); err != nil {
		t.Fatal(err)
	}
	if err := produceTxn(ctx, cl, 2, []string{"x", "y"}, false); err != nil {
		t.Fatal(err)
	}
	got := readCommitted(t, c, 2, 2)
	if len(got[0]) != 1 || got[0][0] != "a" || len(got[1]) != 1 || got[1][0] != "b" {
		t.Fatalf("read_committed read %q", got)
	}
}

// TestTxnTimeoutTimerStopped: a transaction that ends before its timeout
// leaves no timer behind, so long runs of short transactions do not pile
// up timers.
func TestTxnTimeoutTimerStopped(t *testing.T) {
	c := startCluster(t, Config{Topics: []TopicConfig{{Name: "t", Partitions: 1}}})
	c.HoldMarkers(true) // no marker timers either
	x := newTxnWire(t, c, "a")
	pid, epoch := x.mustInit()
	for i := range 20 {
		wantCode(t, "produce", x.produce(12, 0, pid, epoch, 0, 1).ErrorCode, nil)
		end := x.end(5, pid, epoch, i%2 == 0)
		wantCode(t, "end", end.ErrorCode, nil)
		c.HoldMarkers(false)
		c.HoldMarkers(true)
		pid, epoch = end.ProducerID, end.ProducerEpoch
	}
	c.mu.Lock()
	n := len(c.timers)
	c.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d timers pending after 20 ended transactions, want 0", n)
	}
}

// initRetry sends InitProducerId v4 with pid and epoch until the answer
// is not CONCURRENT_TRANSACTIONS, as a client retries it.
func (x *txnWire) initRetry(pid int64, epoch int16) *kmsg.InitProducerIDResponse {
	x.t.Helper()
	for range 500 {
		resp := x.init(4, 60000, pid, epoch)
		if resp.ErrorCode != kerr.ConcurrentTransactions.Code {
			return resp
		}
		time.Sleep(2 * time.Millisecond)
	}
	x.t.Fatal("InitProducerId: CONCURRENT_TRANSACTIONS for a second")
	return nil
}

// TestTxnInitFencesOngoingWhateverEpoch: an InitProducerId with the
// producer id of an ongoing transaction fences it (aborted,
// CONCURRENT_TRANSACTIONS) whatever epoch it carries, as Kafka checks the
// state before the epoch; another producer id is PRODUCER_FENCED and
// leaves the transaction open.
func TestTxnInitFencesOngoingWhateverEpoch(t *testing.T) {
	for _, tv := range []int16{1, 2} {
		c := startCluster(t, Config{Topics: []TopicConfig{{Name: "t", Partitions: 1}}})
		if err := c.SetTransactionVersion(tv); err != nil {
			t.Fatal(err)
		}
		x := newTxnWire(t, c, "a")
		x.mustInit()
		pid, epoch := x.mustInit() // epoch 1: epoch 0 is stale
		wantCode(t, "add", x.add(3, pid, epoch, "t", 0), nil)
		wantCode(t, "produce", x.produce(11, 0, pid, epoch, 0, 2).ErrorCode, nil)
		wantCode(t, "init, another producer id", x.init(4, 60000, pid+7, 0).ErrorCode, kerr.ProducerFenced)
		if st := c.TxnStats(); st.Fenced != 0 {
			t.Fatalf("tv%d: stats %+v after another producer id's init, want none fenced", tv, st)
		}
		wantCode(t, "init, stale epoch", x.init(4, 60000, pid, epoch-1).ErrorCode, kerr.ConcurrentTransactions)
		if st := c.TxnStats(); st.Fenced != 1 {
			t.Fatalf("tv%d: stats %+v, want 1 fenced", tv, st)
		}
		resp := x.initRetry(pid, epoch+1)
		wantCode(t, "init with the fence's epoch", resp.ErrorCode, nil)
		if resp.ProducerID != pid || resp.ProducerEpoch != epoch+2 {
			t.Fatalf("tv%d: after the fence %d/%d, want %d/%d", tv, resp.ProducerID, resp.ProducerEpoch, pid, epoch+2)
		}
		if n := len(c.CommittedRecords("t", 0)); n != 0 {
			t.Fatalf("tv%d: %d committed records of the fenced transaction", tv, n)
		}
	}
}

// TestTxnFenceForgetsLastEpochTV1: under transaction version 1 the fence
// of an ongoing transaction forgets the epoch before it (Kafka's fence
// sets lastProducerEpoch to none): the client retrying InitProducerId
// with the epoch the fence met is PRODUCER_FENCED once the abort
// completed. Under version 2 that retry is answered the current pair.
func TestTxnFenceForgetsLastEpochTV1(t *testing.T) {
	for _, tv := range []int16{1, 2} {
		c := startCluster(t, Config{Topics: []TopicConfig{{Name: "t", Partitions: 1}}})
		if err := c.SetTransactionVersion(tv); err != nil {
			t.Fatal(err)
		}
		x := newTxnWire(t, c, "a")
		pid, epoch := x.mustInit()
		wantCode(t, "add", x.add(3, pid, epoch, "t", 0), nil)
		wantCode(t, "produce", x.produce(11, 0, pid, epoch, 0, 2).ErrorCode, nil)
		c.HoldMarkers(true)
		wantCode(t, "fencing init", x.init(4, 60000, pid, epoch).ErrorCode, kerr.ConcurrentTransactions)
		wantCode(t, "retry while aborting", x.init(4, 60000, pid, epoch).ErrorCode, kerr.ConcurrentTransactions)
		c.HoldMarkers(false)
		resp := x.initRetry(pid, epoch)
		if tv == 1 {
			wantCode(t, "tv1 retry after the fence", resp.ErrorCode, kerr.ProducerFenced)
			continue
		}
		wantCode(t, "tv2 retry after the fence", resp.ErrorCode, nil)
		if resp.ProducerID != pid || resp.ProducerEpoch != epoch+1 {
			t.Fatalf("tv2: retry answered %d/%d, want %d/%d", resp.ProducerID, resp.ProducerEpoch, pid, epoch+1)
		}
	}
}
