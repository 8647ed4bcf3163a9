package producer

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/longhaul-kafka/longhaul/internal/broker"
)

// The checker of the randomized transactional test (chaos_txn_test.go):
// what the application saw of each transaction (ctTxn), what a
// read_committed reader and the group's committed offsets show (ctLog),
// and checkTxns, which judges one against the other.

// ctEnd is how a transaction ended, as its application saw it.
type ctEnd uint8

const (
	// ctOpen: never committed nor aborted (its producer was fenced or
	// failed first, or closed).
	ctOpen ctEnd = iota
	// ctCommitted: CommitTransaction returned nil.
	ctCommitted
	// ctAborted: AbortTransaction returned nil.
	ctAborted
	// ctFailed: the commit or abort returned an error other than
	// ErrCommitUnknown: the transaction did not commit.
	ctFailed
	// ctUnknown: the commit returned ErrCommitUnknown (or its context
	// ended): committed or not, but wholly one or the other.
	ctUnknown
)

var ctEndNames = [...]string{"open", "committed", "aborted", "failed", "unknown"}

func (e ctEnd) String() string { return ctEndNames[e] }

// ctRecord is what the callbacks said about one record.
type ctRecord struct {
	calls int
	err   error
	done  time.Time // the (last) callback's time
}

// ctOffset is one offset a transaction sent for its group: the input
// topic's partition and the offset.
type ctOffset struct {
	part   int32
	offset int64
	// sent: SendOffsetsToTransaction returned nil.
	sent bool
}

// ctTxn is one transaction as its application saw it.
type ctTxn struct {
	// name is the producer's name and the transaction's number
	// ("a0.3"): what its records' values carry.
	name string
	// records are, by partition, the records Produce took, in produce
	// order: the one at index i carries sequence i.
	records map[int32][]*ctRecord
	offsets []ctOffset
	end     ctEnd
	err     error // the commit's or abort's error
}

func newCTTxn(name string) *ctTxn { return &ctTxn{name: name, records: map[int32][]*ctRecord{}} }

// ctLogEntry is one of the transactions' records read from a partition.
type ctLogEntry struct {
	txn    string
	seq    int
	offset int64
}

// ctLog is what the cluster shows at the end of a schedule, with every
// transaction ended.
type ctLog struct {
	// records are, by partition, what a read_committed consumer reads of
	// ours, in offset order.
	records map[int32][]ctLogEntry
	// offsets are the group's committed offsets, by input partition.
	offsets map[int32]int64
	// open lists the partitions whose last stable offset is below their
	// end: a transaction left open (hanging).
	open []string
	// gaps are the transactions' first batches on a partition the broker
	// took at a sequence other than 0 (broker.Cluster.LenientStarts).
	gaps []ctGap
}

// ctGap is a transaction's first batch on a partition taken at a
// sequence other than 0: txn's record seq of part, at the broker's time.
type ctGap struct {
	txn  string
	part int32
	seq  int
	at   time.Time
}

// Names of the checked transactions' output and input.
const (
	ctTopic = "out"
	ctInput = "in"
	ctGroup = "g"
)

// collectCTLog reads a cluster as checkTxns needs it: each partition of
// ctTopic with read_committed, the group's committed offsets of the
// input partitions the transactions named, the partitions whose last
// stable offset lags, and the lenient starts.
func collectCTLog(c *broker.Cluster, partitions int32, txns []*ctTxn) ctLog {
	l := ctLog{records: map[int32][]ctLogEntry{}, offsets: map[int32]int64{}}
	for part := range partitions {
		for _, rec := range c.CommittedRecords(ctTopic, part) {
			name, vp, seq, ok := parseValue(rec.Value)
			if !ok || vp != part {
				name, seq = fmt.Sprintf("?%x", rec.Value[:min(8, len(rec.Value))]), -1
			}
			l.records[part] = append(l.records[part], ctLogEntry{txn: name, seq: seq, offset: rec.Offset})
		}
		if lso, end := c.LastStableOffset(ctTopic, part), c.LogEndOffset(ctTopic, part); lso != end {
			l.open = append(l.open, fmt.Sprintf("partition %d: last stable offset %d, end %d", part, lso, end))
		}
	}
	for _, x := range txns {
		for _, o := range x.offsets {
			if off, ok := c.CommittedOffset(ctGroup, ctInput, o.part); ok {
				l.offsets[o.part] = off
			}
		}
	}
	for _, ls := range c.LenientStarts() {
		g := ctGap{txn: "?", part: ls.Partition, seq: -1, at: ls.At}
		for _, rec := range c.Records(ctTopic, ls.Partition) {
			if rec.ProducerID == ls.ProducerID && rec.ProducerEpoch == ls.ProducerEpoch && rec.Sequence == ls.Sequence {
				if name, _, seq, ok := parseValue(rec.Value); ok {
					g.txn, g.seq = name, seq
				}
				break
			}
		}
		l.gaps = append(l.gaps, g)
	}
	return l
}

// checkTxns checks the transactional promise on one schedule's outcome
// and returns every violation (none: it held). Each starts with its
// kind:
//   - "callbacks": every record got exactly one callback;
//   - "committed": a transaction reported committed is in the log
//     completely, each record once, in produce order on each partition,
//     and its offsets are the group's;
//   - "commit after failure": no transaction is reported committed while
//     any of its records failed;
//   - "aborted": an aborted, failed or open transaction has no record in
//     the log and none of its offsets is the group's;
//   - "unknown": a transaction of unknown outcome is wholly in (as a
//     committed one) or wholly out;
//   - "phantom": every record read belongs to a transaction and is one
//     Produce took;
//   - "hanging": no partition's last stable offset is held below its end
//     by a transaction left open;
//   - "gap": the broker never took a transaction's first batch on a
//     partition at a sequence other than 0 (what only a Kafka 4.0 broker
//     takes, leaving the records before it out of the log there) while
//     the transaction was sound: unless one of its records had failed
//     (called back with an error) by then, when it can only abort.
func checkTxns(txns []*ctTxn, l ctLog) []string {
	var v []string
	byName := map[string]*ctTxn{}
	for _, x := range txns {
		byName[x.name] = x
	}
	// Where each transaction's records are: partition -> seq -> offsets.
	found := map[string]map[int32]map[int][]int64{}
	for _, part := range sortedParts(l.records) {
		for _, e := range l.records[part] {
			x := byName[e.txn]
			if x == nil || e.seq < 0 || e.seq >= len(x.records[part]) {
				v = append(v, fmt.Sprintf("phantom: partition %d offset %d: %s/%d was never produced", part, e.offset, e.txn, e.seq))
				continue
			}
			if found[e.txn] == nil {
				found[e.txn] = map[int32]map[int][]int64{}
			}
			if found[e.txn][part] == nil {
				found[e.txn][part] = map[int][]int64{}
			}
			found[e.txn][part][e.seq] = append(found[e.txn][part][e.seq], e.offset)
		}
	}
	for _, x := range txns {
		for _, part := range sortedParts(x.records) {
			for i, r := range x.records[part] {
				if r.calls != 1 {
					v = append(v, fmt.Sprintf("callbacks: %s record %d/%d called back %d times", x.name, part, i, r.calls))
				}
			}
		}
		in := len(found[x.name]) > 0
		for _, o := range x.offsets {
			if got, ok := l.offsets[o.part]; ok && got == o.offset {
				in = true
			}
		}
		switch x.end {
		case ctCommitted:
			v = append(v, checkCommitted(x, found[x.name], l.offsets, "committed")...)
			for _, part := range sortedParts(x.records) {
				for i, r := range x.records[part] {
					if r.err != nil {
						v = append(v, fmt.Sprintf("commit after failure: %s reported committed, its record %d/%d failed: %v", x.name, part, i, r.err))
					}
				}
			}
		case ctUnknown:
			if in {
				v = append(v, checkCommitted(x, found[x.name], l.offsets, "unknown")...)
			}
		default:
			if in {
				v = append(v, fmt.Sprintf("aborted: %s (%v: %v) is visible: %s", x.name, x.end, x.err, describeFound(found[x.name], x.offsets, l.offsets)))
			}
		}
	}
	for _, o := range l.open {
		v = append(v, "hanging: "+o)
	}
	for _, g := range l.gaps {
		if x := byName[g.txn]; x == nil || !failedBy(x, g.at) {
			v = append(v, fmt.Sprintf("gap: partition %d: the broker took %s's record %d as its first, while none of its records had failed", g.part, g.txn, g.seq))
		}
	}
	return v
}

// failedBy reports whether a record of x was called back with an error
// at or before t.
func failedBy(x *ctTxn, t time.Time) bool {
	for _, recs := range x.records {
		for _, r := range recs {
			if r.err != nil && !r.done.IsZero() && !r.done.After(t) {
				return true
			}
		}
	}
	return false
}

// checkCommitted checks that x, whose outcome is kind, is wholly in the
// log: every record once, in order, and its sent offsets the group's.
func checkCommitted(x *ctTxn, found map[int32]map[int][]int64, offsets map[int32]int64, kind string) []string {
	var v []string
	for _, part := range sortedParts(x.records) {
		recs := x.records[part]
		last := int64(-1)
		for i := range recs {
			offs := found[part][i]
			switch {
			case len(offs) == 0:
				v = append(v, fmt.Sprintf("%s: %s record %d/%d is not in the log", kind, x.name, part, i))
			case len(offs) > 1:
				v = append(v, fmt.Sprintf("%s: %s record %d/%d is in the log %d times, at %v", kind, x.name, part, i, len(offs), offs))
			case offs[0] < last:
				v = append(v, fmt.Sprintf("%s: %s record %d/%d at offset %d, before the record produced ahead of it (%d)", kind, x.name, part, i, offs[0], last))
			}
			if len(offs) > 0 {
				last = max(last, offs[0])
			}
		}
	}
	for _, o := range x.offsets {
		if !o.sent {
			continue
		}
		if got, ok := offsets[o.part]; !ok || got != o.offset {
			v = append(v, fmt.Sprintf("%s: %s sent offset %d of %s/%d, the group has %s", kind, x.name, o.offset, ctInput, o.part, offsetString(got, ok)))
		}
	}
	return v
}

func offsetString(off int64, ok bool) string {
	if !ok {
		return "none"
	}
	return fmt.Sprint(off)
}

// describeFound says what of a transaction is visible.
func describeFound(found map[int32]map[int][]int64, sent []ctOffset, offsets map[int32]int64) string {
	var parts []string
	for part, seqs := range found {
		parts = append(parts, fmt.Sprintf("%d record(s) in partition %d", len(seqs), part))
	}
	for _, o := range sent {
		if got, ok := offsets[o.part]; ok && got == o.offset {
			parts = append(parts, fmt.Sprintf("offset %d of %s/%d committed", o.offset, ctInput, o.part))
		}
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

// sortedParts returns m's partitions in order.
func sortedParts[V any](m map[int32]V) []int32 {
	parts := make([]int32, 0, len(m))
	for part := range m {
		parts = append(parts, part)
	}
	sort.Slice(parts, func(i, j int) bool { return parts[i] < parts[j] })
	return parts
}

// ctLedger keeps one schedule's transactions as their producers run them.
type ctLedger struct {
	mu   sync.Mutex
	txns []*ctTxn
	// input numbers the input partitions whose offsets the transactions
	// send, one each, so every transaction's offset is its own.
	input int32
	wg    sync.WaitGroup // one per record until its callback
	// failed, if set, learns that a record of x produced by p failed
	// (outside the ledger's lock).
	failed func(p *Producer, x *ctTxn)
}

// begin adds a transaction named name.
func (l *ctLedger) begin(name string) *ctTxn {
	l.mu.Lock()
	defer l.mu.Unlock()
	x := newCTTxn(name)
	l.txns = append(l.txns, x)
	return x
}

// produce sends n records of x to part.
func (l *ctLedger) produce(p *Producer, x *ctTxn, part int32, n int) {
	for range n {
		l.mu.Lock()
		seq := len(x.records[part])
		rr := &ctRecord{}
		x.records[part] = append(x.records[part], rr)
		l.mu.Unlock()
		r := &Record{Topic: ctTopic, Value: value(x.name, part, seq, chaosRecordSize)}
		r.SetPartition(part)
		l.wg.Add(1)
		p.Produce(context.Background(), r, func(_ *Record, err error) {
			l.mu.Lock()
			rr.calls++
			rr.err = err
			rr.done = time.Now()
			calls := rr.calls
			failed := l.failed
			l.mu.Unlock()
			if err != nil && failed != nil {
				failed(p, x)
			}
			if calls == 1 {
				l.wg.Done()
			}
		})
	}
}

// offset adds to x an offset of an input partition of its own, noted
// unsent, and returns it with its index in x.offsets.
func (l *ctLedger) offset(x *ctTxn) (ctOffset, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.input++
	o := ctOffset{part: l.input, offset: 1000 + int64(l.input)}
	x.offsets = append(x.offsets, o)
	return o, len(x.offsets) - 1
}

// set runs f under the ledger's lock.
func (l *ctLedger) set(f func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	f()
}

// snapshot copies the transactions (records' results included) for the
// checker.
func (l *ctLedger) snapshot() []*ctTxn {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]*ctTxn, len(l.txns))
	for i, x := range l.txns {
		y := *x
		y.records = map[int32][]*ctRecord{}
		for part, recs := range x.records {
			for _, r := range recs {
				rr := *r
				y.records[part] = append(y.records[part], &rr)
			}
		}
		y.offsets = append([]ctOffset(nil), x.offsets...)
		out[i] = &y
	}
	return out
}

// waitAll waits (on the bubble's clock) up to d for every callback.
func (l *ctLedger) waitAll(d time.Duration) bool {
	done := make(chan struct{})
	go func() { l.wg.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}
