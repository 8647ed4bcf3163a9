package producer

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/longhaul-kafka/longhaul/internal/broker"
	"github.com/longhaul-kafka/longhaul/protocol"
)

// offsetsSent runs one SendOffsets call of group g through the core until
// its TxnOffsetCommit is asked for, answering a FindCoordinator (if one is
// asked for first) with addr, and an AddOffsetsToTxn under version 1. It
// reports whether a FindCoordinator was asked for.
func (h *txnHarness) offsetsSent(tv int, g string, addr string) (found bool) {
	h.t.Helper()
	require.NoError(h.t, h.c.sendOffsets(protocol.GroupMetadata{GroupID: g}, []protocol.TxnOffset{{TopicPartition: tp0, Offset: 1}}))
	req, _ := h.c.next()
	if req.kind == txnReqFindCoordinator {
		require.Equal(h.t, protocol.CoordinatorGroup, req.keyType)
		require.Equal(h.t, g, req.key)
		h.ok(h.c.onCoordinator(protocol.CoordinatorResult{NodeID: 2, Addr: addr}))
		found = true
		req, _ = h.c.next()
	}
	if tv == 1 {
		require.Equal(h.t, txnReqAddOffsets, req.kind)
		h.ok(h.c.onAddOffsets(0))
		req, _ = h.c.next()
	}
	require.Equal(h.t, txnReqTxnOffsetCommit, req.kind)
	require.Equal(h.t, g, req.group.GroupID)
	return found
}

// committedOffsets answers the TxnOffsetCommit in flight with success.
func (h *txnHarness) committedOffsets() {
	h.t.Helper()
	out := h.ok(h.c.onTxnOffsetCommit([]protocol.PartitionErrorCode{{TopicPartition: tp0}}))
	require.Equal(h.t, []txnDone{{txnOpSendOffsets, nil}}, out.done)
}

// TestTxnGroupCoordinatorKept: the coordinator found for a group is kept
// by group id, in the transaction and the next ones, under both
// versions: a second SendOffsets call for the group asks for no
// FindCoordinator, another group finds its own.
func TestTxnGroupCoordinatorKept(t *testing.T) {
	for _, tv := range []int{1, 2} {
		h := newTxnHarness(t, false)
		h.initialized()
		require.NoError(t, h.c.begin(tv))
		require.True(t, h.offsetsSent(tv, "g", "b:2"), "tv%d: the first call finds the coordinator", tv)
		h.committedOffsets()
		require.False(t, h.offsetsSent(tv, "g", "b:2"), "tv%d: kept in the transaction", tv)
		h.committedOffsets()
		require.True(t, h.offsetsSent(tv, "h", "b:3"), "tv%d: another group finds its own", tv)
		h.committedOffsets()
		require.NoError(t, h.c.commit())
		h.expect(txnReqEndTxn)
		h.ok(h.c.onEndTxn(protocol.EndTxnResult{ProducerID: 7, Epoch: 1}))
		require.Equal(t, txnReady, h.c.state)

		require.NoError(t, h.c.begin(tv))
		require.False(t, h.offsetsSent(tv, "g", "b:2"), "tv%d: kept in the next transaction", tv)
		h.committedOffsets()
		require.False(t, h.offsetsSent(tv, "h", "b:3"), "tv%d", tv)
		h.committedOffsets()
		require.Equal(t, "b:2", h.c.groupCoordinator("g"))
		require.Equal(t, "b:3", h.c.groupCoordinator("h"))
		require.Empty(t, h.c.groupCoordinator("unknown"))
	}
}

// TestTxnGroupCoordinatorDropped: NOT_COORDINATOR,
// COORDINATOR_NOT_AVAILABLE and REQUEST_TIMED_OUT on TxnOffsetCommit, and
// a TxnOffsetCommit without an answer, drop the group's coordinator: the
// call finds it again and is sent there (under version 1 without a second
// AddOffsetsToTxn). COORDINATOR_LOAD_IN_PROGRESS keeps it: the call is
// sent again, after a backoff, to the same coordinator. Another group's
// coordinator stays kept.
func TestTxnGroupCoordinatorDropped(t *testing.T) {
	type answer struct {
		code int16 // -1: no answer
		find bool
	}
	for _, a := range []answer{
		{kerr.NotCoordinator.Code, true},
		{kerr.CoordinatorNotAvailable.Code, true},
		{kerr.RequestTimedOut.Code, true},
		{-1, true},
		{kerr.CoordinatorLoadInProgress.Code, false},
	} {
		for _, tv := range []int{1, 2} {
			name := fmt.Sprintf("tv%d code %d", tv, a.code)
			h := newTxnHarness(t, false)
			h.initialized()
			require.NoError(t, h.c.begin(tv))
			h.offsetsSent(tv, "h", "b:3")
			h.committedOffsets()
			require.True(t, h.offsetsSent(tv, "g", "b:2"), name)
			var out txnOutcome
			if a.code < 0 {
				out = h.ok(h.c.transportFailed(txnReqTxnOffsetCommit, true))
			} else {
				out = h.ok(h.c.onTxnOffsetCommit([]protocol.PartitionErrorCode{{TopicPartition: tp0, ErrorCode: a.code}}))
			}
			require.True(t, out.backoff, name)
			require.Empty(t, out.done, name)
			req := h.expect(map[bool]txnReqKind{true: txnReqFindCoordinator, false: txnReqTxnOffsetCommit}[a.find])
			if a.find {
				require.Empty(t, h.c.groupCoordinator("g"), name)
				require.Equal(t, "g", req.key, name)
				h.ok(h.c.onCoordinator(protocol.CoordinatorResult{NodeID: 1, Addr: "b:1"}))
				h.expect(txnReqTxnOffsetCommit) // the group was added already
			}
			h.committedOffsets()
			want := map[bool]string{true: "b:1", false: "b:2"}[a.find]
			require.Equal(t, want, h.c.groupCoordinator("g"), name)
			require.Equal(t, "b:3", h.c.groupCoordinator("h"), name)
		}
	}
}

// findCounter counts FindCoordinator requests and, per node, the
// TxnOffsetCommit requests answered.
type findCounter struct {
	mu     sync.Mutex
	finds  int
	commit map[int32]int
}

func (f *findCounter) OnRequestDone(r RequestInfo) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch r.API {
	case 10:
		f.finds++
	case 28:
		if r.Err == nil {
			if f.commit == nil {
				f.commit = map[int32]int{}
			}
			f.commit[r.Node]++
		}
	}
}

// take returns the counts since the last take and zeroes them.
func (f *findCounter) take() (finds int, commit map[int32]int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	finds, commit = f.finds, f.commit
	f.finds, f.commit = 0, nil
	return finds, commit
}

// TestTransactionGroupCoordinatorKept: on the embedded broker, under
// transaction versions 1 and 2, a SendOffsetsToTransaction for a group
// whose coordinator was found sends no FindCoordinator, in later
// transactions too, for each of two groups on different coordinators.
// When the group's coordinator moves, the old one answers NOT_COORDINATOR,
// one FindCoordinator finds the new one, the offsets are committed there
// once, and the next transaction sends no FindCoordinator again. The
// offsets read back are the last committed.
func TestTransactionGroupCoordinatorKept(t *testing.T) {
	for _, tv := range []int16{1, 2} {
		t.Run(fmt.Sprintf("TV%d", tv), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newTxnEnv(t, tv, broker.Config{})
				ctx := context.Background()
				eos := e.c.Coordinator("eos", false)
				require.NoError(t, e.c.MoveCoordinator("other", false, (eos+1)%3))
				f := &findCounter{}
				p := e.producer(Hooks(f))
				txn := func(offset int64, groups ...string) {
					t.Helper()
					require.NoError(t, p.BeginTransaction())
					wait := produceAll(p, "out", 0, fmt.Sprint(offset))
					for _, g := range groups {
						require.NoError(t, p.SendOffsetsToTransaction(ctx, GroupMetadata{GroupID: g, Generation: -1},
							[]TransactionOffset{{Topic: "in", Offset: offset, LeaderEpoch: -1}}))
					}
					require.NoError(t, wait()[0])
					require.NoError(t, p.CommitTransaction(ctx))
					e.settled()
					for _, g := range groups {
						off, ok := e.c.CommittedOffset(g, "in", 0)
						require.True(t, ok, g)
						require.Equal(t, offset, off, g)
					}
				}
				require.NoError(t, p.InitTransactions(ctx))
				f.take()

				txn(5, "eos", "other")
				finds, _ := f.take()
				require.Equal(t, 2, finds, "one per group")
				txn(6, "eos", "other", "eos")
				finds, commits := f.take()
				require.Zero(t, finds, "both groups' coordinators kept")
				require.Equal(t, map[int32]int{eos: 2, (eos + 1) % 3: 1}, commits)

				moved := (eos + 2) % 3
				require.NoError(t, e.c.MoveCoordinator("eos", false, moved))
				txn(7, "eos")
				finds, commits = f.take()
				require.Equal(t, 1, finds, "found again after NOT_COORDINATOR")
				require.Equal(t, map[int32]int{eos: 1, moved: 1}, commits, "refused by the old coordinator, committed once at the new one")
				txn(8, "eos")
				finds, commits = f.take()
				require.Zero(t, finds)
				require.Equal(t, map[int32]int{moved: 1}, commits)
				off, _ := e.c.CommittedOffset("other", "in", 0)
				require.Equal(t, int64(6), off)
			})
		})
	}
}
