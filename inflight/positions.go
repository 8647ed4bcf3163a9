package inflight

// posEnt is one unacknowledged position of a partition's send order:
// reserved at least once, neither acknowledged nor abandoned.
type posEnt struct {
	pos    uint64
	flying bool // a ticket with this position is in flight
}

// A partition's unacknowledged positions are kept in p.ents[p.head:],
// ascending; ents[head] is the anchor, the oldest one. Positions below
// p.nextPos that are not in the list were released. As etcd raft's
// Inflights frees every index up to an acknowledged one (FreeLE), the anchor
// moves only when the oldest position is released; but an acknowledgement
// here covers one batch, not every earlier one, so a later position acked
// while an earlier one is not leaves the anchor where it is. The list holds
// only positions the producer has outstanding (in flight or waiting for a
// retry), so its size follows those batches, never the broker's window.

// find returns the index in p.ents of pos, or -1 if pos is not unacknowledged.
// Acks come mostly in order, so the anchor is tried first.
func (p *Partition) find(pos uint64) int {
	lo, hi := p.head, len(p.ents)
	if lo < hi && p.ents[lo].pos == pos {
		return lo
	}
	for lo < hi { // first index with ents[i].pos >= pos
		m := int(uint(lo+hi) >> 1)
		if p.ents[m].pos < pos {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo < len(p.ents) && p.ents[lo].pos == pos {
		return lo
	}
	return -1
}

// addPos appends a new position, in flight, above every position held. The
// free front is reclaimed first when the slice is full, so a warmed-up
// partition does not allocate.
func (p *Partition) addPos(pos uint64) {
	if len(p.ents) == cap(p.ents) && p.head > 0 {
		n := copy(p.ents, p.ents[p.head:])
		p.ents = p.ents[:n]
		p.head = 0
	}
	p.ents = append(p.ents, posEnt{pos: pos, flying: true})
	p.nextPos = pos + 1
}

// release removes pos, acknowledged or abandoned; a position not held is
// ignored. It moves whichever side of pos is shorter, so releasing near
// either end (in-order acks, or acks behind one lost response) is cheap.
func (p *Partition) release(pos uint64) {
	i := p.find(pos)
	if i < 0 {
		return
	}
	if i-p.head < len(p.ents)-1-i {
		copy(p.ents[p.head+1:i+1], p.ents[p.head:i])
		p.head++
	} else {
		copy(p.ents[i:], p.ents[i+1:])
		p.ents = p.ents[:len(p.ents)-1]
	}
	if p.head == len(p.ents) {
		p.ents = p.ents[:0]
		p.head = 0
	}
}

// inWindow is InWindow without the lock or sync.
func (l *Limiter) inWindow(p *Partition, pos uint64) bool {
	if p.head == len(p.ents) || l.brk.on(ignorePartitionLimit) {
		return true
	}
	anchor := p.ents[p.head].pos
	return pos <= anchor || pos-anchor < uint64(l.limit(p))
}
