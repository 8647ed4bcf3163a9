package soak

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/longhaul-kafka/longhaul/internal/broker"
)

// windowTracker checks that no partition ever has more batches of one
// producer in flight, as the broker counts them (PartitionStats.MaxInFlight),
// than the window in force. It is used by the scheduler goroutine only.
//
// The broker's counter is a maximum since the last ResetStats, so the run is
// cut into segments: every change of a window (SetWindow, or a leader moving
// onto or off an old-mode node, which retains 5) first closes the current
// segment, and a tick closes one every segmentEvery. A closed segment is
// checked against the window in force during it, raised to the previous
// window while a change is recent:
//
//   - after a shrink the producer may still hold batches it sent under the
//     old window, and may send a few more until a response tells it the new
//     one; those requests leave the broker within a round trip or two, so
//     the old window stays allowed for grace after the change;
//   - a stall keeps requests counted at the broker for its whole length
//     (and requests of a connection the producer abandoned are still
//     handled after it, as by a real broker), so a stall extends every
//     grace running and segments overlapping a stall allow stallSlack more
//     (the producer's next connection carries one gated batch).
type windowTracker struct {
	c        *broker.Cluster
	grace    time.Duration
	parts    []tp
	base     map[string]int // topic -> producer.state.batches.to.retain
	old      map[int32]bool // old-mode nodes
	leader   map[tp]int32
	relax    map[tp]relaxation
	segStart time.Time
	stallEnd time.Time // latest stall end plus grace

	maxSeen    map[string]int // topic -> largest MaxInFlight seen
	segments   int
	violations int
	problems   []string
}

// relaxation allows bound until until.
type relaxation struct {
	bound int
	until time.Time
}

// stallSlack is the extra in-flight batches allowed in a segment that
// overlaps a stall; see windowTracker.
const stallSlack = 2

func newWindowTracker(c *broker.Cluster, grace time.Duration, windows map[string]int, partitions int32, old []int32, now time.Time) *windowTracker {
	w := &windowTracker{
		c: c, grace: grace, base: windows, old: map[int32]bool{},
		leader: map[tp]int32{}, relax: map[tp]relaxation{}, maxSeen: map[string]int{},
		segStart: now,
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

// window is the window the broker applies to p now.
func (w *windowTracker) window(p tp) int {
	if w.old[w.leader[p]] {
		return broker.DefaultWindow
	}
	return w.base[p.topic]
}

// bound is the most batches allowed in flight for p in the segment that
// started at w.segStart.
func (w *windowTracker) bound(p tp) int {
	b := w.window(p)
	if r, ok := w.relax[p]; ok && r.until.After(w.segStart) {
		b = max(b, r.bound)
	}
	if w.stallEnd.After(w.segStart) {
		b += stallSlack
	}
	return b
}

// closeSegment checks every partition's counters against its bound and
// starts a new segment.
func (w *windowTracker) closeSegment(now time.Time) {
	for _, p := range w.parts {
		st := w.c.PartitionStats(p.topic, p.part)
		w.maxSeen[p.topic] = max(w.maxSeen[p.topic], st.MaxInFlight)
		if b := w.bound(p); st.MaxInFlight > b {
			w.violations++
			if len(w.problems) < 20 {
				w.problems = append(w.problems, fmt.Sprintf("%s[%d]: %d batches of one producer in flight at the broker, window in force %d (segment %v..%v)",
					p.topic, p.part, st.MaxInFlight, b, w.segStart.Format("15:04:05.000"), now.Format("15:04:05.000")))
			}
		}
	}
	w.c.ResetStats()
	w.segStart = now
	w.segments++
}

// changing records that p's window goes from its current value to next at
// now (after closeSegment).
func (w *windowTracker) changing(p tp, prev int, now time.Time) {
	until := now.Add(w.grace)
	if w.stallEnd.After(until) {
		until = w.stallEnd
	}
	r := w.relax[p]
	if !r.until.After(now) {
		r.bound = 0
	}
	w.relax[p] = relaxation{bound: max(r.bound, prev), until: until}
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
	for p, pw := range prev {
		w.changing(p, pw, now)
	}
	return nil
}

// moveLeader applies a leader move of p to node through apply.
func (w *windowTracker) moveLeader(p tp, node int32, apply func() error) error {
	now := time.Now()
	w.closeSegment(now)
	prev := w.window(p)
	if err := apply(); err != nil {
		return err
	}
	w.leader[p] = node
	w.changing(p, prev, now)
	return nil
}

// stalled records a stall ending at end.
func (w *windowTracker) stalled(end time.Time) {
	now := time.Now()
	w.closeSegment(now)
	if e := end.Add(w.grace); e.After(w.stallEnd) {
		w.stallEnd = e
	}
	for p, r := range w.relax {
		if r.until.After(now) && r.until.Before(w.stallEnd) {
			r.until = w.stallEnd
			w.relax[p] = r
		}
	}
}

// summary formats the largest in-flight count seen per topic.
func (w *windowTracker) summary() string {
	names := make([]string, 0, len(w.maxSeen))
	for t := range w.maxSeen {
		names = append(names, t)
	}
	sort.Strings(names)
	var sb strings.Builder
	sb.WriteByte('{')
	for i, t := range names {
		if i > 0 {
			sb.WriteByte(' ')
		}
		fmt.Fprintf(&sb, "%s:%d", t, w.maxSeen[t])
	}
	sb.WriteByte('}')
	return sb.String()
}
