package producer

import (
	"fmt"
	"sort"
	"strings"

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
	// lenientStarts counts transactions' first batches the broker took
	// at a sequence other than 0 (broker.TxnStats.LenientStarts).
	lenientStarts int64
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
	l.lenientStarts = c.TxnStats().LenientStarts
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
//     takes, leaving the records before it out of the log there).
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
	if l.lenientStarts > 0 {
		v = append(v, fmt.Sprintf("gap: the broker took %d transaction start(s) at a sequence other than 0", l.lenientStarts))
	}
	return v
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
