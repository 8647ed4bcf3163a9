package producer

import (
	"fmt"
	"net"
	"strconv"

	"github.com/longhaul-kafka/longhaul/protocol"
)

// Topology changes seen in metadata: a topic deleted and
// created again under the same name, with a new topic id (KIP-516) and
// possibly fewer partitions. Growth needs nothing special: applyMetadata
// adds the new partitions and placement maps over the current count.

// topicRecreated handles a topic whose id changed to a new one with
// count partitions. Every partition is a new, empty log without our
// producer state: its next batch goes alone (the first-batch gate) and any
// leader epoch is news, since a new topic counts epochs from 0 again.
// Partitions beyond count are gone: what waits for them fails with
// ErrPartitionGone.
func (s *sender) topicRecreated(v accHeld, t *topicState, count int32) {
	s.p.log.Info("topic re-created: new topic id", "topic", t.name, "partitions", count)
	t.recreated++
	sent := false
	for _, ps := range t.parts {
		// A new log: as a move to another leader, the epoch forgotten.
		ps.pendingEpoch = -1
		if l := ps.leader(); l >= 0 {
			s.p.limiter.SetLeader(ps.admission, -1, -1)
			s.p.limiter.SetLeader(ps.admission, l, -1)
		}
		s.p.limiter.Reset(ps.admission)
		sent = sent || ps.nextSeq > 0
	}
	// A request that names topics (Produce before v13) sent before the
	// change was seen went to the new topic: its log may hold our batches
	// under this epoch, numbered where the old topic's left off, with
	// gaps where batches went to the old one. Sequences cannot continue
	// from what we sent, and a rewind to 0 is out of order for such a
	// state (the next batch would get OUT_OF_ORDER_SEQUENCE_NUMBER): a new
	// epoch starts every partition's sequence at 0.
	if sent && s.haveID && s.txn == nil && !s.cfg.regress.on(recreateKeepsEpoch) {
		s.needBump = true
	}
	if count >= int32(len(t.parts)) {
		return
	}
	for _, ps := range t.parts[count:] {
		s.dropPartition(v, ps, fmt.Errorf("%w: %s[%d], the topic now has %d partition(s)", ErrPartitionGone, t.name, ps.id, count))
	}
	clear(t.parts[count:])
	t.parts = t.parts[:count]
	v.truncate(t, count)
}

// dropPartition fails every batch of a vanished partition that is
// not in flight, and marks it so batches coming back from flight fail too
// (batchRejected). Its limiter partition forgets the leader, so a
// partition of that index created later starts with the gate armed.
func (s *sender) dropPartition(v accHeld, ps *partitionState, err error) {
	ps.gone, ps.goneErr = true, err
	s.takeUnsent(v, ps)
	sealed := ps.queue
	ps.queue = nil
	ps.queuedPub.Store(0)
	for _, b := range append([]*batch(nil), ps.retry...) {
		s.failBatch(b, err, b.maybeWritten)
	}
	for _, b := range sealed {
		s.failBatch(b, err, false)
	}
	ps.hasPending = false
	s.p.limiter.SetLeader(ps.admission, -1, -1)
	s.p.leadersGen.Add(1)
}

// hintCurrent reports whether a KIP-951 leader hint in the answer to b's
// attempt may be applied: the attempt named the topic's current id. An
// answer about a deleted incarnation of the topic names its leader and
// epoch, and once the re-created topic counts epochs from 0 again
// (topicRecreated), an old epoch above the new one would make every
// later metadata answer look stale: the partition would stay at a leader
// that is not, until delivery.timeout.ms. Without topic
// ids (metadata before v10) re-creation is not seen and the hint applies.
func (s *sender) hintCurrent(b *batch) bool {
	t := b.part.topic
	var none [16]byte
	return s.cfg.regress.on(oldTopicHints) || b.topicID == none || t.id == none || b.topicID == t.id
}

// leaderHint applies a KIP-951 CurrentLeader hint from the answer to b's
// attempt: a newer leader epoch than the partition's, for the topic's
// current incarnation (hintCurrent), naming a node with an address, from
// metadata or the answer's NodeEndpoints (learnEndpoints). A hint naming
// a node the producer cannot dial is left to the metadata refresh the
// answer also asks for: taken, it would park the partition at that node,
// and its epoch would make every answer naming the real leader look
// stale. The Java client's Metadata.updatePartitionLeadership skips such
// a hint too.
func (s *sender) leaderHint(b *batch, leader, epoch int32) {
	ps := b.part
	if leader < 0 || epoch <= ps.leaderEpoch() || !s.hintCurrent(b) || !s.reachable(leader) && !s.cfg.regress.on(hintUnreachable) {
		return
	}
	s.updateLeader(ps, leader, epoch)
}

// learnEndpoints records the address of each node a ProduceResponse's
// NodeEndpoints (KIP-951, v10+) names that the producer has none for, so
// a hint naming a new leader can be taken. A node with an address keeps
// it: metadata, which lists every broker, stays the authority on moves.
// Entries without a usable host and port are ignored.
func (s *sender) learnEndpoints(endpoints []protocol.NodeEndpoint) {
	for _, e := range endpoints {
		if e.NodeID < 0 || e.Host == "" || e.Port <= 0 || e.Port > 65535 {
			continue
		}
		if n := s.nodes[e.NodeID]; n != nil && n.addr != "" {
			continue
		}
		s.node(e.NodeID).addr = net.JoinHostPort(e.Host, strconv.Itoa(int(e.Port)))
	}
}
