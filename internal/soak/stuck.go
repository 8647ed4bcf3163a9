package soak

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// The stuck check: a partition with work outstanding must make
// progress. Progress of one producer's partition is a callback: callbacks
// run in Produce order within a partition, so while the oldest record's
// outcome is unknown no callback of the partition runs, and a callback
// means the partition's head moved. A partition is stuck when it had
// records produced and not called back, and no callback, for longer than
//
//	retry.backoff.max.ms + request.timeout.ms + slack
//
// plus what the faults fired meanwhile can honestly cost it: a response
// dropped costs a request timeout, a stall its length plus one, a burst of
// scripted answers a backoff and a request timeout per answer, and so on
// (scheduler.fault). Faults count for the partitions they hit: a node's
// faults for the partitions it leads, a partition's for itself; a stall or
// restart for every partition (metadata requests and the epoch bump may
// wait for the node). When a scripted answer may make the producer bump
// its epoch (any code it does not simply retry), every partition waits for
// the bump's resolution, which any fault can delay: then every fault in
// the interval counts for every partition.
//
// The silence is measured from the later of the last callback and the
// moment the partition's outstanding work began (a record produced while
// nothing was outstanding); a record the producer has not accepted yet
// (Produce blocked on buffer.memory) does not count, so a partition never
// looks stuck for waiting on another one's memory. A fault counts when its
// cost overlaps the silence: fired at a, costing c, it counts if
// a+c >= start of silence and a <= now.

// retryBackoffMax is the producers' retry.backoff.max.ms; it also bounds
// their reconnect backoff (producer/conns.go).
const retryBackoffMax = 100 * time.Millisecond

// reconnectAllowance is what a lost connection costs before requests flow
// again: the reconnect backoff with its 20% jitter, and the handshake.
const reconnectAllowance = 2 * retryBackoffMax

// stuckSlack absorbs goroutine scheduling on a loaded 2-core machine (the
// soak runs in CI beside other packages, with -race).
const stuckSlack = time.Second

// faultCost is what one fault may cost, in time without progress.
type faultCost struct {
	at    time.Time
	cost  time.Duration
	parts []tp // partitions it delays; nil: every partition
	// couples is true when the fault may force an epoch bump, which holds
	// every partition of the producer until it is resolved.
	couples bool
	what    string
}

// stuckWatch samples every producer's partitions for progress. Only the
// scheduler goroutine calls it.
type stuckWatch struct {
	base   time.Duration // retry.backoff.max + request.timeout + slack
	books  []*book
	topics []string
	costs  []faultCost

	samples   int           // partition samples with work outstanding
	maxSilent time.Duration // longest silence seen at a sample
	stuck     int           // stuck episodes (one per partition silence)
	problems  []string
}

func newStuckWatch(requestTimeout, maxRTT time.Duration, books []*book, topics []string) *stuckWatch {
	return &stuckWatch{base: retryBackoffMax + requestTimeout + 4*maxRTT + stuckSlack, books: books, topics: topics}
}

// add records a fault's cost.
func (sw *stuckWatch) add(c faultCost) {
	// Keep a few minutes: a silence longer than that is flagged long
	// before its faults are forgotten.
	cut := 0
	for cut < len(sw.costs) && c.at.Sub(sw.costs[cut].at) > 3*time.Minute {
		cut++
	}
	sw.costs = append(sw.costs[cut:], c)
}

// allowance is how long p may go without progress from since to now.
func (sw *stuckWatch) allowance(p tp, since, now time.Time) (time.Duration, []string) {
	var in []faultCost
	coupled := false
	for _, c := range sw.costs {
		if c.at.Add(c.cost).Before(since) || c.at.After(now) {
			continue
		}
		in = append(in, c)
		coupled = coupled || c.couples
	}
	d := sw.base
	var why []string
	for _, c := range in {
		if coupled || c.parts == nil || slices.Contains(c.parts, p) {
			d += c.cost
			why = append(why, fmt.Sprintf("%s %s (+%v)", c.at.Format("05.000"), c.what, c.cost))
		}
	}
	return d, why
}

// check samples every producer's partitions at now.
func (sw *stuckWatch) check(now time.Time) {
	for i, b := range sw.books {
		b.mu.Lock()
		for j := range b.streams {
			st := &b.streams[j]
			if st.outstanding <= 0 || st.flagged {
				continue
			}
			sw.samples++
			silent := now.Sub(st.since)
			sw.maxSilent = max(sw.maxSilent, silent)
			p := tp{sw.topics[j/partitions], int32(j % partitions)}
			allowed, why := sw.allowance(p, st.since, now)
			if silent <= allowed {
				continue
			}
			st.flagged = true
			sw.stuck++
			if len(sw.problems) < 20 {
				sw.problems = append(sw.problems, fmt.Sprintf("stuck: producer %d %s[%d]: %d records outstanding, no callback for %v (allowed %v) since %s; faults counted: [%s]",
					i, p.topic, p.part, st.outstanding, silent.Round(time.Millisecond), allowed, st.since.Format("15:04:05.000"), strings.Join(why, "; ")))
			}
		}
		b.mu.Unlock()
	}
}
