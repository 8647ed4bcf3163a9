package producer

import (
	"fmt"

	"github.com/longhaul-kafka/longhaul/protocol"
)

// Topology changes seen in metadata (issue 20): a topic deleted and
// created again under the same name, with a new topic id (KIP-516) and
// possibly fewer partitions. Growth needs nothing special: applyMetadata
// adds the new partitions and placement maps over the current count.

// topicRecreatedLocked handles a topic whose id changed to a new one with
// count partitions. Every partition is a new, empty log without our
// producer state: its next batch goes alone (the first-batch gate) and any
// leader epoch is news, since a new topic counts epochs from 0 again.
// Partitions beyond count are gone: what waits for them fails with
// ErrPartitionGone. Called on the sender goroutine with p.mu held.
func (s *sender) topicRecreatedLocked(t *topicState, count int32) {
	s.p.log.Info("topic re-created: new topic id", "topic", t.name, "partitions", count)
	for _, ps := range t.parts {
		ps.leaderEpoch, ps.pendingEpoch = -1, -1
		s.p.lim.Reset(ps.lim)
		ps.resequence = true
		s.resequenceIfDrained(ps)
	}
	if count >= int32(len(t.parts)) {
		return
	}
	for _, ps := range t.parts[count:] {
		s.dropPartitionLocked(ps, fmt.Errorf("%w: %s[%d], the topic now has %d partition(s)", ErrPartitionGone, t.name, ps.id, count))
	}
	clear(t.parts[count:])
	t.parts = t.parts[:count]
}

// resequenceIfDrained numbers a re-created topic's partition afresh once
// none of its batches is in flight to the old topic id. The new log has no
// state for us, and its sequences must follow from the first batch it
// takes: the old log's acknowledged batches are not in it, so batches
// still waiting (their attempts all named the old id) and the ones after
// them take sequences from 0, in order. Until then nothing of the
// partition is sent: its gate, armed by topicRecreatedLocked, admits no
// batch while older ones are in flight. A batch keeps maybeWritten: it
// may be in the deleted log, which is what its callback reports.
func (s *sender) resequenceIfDrained(ps *partitionState) {
	if !ps.resequence || len(ps.inflight) > 0 {
		return
	}
	ps.resequence = false
	seq := int32(0)
	for _, b := range ps.retry {
		b.bytes = append([]byte(nil), b.bytes...) // a dead connection's writer may hold the old
		if err := protocol.SetBatchSequence(b.bytes, s.pid, s.epoch, seq); err != nil {
			panic("producer: renumbering a batch we built: " + err.Error())
		}
		b.seq = seq
		seq = addSeq(seq, len(b.records))
	}
	ps.nextSeq = seq
}

// dropPartitionLocked fails every batch of a vanished partition that is
// not in flight, and marks it so batches coming back from flight fail too
// (batchRejected). Its limiter partition forgets the leader, so a
// partition of that index created later starts with the gate armed.
func (s *sender) dropPartitionLocked(ps *partitionState, err error) {
	ps.gone, ps.goneErr = true, err
	if ps.open != nil {
		ps.sealed = append(ps.sealed, ps.open)
		ps.open = nil
	}
	sealed := ps.sealed
	ps.sealed = nil
	ps.sealedCount = 0
	for _, b := range append([]*batch(nil), ps.retry...) {
		s.failBatch(b, err, b.maybeWritten)
	}
	for _, b := range sealed {
		s.failBatch(b, err, false)
	}
	ps.hasPending = false
	ps.leader = -1
	ps.leaderPub.Store(-1)
	s.p.lim.SetLeader(ps.lim, -1, -1)
}
