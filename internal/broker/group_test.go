package broker

import (
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (x *txnWire) txnCommit(version int16, pid int64, epoch int16, group, member string, gen int32, offset int64) int16 {
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.Version = version
	req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch = x.id, group, pid, epoch
	req.MemberID, req.Generation = member, gen
	rt := kmsg.NewTxnOffsetCommitRequestTopic()
	rt.Topic = "t"
	rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	rp.Offset, rp.LeaderEpoch = offset, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return x.w.do(req).(*kmsg.TxnOffsetCommitResponse).Topics[0].Partitions[0].ErrorCode
}

func (x *txnWire) fetchOffset(group string, stable bool) (int64, int16) {
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Version, req.Group, req.RequireStable = 7, group, stable
	rt := kmsg.NewOffsetFetchRequestTopic()
	rt.Topic, rt.Partitions = "t", []int32{0}
	req.Topics = append(req.Topics, rt)
	resp := x.w.do(req).(*kmsg.OffsetFetchResponse)
	p := resp.Topics[0].Partitions[0]
	return p.Offset, p.ErrorCode
}

// TestTxnOffsets: offsets sent in a transaction are pending until its
// marker (OffsetFetch RequireStable answers UNSTABLE_OFFSET_COMMIT, a
// plain one the old offset), committed with it, discarded on abort; under
// version 1 the group must be added by AddOffsetsToTxn first.
func TestTxnOffsets(t *testing.T) {
	c := startCluster(t, Config{Topics: []TopicConfig{{Name: "t", Partitions: 1}}})
	if err := c.SetTransactionVersion(1); err != nil {
		t.Fatal(err)
	}
	x := newTxnWire(t, c, "a")
	pid, epoch := x.mustInit()
	wantCode(t, "TxnOffsetCommit before AddOffsetsToTxn", x.txnCommit(3, pid, epoch, "g", "", -1, 5), kerr.InvalidTxnState)
	add := kmsg.NewPtrAddOffsetsToTxnRequest()
	add.Version, add.TransactionalID, add.ProducerID, add.ProducerEpoch, add.Group = 3, "a", pid, epoch, "g"
	wantCode(t, "AddOffsetsToTxn", x.w.do(add).(*kmsg.AddOffsetsToTxnResponse).ErrorCode, nil)
	wantCode(t, "TxnOffsetCommit", x.txnCommit(3, pid, epoch, "g", "", -1, 5), nil)
	wantCode(t, "TxnOffsetCommit at another epoch", x.txnCommit(3, pid, epoch+1, "g", "", -1, 5), kerr.ProducerFenced)
	wantCode(t, "TxnOffsetCommit with an unknown member", x.txnCommit(3, pid, epoch, "g", "m", 1, 5), kerr.UnknownMemberID)
	c.HoldMarkers(true)
	wantCode(t, "commit", x.end(4, pid, epoch, true).ErrorCode, nil)
	if _, code := x.fetchOffset("g", true); code != kerr.UnstableOffsetCommit.Code {
		t.Fatalf("RequireStable while the marker is pending: %v", kerr.ErrorForCode(code))
	}
	if off, code := x.fetchOffset("g", false); code != 0 || off != -1 {
		t.Fatalf("plain OffsetFetch while pending: %d %v, want -1", off, kerr.ErrorForCode(code))
	}
	c.HoldMarkers(false)
	if off, code := x.fetchOffset("g", true); code != 0 || off != 5 {
		t.Fatalf("after the marker: %d %v, want 5", off, kerr.ErrorForCode(code))
	}
	// Version 2: TxnOffsetCommit v5 adds the group; an abort discards.
	if err := c.SetTransactionVersion(2); err != nil {
		t.Fatal(err)
	}
	wantCode(t, "TxnOffsetCommit v5", x.txnCommit(5, pid, epoch, "g", "", -1, 9), nil)
	wantCode(t, "abort", x.end(5, pid, epoch, false).ErrorCode, nil)
	waitState(t, c, "a", "CompleteAbort")
	if off, ok := c.CommittedOffset("g", "t", 0); !ok || off != 5 {
		t.Fatalf("after the abort: %d %v, want 5", off, ok)
	}
}

// TestGroupFencing: TxnOffsetCommit and OffsetCommit from a member of an
// older generation are ILLEGAL_GENERATION once the group moved on, from a
// member it removed UNKNOWN_MEMBER_ID (KIP-447 zombie fencing).
func TestGroupFencing(t *testing.T) {
	c := startCluster(t, Config{Topics: []TopicConfig{{Name: "t", Partitions: 1}}})
	w := dialWire(t, c.Addr())
	join := func(member string) *kmsg.JoinGroupResponse {
		req := kmsg.NewPtrJoinGroupRequest()
		req.Version, req.Group, req.MemberID = 9, "g", member
		req.SessionTimeoutMillis, req.RebalanceTimeoutMillis, req.ProtocolType = 10000, 10000, "consumer"
		p := kmsg.NewJoinGroupRequestProtocol()
		p.Name = "range"
		req.Protocols = append(req.Protocols, p)
		return w.do(req).(*kmsg.JoinGroupResponse)
	}
	first := join("")
	wantCode(t, "first join", first.ErrorCode, kerr.MemberIDRequired)
	j := join(first.MemberID)
	wantCode(t, "join", j.ErrorCode, nil)
	if j.LeaderID != first.MemberID || j.Generation != 1 || len(j.Members) != 1 {
		t.Fatalf("join answered %+v", j)
	}
	sync := kmsg.NewPtrSyncGroupRequest()
	sync.Version, sync.Group, sync.Generation, sync.MemberID = 5, "g", j.Generation, j.MemberID
	a := kmsg.NewSyncGroupRequestGroupAssignment()
	a.MemberID, a.MemberAssignment = j.MemberID, []byte("assignment")
	sync.GroupAssignment = append(sync.GroupAssignment, a)
	sr := w.do(sync).(*kmsg.SyncGroupResponse)
	if sr.ErrorCode != 0 || string(sr.MemberAssignment) != "assignment" {
		t.Fatalf("sync: %v %q", kerr.ErrorForCode(sr.ErrorCode), sr.MemberAssignment)
	}
	x := newTxnWire(t, c, "a")
	pid, epoch := x.mustInit()
	wantCode(t, "current generation", x.txnCommit(5, pid, epoch, "g", j.MemberID, j.Generation, 1), nil)
	wantCode(t, "older generation", x.txnCommit(5, pid, epoch, "g", j.MemberID, j.Generation-1, 1), kerr.IllegalGeneration)
	j2 := join(j.MemberID) // a rebalance: generation 2
	if j2.Generation != 2 {
		t.Fatalf("rejoin: generation %d", j2.Generation)
	}
	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.Version, commit.Group, commit.Generation, commit.MemberID = 8, "g", 1, j.MemberID
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = "t"
	rt.Partitions = append(rt.Partitions, kmsg.NewOffsetCommitRequestTopicPartition())
	commit.Topics = append(commit.Topics, rt)
	wantCode(t, "OffsetCommit of generation 1", w.do(commit).(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode, kerr.IllegalGeneration)
	leave := kmsg.NewPtrLeaveGroupRequest()
	leave.Version, leave.Group = 5, "g"
	leave.Members = append(leave.Members, kmsg.LeaveGroupRequestMember{MemberID: j.MemberID})
	wantCode(t, "leave", w.do(leave).(*kmsg.LeaveGroupResponse).Members[0].ErrorCode, nil)
	wantCode(t, "removed member", x.txnCommit(5, pid, epoch, "g", j.MemberID, 2, 1), kerr.UnknownMemberID)
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Version, hb.Group, hb.Generation, hb.MemberID = 4, "g", 2, j.MemberID
	wantCode(t, "heartbeat of a removed member", w.do(hb).(*kmsg.HeartbeatResponse).ErrorCode, kerr.UnknownMemberID)
}

// TestGroupKeepsNoRequestBytes: the assignment a leader's SyncGroup hands
// out and the metadata a JoinGroup brings are the group's own copies, not
// the request frame's bytes, which the connection reuses for its next
// request: a member's answer carries what was sent whatever its
// connection read since. Before the copies, TestKgoGroupTransactSession
// under load raced the writer encoding a SyncGroup answer with the reader
// filling the leader's connection buffer.
func TestGroupKeepsNoRequestBytes(t *testing.T) {
	c := startCluster(t, Config{Topics: []TopicConfig{{Name: "t", Partitions: 1}}})
	join := func(w *wireClient, member, metadata string) *kmsg.JoinGroupRequest {
		req := kmsg.NewPtrJoinGroupRequest()
		req.Version, req.Group, req.MemberID = 9, "g", member
		req.SessionTimeoutMillis, req.RebalanceTimeoutMillis, req.ProtocolType = 10000, 10000, "consumer"
		p := kmsg.NewJoinGroupRequestProtocol()
		p.Name, p.Metadata = "range", []byte(metadata)
		req.Protocols = append(req.Protocols, p)
		return req
	}
	joinID := func(w *wireClient, metadata string) string {
		first := w.do(join(w, "", metadata)).(*kmsg.JoinGroupResponse)
		wantCode(t, "first join", first.ErrorCode, kerr.MemberIDRequired)
		return first.MemberID
	}
	sync := func(w *wireClient, member string, gen int32, assignment string) *kmsg.SyncGroupResponse {
		req := kmsg.NewPtrSyncGroupRequest()
		req.Version, req.Group, req.Generation, req.MemberID = 5, "g", gen, member
		a := kmsg.NewSyncGroupRequestGroupAssignment()
		a.MemberID, a.MemberAssignment = member, []byte(assignment)
		req.GroupAssignment = append(req.GroupAssignment, a)
		return w.do(req).(*kmsg.SyncGroupResponse)
	}

	wa := dialWire(t, c.Addr())
	a := joinID(wa, "metadata-of-a")
	ja := wa.do(join(wa, a, "metadata-of-a")).(*kmsg.JoinGroupResponse)
	wantCode(t, "join a", ja.ErrorCode, nil)
	if ja.LeaderID != a {
		t.Fatalf("leader %q, want %q", ja.LeaderID, a)
	}
	sr := sync(wa, a, ja.Generation, "assignment-a")
	if string(sr.MemberAssignment) != "assignment-a" {
		t.Fatalf("sync: %q", sr.MemberAssignment)
	}
	// The same request again, its assignment other bytes at the same place
	// of the frame: the group is stable, so it is ignored and the answer
	// is the assignment already handed out.
	sr = sync(wa, a, ja.Generation, "XXXXXXXXXXXX")
	if string(sr.MemberAssignment) != "assignment-a" {
		t.Fatalf("second sync answered %q, want the assignment of the first", sr.MemberAssignment)
	}

	// b joins (a rebalance: its JoinGroup waits for a) with another
	// request behind, which b's connection reads into the same buffer
	// once b is answered, while the leader's answer, listing b's
	// metadata, is still to be written.
	wb := dialWire(t, c.Addr())
	metaB := "metadata-of-b" + strings.Repeat("b", 300) // a frame the next one fits in
	b := joinID(wb, metaB)
	wb.send(join(wb, b, metaB))
	create := kmsg.NewPtrCreateTopicsRequest()
	create.Version = 7
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = strings.Repeat("x", 200), 1, 1
	create.Topics = append(create.Topics, rt)
	wb.send(create)
	for rebalancing := false; !rebalancing; { // b's JoinGroup is in
		time.Sleep(time.Millisecond)
		c.mu.Lock()
		rebalancing = c.groups["g"].state == groupPreparingRebalance
		c.mu.Unlock()
	}
	ja = wa.do(join(wa, a, "metadata-of-a")).(*kmsg.JoinGroupResponse)
	wantCode(t, "rejoin a", ja.ErrorCode, nil)
	if len(ja.Members) != 2 {
		t.Fatalf("leader's JoinGroup lists %d members, want 2", len(ja.Members))
	}
	for _, m := range ja.Members {
		want := map[string]string{a: "metadata-of-a", b: metaB}[m.MemberID]
		if got := string(m.ProtocolMetadata); got != want {
			t.Fatalf("leader's JoinGroup lists %s with metadata %.40q..., want %.40q...", m.MemberID, got, want)
		}
	}
	wantCode(t, "join b", wb.recv().(*kmsg.JoinGroupResponse).ErrorCode, nil)
	wantCode(t, "create", wb.recv().(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode, nil)
}
