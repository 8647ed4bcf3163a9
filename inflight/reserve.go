package inflight

// Request is one ProduceRequest to one node: at most one batch per partition,
// any number of partitions. The zero value is ready for [Limiter.Reserve]. A
// Request may be reused after [Limiter.Finish]; Tickets keeps its capacity,
// so a warmed-up Request reserves without allocating. A Request must not be
// used by two goroutines at once.
type Request struct {
	// Tickets holds one Ticket per admitted partition, set by Reserve.
	Tickets []Ticket

	// Limiter.mu guards the following.
	node *Node
	conn uint64 // node.conn at Reserve
	held bool   // a node slot is held until Finish
}

// Ticket is one batch of one partition in flight within a [Request]. Pass it
// to [Limiter.Complete] exactly once.
type Ticket struct {
	// Partition is the partition the batch belongs to.
	Partition *Partition

	gen uint64 // Partition.gen at Reserve: identifies leader, epoch, connection and resets
	id  uint64 // unique per partition, to catch a double Complete
	pos uint64 // the batch's position in its partition's send order
}

// Pos returns the position of the ticket's batch, as given in its
// [Candidate].
func (t Ticket) Pos() uint64 { return t.pos }

// Candidate is a partition with a batch ready for [Limiter.Reserve], and that
// batch's position in the partition's send order. Positions are the
// producer's to choose: a new batch takes one more than the partition's
// previous new batch, and a batch keeps its position across retries, leader
// changes, new connections and resets, whatever sequence number it is given
// (see the package doc).
type Candidate struct {
	Partition *Partition
	Pos       uint64
}

// Outcome is the result of one [Ticket], given to [Limiter.Complete].
type Outcome struct {
	// Acked is true when the broker acknowledged the batch (success or
	// duplicate); false for any failure: a retriable or other error, a
	// timeout or a lost connection.
	Acked bool

	// Window is ProducerStateBatchesToRetain from the partition response.
	// It is used when Acked or WindowPresent is true; values <= 0 are taken
	// as 5 and reported through [Config.OnInvalidWindow].
	Window int32

	// WindowPresent reports that a response carried the field. With Acked
	// and no field (old broker or field omitted) the window is 5. A failure
	// with WindowPresent false is taken as "no response": nothing is learned.
	WindowPresent bool
}

// Reserve tries to build a request to node n from candidates, partitions that
// each have a batch ready (normally only those led by n). It is
// all-or-nothing per request: if n is at MaxRequestsPerConn it admits
// nothing; otherwise it admits every candidate that may send its batch now
// (see [Limiter.MayReserve]; a partition listed twice is admitted once) and
// takes one request slot on n. Admitted partitions get a Ticket each in
// req.Tickets, which is reset to length 0 first, in candidate order; the
// ticket's position stays unacknowledged until the ticket is completed as
// acked or the position is abandoned.
//
// Reserve returns false, holds nothing and leaves req.Tickets empty when
// nothing was admitted; an empty request is never sent. On true the caller
// must call [Limiter.Complete] once per ticket and [Limiter.Finish] once for
// req. It panics if req still holds an unfinished reservation, and if an
// admitted candidate's position is in flight or was acknowledged or
// abandoned already. Once warmed up (Tickets and each partition's lists have
// grown to their working size) it does not allocate.
func (l *Limiter) Reserve(n *Node, candidates []Candidate, req *Request) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.own(n.l)
	if req.held {
		panic(panicHeld)
	}
	req.Tickets = req.Tickets[:0]
	if n.reqs >= l.maxReqs && !l.brk.on(ignoreNodeCap) {
		return false
	}
	l.stamp++
	for _, c := range candidates {
		p := c.Partition
		l.own(p.l)
		l.sync(p)
		if p.node != n || p.stamp == l.stamp || !l.allowed(p, c.Pos) {
			continue
		}
		if c.Pos >= p.nextPos {
			p.addPos(c.Pos)
		} else {
			switch i := p.find(c.Pos); {
			case i < 0:
				panic(panicReleasedPos)
			case p.ents[i].flying:
				panic(panicFlyingPos)
			default:
				p.ents[i].flying = true
			}
		}
		p.stamp = l.stamp
		id := p.nextID
		p.nextID++
		p.out = append(p.out, id)
		req.Tickets = append(req.Tickets, Ticket{Partition: p, gen: p.gen, id: id, pos: c.Pos})
	}
	if len(req.Tickets) == 0 {
		return false
	}
	n.reqs++
	req.node, req.conn, req.held = n, n.conn, true
	return true
}

// MayReserve reports whether p could send its batch at position pos now,
// ignoring the node's request cap: p has a leader, is not draining, is below
// its limit (1 while the gate is armed), pos is less than limit positions
// after p's oldest unacknowledged position ([Limiter.InWindow]), and pos is
// neither in flight nor acknowledged or abandoned. It is for the sender's
// decisions and stats; the answer may be stale by the time
// [Limiter.Reserve] runs.
func (l *Limiter) MayReserve(p *Partition, pos uint64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.own(p.l)
	l.sync(p)
	if !l.allowed(p, pos) {
		return false
	}
	if pos >= p.nextPos {
		return true
	}
	i := p.find(pos)
	return i >= 0 && !p.ents[i].flying
}

// InWindow reports whether a batch of p at position pos is less than p's
// limit ([Limiter.Limit]) positions after p's oldest unacknowledged
// position, or p has none unacknowledged: the part of [Limiter.Reserve]'s
// rule that keeps a batch whose response was lost within the broker's
// window while later batches are acked. It ignores the gate, draining, the
// leader and the in-flight counts.
func (l *Limiter) InWindow(p *Partition, pos uint64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.own(p.l)
	l.sync(p)
	return l.inWindow(p, pos)
}

// Anchor returns p's oldest unacknowledged position: the lowest position
// reserved at least once and neither acknowledged nor abandoned. ok is false
// when p has none.
func (l *Limiter) Anchor(p *Partition) (pos uint64, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.own(p.l)
	if p.head == len(p.ents) {
		return 0, false
	}
	return p.ents[p.head].pos, true
}

// Abandon releases position pos of p: its batch failed for good and will
// not be sent again. If pos was p's oldest unacknowledged position, the
// anchor moves to the next position still unacknowledged. Abandoning a
// position in flight releases it too (its ticket must still be completed);
// abandoning a position never reserved, or already acknowledged or
// abandoned, does nothing.
func (l *Limiter) Abandon(p *Partition, pos uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.own(p.l)
	if !l.brk.on(ignoreAbandon) {
		p.release(pos)
	}
}

// Complete reports the outcome of one ticket; call it exactly once per
// ticket, in any order. The ticket stops counting against its partition.
//
// If the ticket is current (same leader, leader epoch, connection and no
// reset since it was reserved), a response (Acked, or WindowPresent) sets
// the partition's window, and Acked opens the first-batch gate. A stale
// ticket changes neither. Any failure (stale or not) makes the partition
// drain: no new batch until its in-flight count is 0, at which point
// draining ends and the gate re-arms, so retries go out one at a time until
// one is acked. Acked (stale or not) releases the ticket's position; a
// failure keeps it unacknowledged, to be reserved again by the retry.
// Complete panics on a zero Ticket or one already completed.
func (l *Limiter) Complete(t Ticket, o Outcome) {
	p := t.Partition
	if p == nil {
		panic(panicZeroTicket)
	}
	l.own(p.l)
	l.mu.Lock()
	i := ticketIndex(p.out, t.id)
	if i < 0 {
		l.mu.Unlock()
		panic(panicDoubleComplete)
	}
	p.out = append(p.out[:i], p.out[i+1:]...)
	switch {
	case o.Acked && l.brk.on(ackFreesEarlier):
		for p.head < len(p.ents) && p.ents[p.head].pos <= t.pos {
			p.release(p.ents[p.head].pos)
		}
	case o.Acked:
		p.release(t.pos)
	default:
		if j := p.find(t.pos); j >= 0 {
			p.ents[j].flying = false
		}
	}

	l.sync(p)
	old := l.limit(p)
	var report bool
	if t.gen == p.gen || l.brk.on(trustStale) {
		if o.Acked || o.WindowPresent {
			w := DefaultWindow
			switch {
			case !o.WindowPresent:
			case o.Window <= 0:
				// A broker bug; 5 is what every broker could always
				// deduplicate. Report each distinct value once in a row.
				report = l.onInvalid != nil && (!p.invalidSet || p.invalid != o.Window)
				p.invalid, p.invalidSet = o.Window, true
			default:
				w = int(o.Window)
			}
			p.window = w
		}
		if o.Acked {
			p.state = p.state.next(evAcked)
		}
	}
	if !o.Acked {
		p.state = p.state.next(evFailed)
	}
	if p.state.draining() && len(p.out) == 0 {
		// The broker may have lost our state with the failure (new leader,
		// expired producer id): the retries go one at a time until acked.
		p.state = p.state.next(evDrained)
	}
	now := l.limit(p)
	l.mu.Unlock()
	if report {
		l.onInvalid(p.topic, p.id, o.Window)
	}
	l.changed(p, old, now, CauseLearned)
}

// ticketIndex finds id in out (ascending); completions come mostly in order,
// so a scan from the front is short.
func ticketIndex(out []uint64, id uint64) int {
	for i, v := range out {
		if v == id {
			return i
		}
		if v > id {
			break
		}
	}
	return -1
}

// Finish releases req's node slot; call it exactly once per Reserve that
// returned true, once its tickets are completed (or right after completing
// them). A request reserved on a connection that has since been replaced
// releases nothing on the new one. Finish panics if req holds no
// reservation. After Finish, req may be reused.
func (l *Limiter) Finish(req *Request) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !req.held {
		panic(panicNoReservation)
	}
	n := req.node
	if req.conn == n.conn {
		n.reqs--
	} else {
		n.stale--
	}
	if n.reqs < 0 || n.stale < 0 {
		panic(panicNegative)
	}
	req.node, req.held = nil, false
}
