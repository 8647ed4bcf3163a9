package main

import (
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/longhaul-kafka/longhaul/producer"
)

// Where a longhaul transaction's time goes (--txn-phases): a hook on the
// producer's batch events and its epoch changes, and the transaction loop's
// own marks (Begin, the end of producing, Commit's return), cut each
// transaction into phases:
//
//	ramp     Begin to the first acknowledgement (the first round trip)
//	produce  the first acknowledgement to the end of producing
//	flush    the end of producing to the last batch sent
//	tail     the last batch sent to its acknowledgement
//	endtxn   the last acknowledgement to the new epoch (EndTxn's answer:
//	         under transaction version 2 every EndTxn bumps the epoch)
//	return   the new epoch to CommitTransaction's return
//	gap      CommitTransaction's return to the next Begin (the loop)
//
// and integrate the batches in flight over each, so that the link's use
// (batches in flight over partitions x window) says which phases keep the
// window full. The produce requests' median latency says how far the
// broker's answers lag the round trip: committed records/s is the use
// times the bound times RTT over that latency (and the value bytes' share
// of a batch).

// txnPhase names the phases, in order.
var txnPhase = []string{"ramp", "produce", "flush", "tail", "endtxn", "return", "gap"}

// txnTrace is one transaction's marks.
type txnTrace struct {
	begin, firstAck, prodEnd, lastSent, lastAck, bump, commitRet, next time.Time
	rejected                                                           int // batch answers with an error (retried or failed)
}

// bounds returns the phases' start times and the end of the last one, or
// false if a mark is missing.
func (t *txnTrace) bounds() ([8]time.Time, bool) {
	b := [8]time.Time{t.begin, t.firstAck, t.prodEnd, t.lastSent, t.lastAck, t.bump, t.commitRet, t.next}
	if b[3].Before(b[2]) {
		b[3] = b[2] // nothing left to send at the end of producing
	}
	for i, x := range b {
		if x.IsZero() || (i > 0 && x.Before(b[i-1])) {
			return b, false
		}
	}
	return b, true
}

// inflightAt is the number of batches in flight from at on.
type inflightAt struct {
	at time.Time
	n  int
}

// txnPhases is the hook and the loop's marks; every method may run on any
// goroutine.
type txnPhases struct {
	mu       sync.Mutex
	inflight int
	steps    []inflightAt
	cur      *txnTrace
	all      []*txnTrace
	// resp are the produce requests' latencies (sent to answered) by
	// when they were answered.
	resp []inflightAt
}

var (
	_ producer.HookBatchSent     = (*txnPhases)(nil)
	_ producer.HookBatchAcked    = (*txnPhases)(nil)
	_ producer.HookBatchRejected = (*txnPhases)(nil)
	_ producer.HookProducerID    = (*txnPhases)(nil)
	_ producer.HookRequestDone   = (*txnPhases)(nil)
)

func (p *txnPhases) OnRequestDone(r producer.RequestInfo) {
	if r.Err != nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.resp = append(p.resp, inflightAt{time.Now(), int(r.Latency)})
}

func (p *txnPhases) OnBatchSent(producer.BatchInfo) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	p.inflight++
	p.steps = append(p.steps, inflightAt{now, p.inflight})
	if p.cur != nil && p.cur.bump.IsZero() {
		p.cur.lastSent = now
	}
}

func (p *txnPhases) answered(rejected bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	p.inflight--
	p.steps = append(p.steps, inflightAt{now, p.inflight})
	if p.cur == nil {
		return
	}
	if rejected {
		p.cur.rejected++
	}
	if p.cur.firstAck.IsZero() {
		p.cur.firstAck = now
	}
	if !p.cur.prodEnd.IsZero() && p.cur.bump.IsZero() {
		p.cur.lastAck = now
	}
}

func (p *txnPhases) OnBatchAcked(producer.BatchInfo, int64) { p.answered(false) }

func (p *txnPhases) OnBatchRejected(_ producer.BatchInfo, _ error, _ bool) { p.answered(true) }

func (p *txnPhases) OnProducerID(_ int64, _ int16, _ int64, _ int16) {
	p.mark(func(t *txnTrace, now time.Time) {
		if !t.prodEnd.IsZero() && t.bump.IsZero() {
			t.bump = now
		}
	})
}

func (p *txnPhases) mark(f func(t *txnTrace, now time.Time)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cur != nil {
		f(p.cur, time.Now())
	}
}

// began starts the next transaction's trace (and ends the last one's gap).
func (p *txnPhases) began() {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	if p.cur != nil {
		p.cur.next = now
	}
	p.cur = &txnTrace{begin: now}
	p.all = append(p.all, p.cur)
}

func (p *txnPhases) produced() { p.mark(func(t *txnTrace, now time.Time) { t.prodEnd = now }) }

func (p *txnPhases) committed() { p.mark(func(t *txnTrace, now time.Time) { t.commitRet = now }) }

// busy integrates the batches in flight over [from, to), in
// batch-seconds. p.mu held.
func (p *txnPhases) busy(from, to time.Time) float64 {
	i, _ := slices.BinarySearchFunc(p.steps, from, func(s inflightAt, t time.Time) int { return s.at.Compare(t) })
	n := 0
	if i > 0 {
		n = p.steps[i-1].n
	}
	var sum float64
	at := from
	for ; i < len(p.steps) && p.steps[i].at.Before(to); i++ {
		sum += float64(n) * p.steps[i].at.Sub(at).Seconds()
		at, n = p.steps[i].at, p.steps[i].n
	}
	return sum + float64(n)*to.Sub(at).Seconds()
}

// phaseSummary is the mean of each phase over the measured transactions.
type phaseSummary struct {
	n        int
	dur      [7]time.Duration // mean length
	use      [7]float64       // mean batches in flight / (partitions x window); -1 if the phase is empty
	rejected float64          // rejected batch answers per transaction
	total    time.Duration    // mean transaction length, Begin to next Begin
	// resp50 is the median produce request latency (sent to answered)
	// inside the window: the RTT plus the broker's time.
	resp50 time.Duration
}

// summary averages the transactions that began at or after from and whose
// next Begin came by to; capacity is partitions x window.
func (p *txnPhases) summary(from, to time.Time, capacity int) phaseSummary {
	p.mu.Lock()
	defer p.mu.Unlock()
	var s phaseSummary
	var busy [7]float64
	var secs [7]float64
	for _, t := range p.all {
		b, ok := t.bounds()
		if !ok || b[0].Before(from) || b[7].After(to) {
			continue
		}
		s.n++
		for i := range 7 {
			d := b[i+1].Sub(b[i])
			s.dur[i] += d
			secs[i] += d.Seconds()
			busy[i] += p.busy(b[i], b[i+1])
		}
		s.total += b[7].Sub(b[0])
		s.rejected += float64(t.rejected)
	}
	var resp []time.Duration
	for _, r := range p.resp {
		if !r.at.Before(from) && !r.at.After(to) {
			resp = append(resp, time.Duration(r.n))
		}
	}
	s.resp50 = percentile(resp, 0.5)
	if s.n == 0 {
		return s
	}
	for i := range 7 {
		s.dur[i] /= time.Duration(s.n)
		s.use[i] = -1
		if secs[i] > 0 {
			s.use[i] = busy[i] / secs[i] / float64(capacity)
		}
	}
	s.total /= time.Duration(s.n)
	s.rejected /= float64(s.n)
	return s
}

// printPhases writes one row per case: each phase's mean length and, in
// brackets, the link's use during it.
func printPhases(w io.Writer, rows []phaseRow) {
	if len(rows) == 0 {
		return
	}
	fmt.Fprintln(w, "\nWhere a transaction's time goes (--txn-phases): mean ms per phase (link use: batches in flight / partitions x window):")
	fmt.Fprintln(w)
	fmt.Fprint(w, "| parts | txn | client | txns |")
	for _, ph := range txnPhase {
		fmt.Fprintf(w, " %s |", ph)
	}
	fmt.Fprintln(w, " total | use over the txn | Produce request p50 | rejected/txn |")
	fmt.Fprint(w, "|---:|---:|---|---:|")
	for range txnPhase {
		fmt.Fprint(w, "---:|")
	}
	fmt.Fprintln(w, "---:|---:|---:|---:|")
	for _, r := range rows {
		s := r.s
		fmt.Fprintf(w, "| %d | %v | %s #%d | %d |", r.parts, r.txn, r.client, r.round, s.n)
		var all float64
		for i := range txnPhase {
			use := "-"
			if s.use[i] >= 0 {
				use = fmt.Sprintf("%.0f %%", 100*s.use[i])
				all += s.use[i] * s.dur[i].Seconds()
			}
			fmt.Fprintf(w, " %.1f (%s) |", float64(s.dur[i].Microseconds())/1000, use)
		}
		fmt.Fprintf(w, " %.1f | %.0f %% | %s | %.1f |\n", float64(s.total.Microseconds())/1000, 100*all/s.total.Seconds(), fmtDur(s.resp50), s.rejected)
	}
}

// phaseRow is one case's phase summary.
type phaseRow struct {
	parts  int
	txn    time.Duration
	client string
	round  int
	s      phaseSummary
}
