package broker

import (
	"errors"
	"fmt"
	"net"
	"time"
)

// NodeMove says how [Cluster.MoveNode] moves a node to a new address.
type NodeMove struct {
	// Replace makes another broker process take the node id at the new
	// address, as when a machine is replaced or a broker restarts
	// elsewhere: it has announced no window yet ([Cluster.OverWindow])
	// and starts with no pending fault hooks; as the transaction
	// coordinator of the ids whose __transaction_state partitions the
	// node leads, it loads them from the log, not knowing the epoch
	// before each id's last bump ([Cluster.MoveCoordinator]). Without it
	// the same process
	// is reached at the new address (a changed listener or IP): what it
	// announced and its armed faults carry over.
	Replace bool
	// Mode, with Replace, is the new process's version: [SameMode] keeps
	// the old one's old-mode and Kafka 2.4 settings.
	Mode NodeMode
	// Snapshot, with Replace, makes the new process start from the
	// producer-state snapshot the old one wrote at shutdown, which keeps
	// each producer's last batch only (Kafka's
	// ProducerStateManager.writeSnapshot): on every partition the node
	// leads, a retry of any earlier batch is then answered
	// OUT_OF_ORDER_SEQUENCE_NUMBER instead of as a duplicate. Logs, and
	// producer ids and epochs, are kept.
	Snapshot bool
	// Grace is how long the old process lives on after the move: it
	// keeps the connections it has and keeps accepting at the old
	// address, but answers nothing until Grace ends (a broker in
	// controlled shutdown, holding what it read), then answers what it
	// read, and closes its connections and listener one round trip and
	// a millisecond after the end of the grace. 0 closes them at once:
	// responses not yet written are lost (appends that happened stay).
	Grace time.Duration
}

// NodeMode is a replacement process's version ([NodeMove].Mode).
type NodeMode uint8

const (
	// SameMode keeps the replaced process's old-mode and Kafka 2.4
	// settings.
	SameMode NodeMode = iota
	// CurrentMode is a KIP-1269 broker: neither old mode nor Kafka 2.4.
	CurrentMode
	// OldMode is a broker before KIP-1269 ([Cluster.SetOld]): no Produce
	// v14, 5 batches retained.
	OldMode
)

// MoveNode moves node id to a new address on the cluster's network and
// returns it: the node keeps its id, Metadata (and KIP-951 leader hints)
// announce the new address from now on, and partitions keep their leader
// and leader epoch. The old address stops accepting and its connections
// close as m.Grace says; m says whether another process takes over.
// The node's round trip and bandwidth carry over. It returns
// [ErrUnknownNode], [ErrClosed] after Close, or the listen error, and then
// nothing changes.
func (c *Cluster) MoveNode(id int32, m NodeMove) (string, error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return "", ErrClosed
	}
	old, err := c.node(id)
	host := "127.0.0.1"
	if err == nil {
		if h, _, e := net.SplitHostPort(old.addr); e == nil {
			host = h
		}
	}
	c.mu.Unlock()
	if err != nil {
		return "", err
	}
	ln, err := c.cfg.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return "", fmt.Errorf("broker: move node %d: %w", id, err)
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		ln.Close()
		return "", ErrClosed
	}
	old = c.nodes[id] // a concurrent move may have replaced it
	n := &node{c: c, id: id, conns: make(map[*conn]struct{}), ln: ln, addr: ln.Addr().String(),
		proc: old.proc, old: old.old, kafka24: old.kafka24, rtt: old.rtt, bw: old.bw,
		stallUntil: old.stallUntil, dropProduce: old.dropProduce, throttle: old.throttle, closeAfter: old.closeAfter}
	if m.Replace {
		n.proc = newProcess()
		n.stallUntil, n.dropProduce, n.throttle, n.closeAfter = time.Time{}, 0, 0, 0
		switch m.Mode {
		case CurrentMode:
			n.old, n.kafka24 = false, false
		case OldMode:
			n.old, n.kafka24 = true, false
		}
		// The new process loads the __transaction_state partitions the
		// node leads, as a coordinator does.
		for i, leader := range c.coordLeaders[1] {
			if leader == id {
				c.loadTxnPartition(i)
			}
		}
		if m.Snapshot {
			for _, t := range c.topics {
				for _, p := range t.parts {
					if p.leader != id {
						continue
					}
					for _, s := range p.pids {
						s.trim(1)
					}
				}
			}
		}
	}
	c.nodes[id] = n
	c.serve(n, n.ln)
	if m.Grace <= 0 {
		oldLn := old.ln
		old.ln = nil
		conns := old.connList()
		c.mu.Unlock()
		if oldLn != nil {
			oldLn.Close()
		}
		for _, cc := range conns {
			cc.close()
		}
		return n.addr, nil
	}
	if until := time.Now().Add(m.Grace); until.After(old.stallUntil) {
		old.stallUntil = until
		old.quiet(until)
	}
	c.retired = append(c.retired, old)
	old.retire = time.AfterFunc(m.Grace+old.rtt+time.Millisecond, func() { c.endProcess(old) })
	c.mu.Unlock()
	return n.addr, nil
}

// endProcess closes the listener and connections of a process MoveNode
// replaced, once its grace is over.
func (c *Cluster) endProcess(old *node) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	for i, r := range c.retired {
		if r == old {
			c.retired = append(c.retired[:i], c.retired[i+1:]...)
			break
		}
	}
	ln := old.ln
	old.ln = nil
	conns := old.connList()
	c.mu.Unlock()
	if ln != nil {
		if err := ln.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			c.logger.Debug("broker: closing a replaced process's listener", "node", old.id, "err", err)
		}
	}
	for _, cc := range conns {
		cc.close()
	}
}

// process is what one broker process knows of its clients: the largest
// window it announced per partition in a response it wrote, and the
// batches in flight at it. c.mu guards it.
type process struct {
	announced map[*partition]int32
	// quietUntil ends a stall of the process (Stall, a grace) and the
	// round trip after it: until then batches are not counted, since a
	// stalled process notices no closed connection, and holds batches
	// their client gave up on and retried (OverWindow).
	quietUntil time.Time
	// copies counts each batch's copies in flight (a retry may be read
	// while the process still holds an attempt the client gave up on,
	// read late after a stall); batches counts the distinct batches in
	// flight per producer id, epoch and partition.
	copies  map[procBatch]int
	batches map[procBatch]int // seq 0: the key of a producer id's epoch on a partition
}

// procBatch names one batch (or, seq 0, one producer epoch) of a
// partition.
type procBatch struct {
	p     *partition
	pid   int64
	epoch int16
	seq   int32
}

func newProcess() *process {
	return &process{announced: make(map[*partition]int32), copies: make(map[procBatch]int), batches: make(map[procBatch]int)}
}

// addInflight adds d (1 or -1) copies of batch b and returns how many
// distinct batches of its producer epoch on its partition are then in
// flight.
func (pr *process) addInflight(b procBatch, d int) int {
	e := b
	e.seq = 0
	n := pr.copies[b] + d
	switch {
	case n <= 0:
		delete(pr.copies, b)
	default:
		pr.copies[b] = n
	}
	if n == 0 && d < 0 || n == 1 && d > 0 {
		pr.batches[e] += d
	}
	m := pr.batches[e]
	if m <= 0 {
		delete(pr.batches, e)
	}
	return m
}

// announced records the windows the responses of p (about to be written)
// announce. Takes c.mu.
func (c *Cluster) announced(p *pending) {
	var any bool
	for _, r := range p.inflight {
		any = any || r.w > 0
	}
	if !any {
		return
	}
	c.mu.Lock()
	for _, r := range p.inflight {
		if r.w > r.n.proc.announced[r.p] {
			r.n.proc.announced[r.p] = r.w
		}
	}
	c.mu.Unlock()
}

// maxOverWindow is how many over-window batches OverWindow describes.
const maxOverWindow = 5

// quiet extends the time n's process counts no batch (process.quietUntil)
// to a stall lasting until until. c.mu is held.
func (n *node) quiet(until time.Time) {
	if until = until.Add(n.rtt + time.Millisecond); until.After(n.proc.quietUntil) {
		n.proc.quietUntil = until
	}
}

// checkWindow counts batch b just read by n in n's process, unless the
// process is quiet, and notes it when its producer now has more batches of
// the partition in flight there, in one epoch, than the process ever
// announced it retains. It reports whether it counted b. c.mu is held.
func (c *Cluster) checkWindow(n *node, b procBatch) bool {
	if time.Now().Before(n.proc.quietUntil) {
		return false
	}
	p, pid := b.p, b.pid
	cnt := n.proc.addInflight(b, 1)
	limit := int(n.proc.announced[p])
	if limit == 0 {
		limit = DefaultWindow
	}
	if v, capped := n.produceCap(); capped && v < 4 {
		// Kafka 0.11 announces nothing and retains only the last batch.
		limit = 1
	}
	if cnt <= limit {
		return true
	}
	c.overWindow++
	if len(c.overWindowFirst) < maxOverWindow {
		c.overWindowFirst = append(c.overWindowFirst, fmt.Sprintf(
			"node %d: producer id %d had %d batches of %s[%d] in flight, beyond the %d this process announced (%d before any answer, 1 at Produce v3)",
			n.id, pid, cnt, p.t.name, p.index, limit, DefaultWindow))
	}
	return true
}

// OverWindow returns how many batches a producer had in flight at a broker
// process beyond the window that process had announced for the partition
// (KIP-1269's rule for clients), and describes the first few. A batch
// counts from when it is read until its response is written (or dropped,
// or its connection closes), as [PartitionStats].MaxInFlight, but once
// however many copies of it are in flight, and batches of different
// producer epochs apart (a bump starts the state anew). A batch read
// during a stall of its process ([Cluster.Stall], a replaced process's
// grace) or one round trip after is not counted: a stalled process
// notices no closed connection, so it holds batches their client gave up
// on and retried elsewhere. A window
// counts as announced once a response carrying it is written to any
// client: the largest so announced by the process, or 5 (what every
// broker since Kafka 1.0 retains) before any; on a node capped at Produce
// v3 ([Config].ProduceMaxVersions: Kafka 0.11, which retains only the
// last batch per producer) the window is 1. A process replaced by [Cluster.MoveNode]
// with Replace has announced nothing. The check is lenient where the
// client cannot be judged: a window shrunk by [Cluster.SetWindow] still
// allows the larger one announced before.
func (c *Cluster) OverWindow() (int64, []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.overWindow, append([]string(nil), c.overWindowFirst...)
}
