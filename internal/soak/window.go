package soak

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/longhaul-kafka/longhaul/internal/broker"
)

// windowTracker checks that no partition ever has more batches of one
// producer in flight, as the broker counts them (PartitionStats.MaxInFlight),
// than the producer may have sent. The scheduler goroutine drives it; only
// lost records connection losses from producer goroutines.
//
// The broker's counter is a maximum since the last ResetStats, so the run is
// cut into segments: every change of a window (SetWindow, or a leader moving
// onto or off an old-mode node, which retains 5) first closes the current
// segment, and a tick closes one every segmentEvery. A closed segment is
// checked against the window in force during it, W, exactly, except in two
// cases the broker legitimately counts more, each bounded precisely rather
// than with a time margin where the producers' own view allows it:
//
//   - After a shrink (or a move onto an old-mode node) a producer learns
//     the new window only from the next response; batches it sent before
//     may exceed the new window (inherent to KIP-1269). The previous window
//     stays allowed until every producer's own view (producer.Stats) shows
//     the partition with Limit <= W and InFlight <= W: from then on its
//     limiter admits nothing beyond W. No time margin.
//   - A producer that gives up a connection (request timeout, typically
//     while a node is stalled) completes that connection's batches at once,
//     but the broker keeps counting them until it finds the connection
//     closed: after a stall it even reads and handles the requests still
//     buffered in the socket. Meanwhile the producer sends on its new
//     connection, so the broker sees both. At the loss (seen through the
//     producer's HookBrokerDisconnect, hook.go) the tracker records
//     the producer's in-flight count of every partition the node led;
//     that many more batches are allowed for that producer's partition
//     until the node's stall, if any, is over plus drain. drain is the one
//     time margin left: when the broker has dropped a closed connection's
//     requests is not observable from outside internal/broker.
//
// A stall alone needs no allowance: requests held by a stalled node are
// still in flight for the producer too.
type windowTracker struct {
	c     *broker.Cluster
	drain time.Duration
	parts []tp
	base  map[string]int // topic -> producer.state.batches.to.retain
	old   map[int32]bool // old-mode nodes

	leader    map[tp]int32
	unsettled map[tp]int           // p -> largest earlier window the producers may still use
	stallEnd  map[int32]time.Time  // node -> end of its latest stall
	views     func() []map[tp]view // each producer's view of every partition; nil: none
	segStart  time.Time

	mu   sync.Mutex
	lost []connLoss // guarded by mu: appended by producer goroutines

	events   []event           // recent events, for the report of a violation
	snapshot func(p tp) string // producers' view of p, for the report; may be nil

	maxSeen    map[string]int // topic -> largest MaxInFlight seen
	segments   int
	checks     int // partition-segments checked
	strict     int // of which checked at exactly the window in force
	violations int
	problems   []string
}

// view is one producer's view of one partition, from producer.Stats.
type view struct {
	limit, inflight int
	leader          int32
}

// connLoss is a connection a producer gave up, with its in-flight count
// of each partition the node led then.
type connLoss struct {
	producer int
	node     int32
	at       time.Time
	inflight map[tp]int
}

// event is one fault or window change, kept for the report of a violation.
type event struct {
	at   time.Time
	what string
}

func newWindowTracker(c *broker.Cluster, drain time.Duration, windows map[string]int, partitions int32, old []int32, now time.Time) *windowTracker {
	w := &windowTracker{
		c: c, drain: drain, base: windows, old: map[int32]bool{},
		leader: map[tp]int32{}, unsettled: map[tp]int{}, stallEnd: map[int32]time.Time{},
		maxSeen: map[string]int{}, segStart: now,
	}
	for _, n := range old {
		w.old[n] = true
	}
	for t := range windows {
		for p := range partitions {
			k := tp{t, p}
			w.parts = append(w.parts, k)
			w.leader[k], _ = c.Leader(t, p)
		}
	}
	sort.Slice(w.parts, func(i, j int) bool {
		a, b := w.parts[i], w.parts[j]
		return a.topic < b.topic || a.topic == b.topic && a.part < b.part
	})
	c.ResetStats()
	return w
}

// note records an event for the report of a later violation.
func (w *windowTracker) note(at time.Time, format string, args ...any) {
	if len(w.events) >= 256 {
		w.events = append(w.events[:0], w.events[128:]...)
	}
	w.events = append(w.events, event{at, fmt.Sprintf(format, args...)})
}

// recent formats the events since from.
func (w *windowTracker) recent(from time.Time) string {
	var sb strings.Builder
	for _, e := range w.events {
		if !e.at.Before(from) {
			fmt.Fprintf(&sb, " %s %s;", e.at.Format("05.000"), e.what)
		}
	}
	return sb.String()
}

// connLost records that a producer gave up a connection to node; safe
// from any goroutine. inflight is the producer's in-flight count of each
// partition it had led by node at that moment.
func (w *windowTracker) connLost(producer int, node int32, at time.Time, inflight map[tp]int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.lost = append(w.lost, connLoss{producer: producer, node: node, at: at, inflight: inflight})
}

// window is the window the broker applies to p now.
func (w *windowTracker) window(p tp) int {
	if w.old[w.leader[p]] {
		return broker.DefaultWindow
	}
	return w.base[p.topic]
}

// drainEnd is when the broker has surely dropped the requests of a
// connection lost at l.at: after the node's stall, if any, plus drain.
func (w *windowTracker) drainEnd(l connLoss) time.Time {
	end := l.at
	if se := w.stallEnd[l.node]; se.After(end) {
		end = se
	}
	return end.Add(w.drain)
}

// bound is the most batches of one producer allowed in flight for p at the
// broker in the segment from w.segStart to end, and whether that is the
// window in force exactly.
func (w *windowTracker) bound(p tp, end time.Time) (int, bool) {
	b := max(w.window(p), w.unsettled[p])
	w.mu.Lock()
	extra := map[int]int{}
	for _, l := range w.lost {
		if n := l.inflight[p]; n > 0 && !l.at.After(end) && !w.drainEnd(l).Before(w.segStart) {
			extra[l.producer] += n
		}
	}
	w.mu.Unlock()
	most := 0
	for _, n := range extra {
		most = max(most, n)
	}
	return b + most, b+most == w.window(p)
}

// closeSegment checks every partition's counters against its bound,
// settles window changes the producers have all learned, and starts a new
// segment.
func (w *windowTracker) closeSegment(now time.Time) {
	for _, p := range w.parts {
		st := w.c.PartitionStats(p.topic, p.part)
		w.maxSeen[p.topic] = max(w.maxSeen[p.topic], st.MaxInFlight)
		b, strict := w.bound(p, now)
		w.checks++
		if strict {
			w.strict++
		}
		if st.MaxInFlight > b {
			w.violations++
			if len(w.problems) < 20 {
				msg := fmt.Sprintf("%s[%d]: %d batches of one producer in flight at the broker, allowed %d, window in force %d (segment %v..%v); events:%s",
					p.topic, p.part, st.MaxInFlight, b, w.window(p), w.segStart.Format("15:04:05.000"), now.Format("15:04:05.000"), w.recent(w.segStart.Add(-2*time.Second)))
				if w.snapshot != nil {
					msg += " producers now: " + w.snapshot(p)
				}
				w.problems = append(w.problems, msg)
			}
		}
	}
	w.settle()
	w.mu.Lock()
	keep := w.lost[:0]
	for _, l := range w.lost {
		if !w.drainEnd(l).Before(now) {
			keep = append(keep, l)
		}
	}
	clear(w.lost[len(keep):])
	w.lost = keep
	w.mu.Unlock()
	w.c.ResetStats()
	w.segStart = now
	w.segments++
}

// settle ends the allowance of an earlier window for every partition that
// all producers now see within the window in force: their limiters admit
// nothing beyond it from here on.
func (w *windowTracker) settle() {
	if len(w.unsettled) == 0 {
		return
	}
	var views []map[tp]view
	if w.views != nil {
		views = w.views()
	}
	for p := range w.unsettled {
		win, ok := w.window(p), true
		for _, v := range views {
			if pv, seen := v[p]; seen && (pv.limit > win || pv.inflight > win) {
				ok = false
			}
		}
		if ok {
			delete(w.unsettled, p)
		}
	}
}

// changing records that p's window goes from prev to its current value
// (after closeSegment): prev stays allowed until the producers settle.
func (w *windowTracker) changing(p tp, prev int) {
	if prev > w.window(p) {
		w.unsettled[p] = max(w.unsettled[p], prev)
	}
}

// setWindow applies a topic window change through apply.
func (w *windowTracker) setWindow(topic string, n int, apply func() error) error {
	now := time.Now()
	w.closeSegment(now)
	prev := map[tp]int{}
	for _, p := range w.parts {
		if p.topic == topic {
			prev[p] = w.window(p)
		}
	}
	if err := apply(); err != nil {
		return err
	}
	w.base[topic] = n
	w.note(now, "set window %s %d", topic, n)
	for p, pw := range prev {
		w.changing(p, pw)
	}
	return nil
}

// moveLeader applies a leader move of p to node through apply.
func (w *windowTracker) moveLeader(p tp, node int32, apply func() error) error {
	w.closeSegment(time.Now())
	prev := w.window(p)
	if err := apply(); err != nil {
		return err
	}
	w.leader[p] = node
	w.changing(p, prev)
	return nil
}

// stalled records a stall of node ending at end.
func (w *windowTracker) stalled(node int32, end time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if end.After(w.stallEnd[node]) {
		w.stallEnd[node] = end
	}
}

// summary formats the largest in-flight count seen per topic.
func (w *windowTracker) summary() string {
	var sb strings.Builder
	writeCounts(&sb, w.maxSeen)
	return sb.String()
}

// ledBy returns the partitions node leads now, as the tracker knows them.
func (w *windowTracker) ledBy(node int32) []tp {
	var out []tp
	for _, p := range w.parts {
		if w.leader[p] == node {
			out = append(out, p)
		}
	}
	return out
}
