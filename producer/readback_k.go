package producer

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/longhaul-kafka/longhaul/protocol"
)

// K for a partition's first batches. Before the partition's first
// acknowledgement to this producer there is no acknowledged end to start
// a read-back from, so with read-back on, the Produce request carrying a
// partition's first batch is preceded, on the same connection, by a
// ListOffsets asking for the partition's latest offset (read_uncommitted:
// the high watermark, at most the log end). The broker handles one
// connection's requests one at a time, in order, so the answer was
// computed before the batch's first attempt was appended; every later
// attempt, on any connection or leader, was sent after that first one.
// The offsets below the high watermark are committed and held by every
// later leader (no unclean election), so every attempt lies at or above
// the answer: it is K. A batch first sent once an answer has arrived
// takes that answer as its K; one sent before, on another connection,
// gets its own ListOffsets. Until the answer arrives a batch of the
// probe may fail but is not read back (startScan waits). A failed
// ListOffsets (an error code, the request failing, no ListOffsets v4)
// leaves K 0 for the batches it was for, and the reason is given with
// ErrReadbackLogStart or ErrReadbackBudget; TOPIC_AUTHORIZATION_FAILED
// (ListOffsets needs DESCRIBE on the topic) stops the partition's
// ListOffsets for good. DESIGN.md ("Read-back") has the reasoning.

// kProbe is one partition's ListOffsets(latest), written on a produce
// connection ahead of the Produce request carrying its first batch.
type kProbe struct {
	conn *protocol.Conn
	gen  uint32 // the topic's recreated count when it was sent
	done bool   // answered, or failed
	hw   int64  // the high watermark answered (done, err nil)
	err  error  // why it gave no K (done)
}

// partK is a partition's K before its first acknowledgement
// (partitionState.k); the sender goroutine's.
type partK struct {
	hw     int64 // the highest high watermark answered, while haveHW
	haveHW bool
	gen    uint32  // the topic's recreated count hw was answered for
	probe  *kProbe // the latest sent, nil once answered
	stop   error   // ListOffsets refused for good (authorization): none sent any more
}

// probeK gives the first batches of sr's partitions that have no
// acknowledgement yet their K: the high watermark already answered, or a
// ListOffsets queued on sr.conn now, ahead of the Produce request issue
// queues next. Read-back off, or a transactional producer: nothing.
func (s *sender) probeK(sr *sentRequest) {
	if !s.cfg.readback || s.txn != nil {
		return
	}
	var qs []protocol.OffsetQuery
	var probes []*kProbe
	var parts []*partitionState
	for _, b := range sr.batches {
		ps := b.part
		if b.attempts != 1 {
			continue // a retry: its K was fixed at its first send
		}
		b.kProbe = nil
		if ps.ackedEnd > 0 {
			continue // K is the acknowledged end (takeBatch)
		}
		pk, gen := &ps.k, ps.topic.recreated
		switch {
		case pk.haveHW && pk.gen == gen:
			b.scanFrom = max(b.scanFrom, pk.hw)
			continue
		case pk.stop != nil:
			b.kProbe = &kProbe{done: true, err: pk.stop}
			continue
		case pk.probe == nil || pk.probe.conn != sr.conn || pk.probe.gen != gen:
			pk.probe = &kProbe{conn: sr.conn, gen: gen}
			qs = append(qs, protocol.OffsetQuery{Topic: ps.topic.name, Partition: ps.id, LeaderEpoch: ps.leaderEpoch()})
			probes, parts = append(probes, pk.probe), append(parts, ps)
		}
		b.kProbe = pk.probe
	}
	if len(qs) == 0 {
		return
	}
	send := func(conn *protocol.Conn) {
		protocol.SendLatestOffsets(conn, qs, s.cfg.requestTimeout, func(a []protocol.OffsetAnswer, err error) {
			s.p.post(func() { s.kAnswered(parts, probes, a, err) })
		})
	}
	if s.cfg.regress.on(readbackKAfter) {
		// The bug: the ListOffsets goes after the Produce request, so
		// its answer may count the batch itself.
		conn := sr.conn
		s.p.post(func() { send(conn) })
		return
	}
	send(sr.conn)
}

// kAnswered applies a ListOffsets answer (a aligned with probes and
// parts, or err) and starts the reads that waited for it.
func (s *sender) kAnswered(parts []*partitionState, probes []*kProbe, a []protocol.OffsetAnswer, err error) {
	for i, pr := range probes {
		ps := parts[i]
		pk := &ps.k
		pr.done = true
		switch {
		case err != nil:
			pr.err = fmt.Errorf("ListOffsets: %w", err)
		case !a[i].Answered:
			pr.err = errors.New("ListOffsets answer lacks the partition")
		case a[i].ErrorCode == kerr.TopicAuthorizationFailed.Code:
			pr.err = fmt.Errorf("ListOffsets: %w (DESCRIBE on the topic needed)", kerr.TopicAuthorizationFailed)
			pk.stop = pr.err
		case a[i].ErrorCode != 0:
			pr.err = fmt.Errorf("ListOffsets: %w", kerr.ErrorForCode(a[i].ErrorCode))
		case a[i].Offset < 0:
			pr.err = fmt.Errorf("ListOffsets answered offset %d", a[i].Offset)
		default:
			pr.hw = a[i].Offset
			if pr.gen == ps.topic.recreated && (!pk.haveHW || pk.gen != pr.gen || pr.hw > pk.hw) {
				pk.hw, pk.haveHW, pk.gen = pr.hw, true, pr.gen
			}
		}
		if pk.probe == pr {
			pk.probe = nil
		}
		if pr.err != nil {
			s.p.log.Debug("read-back: no high watermark before a first batch; its K stays 0",
				"topic", ps.topic.name, "partition", ps.id, "err", pr.err)
		}
	}
	for _, j := range s.settling {
		if j.waitK && j.b.kProbe.done {
			j.waitK, j.scanning = false, false
			s.startScan(j, j.fence)
		}
	}
}

// kFrom is b's K and, when it is 0 for want of an answered ListOffsets,
// why; ok false while b's ListOffsets has not been answered.
func (b *batch) kFrom() (k int64, why error, ok bool) {
	pr := b.kProbe
	switch {
	case pr == nil:
		return b.scanFrom, nil, true
	case !pr.done:
		return b.scanFrom, nil, false
	case pr.err != nil:
		return b.scanFrom, pr.err, true
	}
	return max(b.scanFrom, pr.hw), nil, true
}
