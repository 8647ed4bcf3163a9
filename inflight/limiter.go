package inflight

import (
	"cmp"
	"math"
	"slices"
	"sync"
	"sync/atomic"
)

// Limiter holds the in-flight state of every node and partition of one
// producer. Create it with [New]. It is safe for concurrent use; all methods
// take one internal mutex and never block otherwise.
type Limiter struct {
	maxReqs   int
	maxWindow int
	onInvalid func(topic string, partition int32, value int32)
	onChange  func(topic string, partition int32, old, new int, why Cause)

	// brk are the admission rules a negative control of the model test
	// switched off (never in the observers), and the fixed window a
	// producer's negative control imposes (regress.go); empty in the
	// default build.
	brk breaks

	mu sync.Mutex
	// mu guards the following, and the unexported fields of every Node,
	// Partition and Request of this Limiter.
	nodes    map[int32]*Node
	parts    map[partKey]*Partition
	resetAll uint64 // bumped by ResetAll; partitions catch up lazily in sync
	stamp    uint64 // bumped by every Reserve, to spot a partition listed twice
}

type partKey struct {
	topic     string
	partition int32
}

// Node is one broker node, with at most one live connection at a time. Get it
// with [Limiter.Node]; the pointer is stable for the Limiter's life.
type Node struct {
	id int32
	l  *Limiter

	// Limiter.mu guards the following.
	conn      uint64 // connection generation, bumped by NewConnection
	reqs      int    // requests in flight on the current connection
	stale     int    // requests in flight on earlier connections
	windowCap int    // SetNodeWindowCap; 0 = none
}

// ID returns the broker node id.
func (n *Node) ID() int32 { return n.id }

// Partition is one topic-partition. Get it with [Limiter.Partition]; the
// pointer is stable for the Limiter's life.
type Partition struct {
	topic string
	id    int32
	l     *Limiter

	// lead is the leader node id (high 32 bits) and leader epoch (low 32
	// bits), written under Limiter.mu and read without it (Leader).
	lead atomic.Int64

	// Limiter.mu guards the following.
	node       *Node  // nil while the leader is unknown (leader < 0)
	conn       uint64 // node.conn when p was last reset
	resetAll   uint64 // Limiter.resetAll when p was last reset
	gen        uint64 // bumped on every reset; tickets of older gens are stale
	window     int    // learned window, already sanitised (>= 1)
	state      State
	out        []uint64 // ids of tickets in flight, ascending
	nextID     uint64
	ents       []posEnt // unacknowledged positions, ascending from head; see positions.go
	head       int      // ents[head] is the anchor, if head < len(ents)
	nextPos    uint64   // one past the highest position ever reserved
	stamp      uint64   // Limiter.stamp of the last Reserve that admitted p
	invalid    int32    // last invalid window reported, if invalidSet
	invalidSet bool
}

// Topic returns the topic name.
func (p *Partition) Topic() string { return p.topic }

// ID returns the partition number.
func (p *Partition) ID() int32 { return p.id }

// Leader returns the leader node id (< 0: unknown) and leader epoch last
// given to [Limiter.SetLeader]. Unlike the Limiter's methods it takes no
// lock: it is for readers on other goroutines (stats, partitioners) as
// much as for the one that sets the leader.
func (p *Partition) Leader() (leader, epoch int32) {
	v := p.lead.Load()
	return int32(v >> 32), int32(v)
}

func packLead(leader, epoch int32) int64 { return int64(leader)<<32 | int64(uint32(epoch)) }

// New returns a Limiter with no nodes and no partitions. It returns a
// [*ConfigError] if cfg.MaxRequestsPerConn < 1 or cfg.MaxWindow < 0.
func New(cfg Config) (*Limiter, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Limiter{
		maxReqs:   cfg.MaxRequestsPerConn,
		maxWindow: cfg.MaxWindow,
		onInvalid: cfg.OnInvalidWindow,
		onChange:  cfg.OnLimitChange,
		nodes:     make(map[int32]*Node),
		parts:     make(map[partKey]*Partition),
	}, nil
}

// Node returns the node with this id, creating it on first use.
func (l *Limiter) Node(id int32) *Node {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.nodeLocked(id)
}

func (l *Limiter) nodeLocked(id int32) *Node {
	n := l.nodes[id]
	if n == nil {
		n = &Node{id: id, l: l}
		l.nodes[id] = n
	}
	return n
}

// Partition returns the partition, creating it on first use. A new partition
// has no leader (it may send nothing until [Limiter.SetLeader]), limit
// [DefaultWindow] and the first-batch gate armed.
func (l *Limiter) Partition(topic string, partition int32) *Partition {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := partKey{topic, partition}
	p := l.parts[k]
	if p == nil {
		p = &Partition{topic: topic, id: partition, l: l,
			resetAll: l.resetAll, window: DefaultWindow, state: Gated}
		p.lead.Store(packLead(-1, -1))
		l.parts[k] = p
	}
	return p
}

// SetLeader records p's current leader node id (< 0: unknown) and leader
// epoch, from metadata or a KIP-951 CurrentLeader hint. A change of leader id
// or leader epoch resets p: limit back to [DefaultWindow], first-batch gate
// armed. It reports whether anything changed. Batches already in flight to
// the old leader stay counted until completed, but their completions never
// change the new limit or open the gate.
func (l *Limiter) SetLeader(p *Partition, leader int32, leaderEpoch int32) bool {
	l.own(p.l)
	l.mu.Lock()
	if p.lead.Load() == packLead(leader, leaderEpoch) {
		l.mu.Unlock()
		return false
	}
	l.sync(p)
	old := l.limit(p)
	p.lead.Store(packLead(leader, leaderEpoch))
	p.node = nil
	if leader >= 0 {
		p.node = l.nodeLocked(leader)
	}
	l.reset(p)
	now := l.limit(p)
	l.mu.Unlock()
	l.changed(p, old, now, CauseLeader)
	return true
}

// change is one partition's limit change, for [Config.OnLimitChange].
type change struct {
	p        *Partition
	old, now int
}

// changed reports one partition's limit change, with l.mu released.
func (l *Limiter) changed(p *Partition, old, now int, why Cause) {
	if l.onChange != nil && old != now {
		l.onChange(p.topic, p.id, old, now, why)
	}
}

// resetNoting resets the partitions for which match is true, now rather
// than when each is next used, and returns their limit changes: only when
// OnLimitChange is set, else it does nothing (sync catches up lazily).
// Called with l.mu held.
func (l *Limiter) resetNoting(match func(*Partition) bool) []change {
	if l.onChange == nil {
		return nil
	}
	var out []change
	for _, p := range l.parts {
		if !match(p) {
			continue
		}
		old := l.limit(p) // before sync applies the event
		l.sync(p)
		if now := l.limit(p); now != old {
			out = append(out, change{p, old, now})
		}
	}
	sortChanges(out)
	return out
}

// sortChanges puts changes in partition order, as a report of many is
// read (the map of partitions has none).
func sortChanges(ch []change) {
	slices.SortFunc(ch, func(a, b change) int {
		return cmp.Or(cmp.Compare(a.p.topic, b.p.topic), cmp.Compare(a.p.id, b.p.id))
	})
}

// report calls OnLimitChange for each change, with l.mu released.
func (l *Limiter) report(changes []change, why Cause) {
	for _, c := range changes {
		l.onChange(c.p.topic, c.p.id, c.old, c.now, why)
	}
}

// NewConnection records that a new connection to node id was established,
// replacing any earlier one. Every partition led by that node is reset (limit
// [DefaultWindow], gate armed); this is O(1), partitions catch up when next
// used. Requests still in flight on the old connection no longer count
// against MaxRequestsPerConn, but must still be finished.
func (l *Limiter) NewConnection(id int32) {
	l.mu.Lock()
	n := l.nodeLocked(id)
	n.conn++
	n.stale += n.reqs
	n.reqs = 0
	ch := l.resetNoting(func(p *Partition) bool { return p.node == n })
	l.mu.Unlock()
	l.report(ch, CauseConnection)
}

// ResetAll resets every partition (limit [DefaultWindow], gate armed), e.g.
// after the producer bumps its epoch or gets a new producer id. It is O(1).
func (l *Limiter) ResetAll() {
	l.mu.Lock()
	l.resetAll++
	ch := l.resetNoting(func(*Partition) bool { return true })
	l.mu.Unlock()
	l.report(ch, CauseResetAll)
}

// Reset resets p alone (limit [DefaultWindow], gate armed), for when the
// producer suspects the broker dropped its state for p without any visible
// change: after p sat idle long enough for the broker's
// producer.id.expiration.ms (KIP-854) to pass, for example.
func (l *Limiter) Reset(p *Partition) {
	l.own(p.l)
	l.mu.Lock()
	l.sync(p)
	old := l.limit(p)
	l.reset(p)
	now := l.limit(p)
	l.mu.Unlock()
	l.changed(p, old, now, CauseReset)
}

// Limit returns p's current per-partition limit: [DefaultWindow] until
// learned, capped by [Config.MaxWindow]; it does not count the first-batch
// gate (see [Limiter.Gated]).
func (l *Limiter) Limit(p *Partition) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sync(p)
	return l.limit(p)
}

// InFlight returns the number of p's tickets not yet completed, including
// those sent to a previous leader or over an old connection.
func (l *Limiter) InFlight(p *Partition) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(p.out)
}

// NodeInFlight returns the number of requests in flight on the current
// connection to n (reserved and not yet finished).
func (l *Limiter) NodeInFlight(n *Node) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return n.reqs
}

// Gated reports whether p's first-batch gate is armed: at most one batch in
// flight until one is acknowledged by the current leader.
func (l *Limiter) Gated(p *Partition) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sync(p)
	return p.state.gated()
}

// Snapshot returns p's limit, its tickets in flight and its admission
// state read together, under one lock: the three agree with each other,
// as three separate calls need not.
func (l *Limiter) Snapshot(p *Partition) (limit, inFlight int, state State) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sync(p)
	return l.limit(p), len(p.out), p.state
}

// State returns p's admission state.
func (l *Limiter) State(p *Partition) State {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sync(p)
	return p.state
}

// Room returns how many more batches of p [Limiter.Reserve] would admit
// now by the partition's count alone: none without a leader or while
// draining, else its limit (1 while gated) less its tickets in flight,
// at least 0. It ignores the window's anchor and the node's request cap.
func (l *Limiter) Room(p *Partition) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.own(p.l)
	l.sync(p)
	if p.node == nil || p.state.draining() {
		return 0
	}
	limit := l.limit(p)
	if p.state.gated() {
		limit = 1
	}
	return max(limit-len(p.out), 0)
}

// Draining reports whether p is draining after a failed batch: no new batch
// until all of p's batches in flight have completed.
func (l *Limiter) Draining(p *Partition) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return p.state.draining()
}

// own panics if a Node or Partition from another Limiter is passed in.
func (l *Limiter) own(o *Limiter) {
	if o != l {
		panic(panicForeign)
	}
}

// sync applies a NewConnection or ResetAll that p has not seen yet.
func (l *Limiter) sync(p *Partition) {
	if p.resetAll != l.resetAll || (p.node != nil && p.conn != p.node.conn) {
		l.reset(p)
	}
}

// reset starts a new generation of p: nothing is known about the broker's
// state for us, so the limit is the default and one batch must be acked
// before more go out. Draining is kept: it ends when p's batches drain.
func (l *Limiter) reset(p *Partition) {
	p.gen++
	p.window = DefaultWindow
	p.state = p.state.next(evReset)
	p.resetAll = l.resetAll
	if p.node != nil {
		p.conn = p.node.conn
	}
}

// limit is Limit without the lock or sync.
func (l *Limiter) limit(p *Partition) int {
	if n := l.brk.fixed(); n > 0 {
		return n
	}
	w := p.window
	if l.maxWindow > 0 && w > l.maxWindow {
		w = l.maxWindow
	}
	if p.node != nil && p.node.windowCap > 0 && w > p.node.windowCap {
		w = p.node.windowCap
	}
	return w
}

// SetNodeWindowCap caps the limit of every partition led by node id at n
// batches, whatever brokers announce; n == 0 removes the cap and n < 0
// panics. It is for brokers that retain fewer batches than the default:
// Kafka 0.11 (Produce v3) keeps only the last batch per producer, so an
// idempotent producer may have one batch in flight per partition there.
// Set it with each new connection, from the version that connection
// negotiated.
func (l *Limiter) SetNodeWindowCap(id int32, n int) {
	if n < 0 {
		panic(panicNodeCap)
	}
	l.mu.Lock()
	nd := l.nodeLocked(id)
	var ch []change
	if l.onChange != nil && nd.windowCap != n {
		for _, p := range l.parts {
			if p.node == nd {
				l.sync(p)
				ch = append(ch, change{p: p, old: l.limit(p)})
			}
		}
	}
	nd.windowCap = n
	k := 0
	for _, c := range ch {
		if c.now = l.limit(c.p); c.now != c.old {
			ch[k] = c
			k++
		}
	}
	ch = ch[:k]
	sortChanges(ch)
	l.mu.Unlock()
	l.report(ch, CauseConnection)
}

// allowed reports whether p may send its batch at position pos now, ignoring
// the node cap and whether pos is held in flight. p must be synced.
func (l *Limiter) allowed(p *Partition, pos uint64) bool {
	if p.node == nil {
		return false
	}
	if p.state.draining() && !l.brk.on(ignoreDraining) {
		return false
	}
	if !l.brk.on(ignoreAnchor) && !l.inWindow(p, pos) {
		return false
	}
	if n := l.brk.fixed(); n > 0 {
		return len(p.out) < n
	}
	limit := l.limit(p)
	if l.brk.on(ignorePartitionLimit) {
		limit = math.MaxInt
	}
	if p.state.gated() && !l.brk.on(ignoreGate) {
		limit = 1
	}
	return len(p.out) < limit
}
