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
// nothing; otherwise it admits every candidate that may send one more batch
// now (led by n, not draining, below its limit or gate, listed once) and
// takes one request slot on n. Admitted partitions get a Ticket each in
// req.Tickets, which is reset to length 0 first, in candidate order.
//
// Reserve returns false, holds nothing and leaves req.Tickets empty when
// nothing was admitted; an empty request is never sent. On true the caller
// must call [Limiter.Complete] once per ticket and [Limiter.Finish] once for
// req. It panics if req still holds an unfinished reservation.
func (l *Limiter) Reserve(n *Node, candidates []*Partition, req *Request) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.own(n.l)
	if req.held {
		panic(panicHeld)
	}
	req.Tickets = req.Tickets[:0]
	if n.reqs >= l.maxReqs && !l.ignoreNodeCap {
		return false
	}
	l.stamp++
	for _, p := range candidates {
		l.own(p.l)
		l.sync(p)
		if p.node != n || p.stamp == l.stamp || !l.allowed(p) {
			continue
		}
		p.stamp = l.stamp
		id := p.nextID
		p.nextID++
		p.out = append(p.out, id)
		req.Tickets = append(req.Tickets, Ticket{Partition: p, gen: p.gen, id: id})
	}
	if len(req.Tickets) == 0 {
		return false
	}
	n.reqs++
	req.node, req.conn, req.held = n, n.conn, true
	return true
}

// MayReserve reports whether p could send one more batch now, ignoring the
// node's request cap: p has a leader, is not draining, and is below its limit
// (1 while the gate is armed). It is for the sender's decisions and stats;
// the answer may be stale by the time [Limiter.Reserve] runs.
func (l *Limiter) MayReserve(p *Partition) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.own(p.l)
	l.sync(p)
	return l.allowed(p)
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
// one is acked. Complete panics on a zero Ticket or one already completed.
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

	l.sync(p)
	var report bool
	if t.gen == p.gen || l.trustStale {
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
			p.gated = false
		}
	}
	if !o.Acked {
		p.draining = true
	}
	if p.draining && len(p.out) == 0 {
		// The broker may have lost our state with the failure (new leader,
		// expired producer id): the retries go one at a time until acked.
		p.draining = false
		p.gated = true
	}
	l.mu.Unlock()
	if report {
		l.onInvalid(p.topic, p.id, o.Window)
	}
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
