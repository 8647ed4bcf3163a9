// Package logcheck is the one checker of "exactly once, in order": it
// compares what a producer reported for each record it sent with what a
// partition's log holds.
//
// A stream is the records one producer sent to one partition, in produce
// order. Each record carries the outcome its callback reported
// ([Outcome]); the log is the stream's records as read back, in offset
// order. Records are identified by value (or key: whatever bytes the
// caller chose), which must be unique within a stream. Callers that share
// a partition between producers split its log into one stream each before
// calling [Stream]; records of other producers are the caller's to drop.
//
// The rules, one [Kind] each:
//   - an [Acked] record is in the log exactly once (else [Lost] or
//     [Duplicate]), at the offset its callback reported if it reported one
//     ([OffsetMismatch]);
//   - a [FateUnknown] record is in the log at most once ([Duplicate]);
//   - a [NotWritten] or [OrderLost] record is not in the log ([Written]);
//   - the log holds the stream's records in produce order ([Reorder]) and
//     nothing the stream did not send ([Stray]).
//
// A partition whose topic was deleted and created again has one log per
// incarnation ([Incarnations]): each is held to the rules on its own, and
// "in the log" means in any of them.
//
// The negative controls of every user's check live in this package's
// tests: each rule is shown failing on a doctored log.
package logcheck

import (
	"fmt"
	"slices"
)

// Outcome is what a producer reported for one record.
type Outcome uint8

const (
	// Acked means the callback reported success: the record must be in
	// the log exactly once, in produce order.
	Acked Outcome = iota
	// FateUnknown means the callback reported a failure whose fate is
	// unknown (longhaul's DeliveryError.FateUnknown), or there was no
	// callback: the record may be absent or present once, in order.
	FateUnknown
	// NotWritten means the callback reported a failure and that the record
	// was never written: it must be absent.
	NotWritten
	// OrderLost means the record failed with longhaul's ErrOrderLost,
	// which promises the record was not written: it must be absent.
	OrderLost
)

// Sent is one record a producer sent, in produce order.
type Sent struct {
	Value   []byte  // the record's identity, unique within its stream
	Outcome Outcome // what the producer reported
	// Offset is the offset an Acked record's callback reported; it is
	// checked against the log when HasOffset is set (the zero Sent
	// reports none).
	Offset    int64
	HasOffset bool
}

// Entry is one record read back from the log, in offset order.
type Entry struct {
	Value  []byte
	Offset int64
}

// Kind names which rule a [Violation] breaks.
type Kind uint8

const (
	// Lost is an Acked record not in the log.
	Lost Kind = iota + 1
	// Duplicate is a record in the log more than once.
	Duplicate
	// Reorder is a record in the log after one produced later.
	Reorder
	// Stray is a log record the stream never sent.
	Stray
	// Written is a NotWritten or OrderLost record found in the log.
	Written
	// OffsetMismatch is an Acked record at another offset than its
	// callback reported.
	OffsetMismatch
	// NotUnique is a value sent twice in one stream: the check cannot
	// tell the two apart.
	NotUnique
)

var kindNames = [...]string{"", "lost", "duplicate", "reordered", "stray", "written", "offset mismatch", "not unique"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", k)
}

// Violation is one broken rule: its kind and a description naming the
// record, its produce position and log offset.
type Violation struct {
	Kind Kind
	Msg  string
}

func (v Violation) String() string { return v.Msg + ": " + v.Kind.String() }

// Result is what a check found.
type Result struct {
	Acked        int // Acked records (each found exactly once unless a violation says otherwise)
	MaybePresent int // FateUnknown records found in the log
	MaybeAbsent  int // FateUnknown records not in the log
	NotWritten   int // NotWritten and OrderLost records
	Violations   []Violation
}

// OK reports whether no rule was broken.
func (r Result) OK() bool { return len(r.Violations) == 0 }

// Count returns how many violations are of kind k.
func (r Result) Count(k Kind) int {
	n := 0
	for _, v := range r.Violations {
		if v.Kind == k {
			n++
		}
	}
	return n
}

// Messages returns the violations as text, in the order found.
func (r Result) Messages() []string {
	out := make([]string, len(r.Violations))
	for i, v := range r.Violations {
		out[i] = v.String()
	}
	return out
}

// Err returns nil when no rule was broken, else an error naming the first
// violation and how many there were.
func (r Result) Err() error {
	switch len(r.Violations) {
	case 0:
		return nil
	case 1:
		return fmt.Errorf("%v", r.Violations[0])
	}
	return fmt.Errorf("%v (and %d more violations)", r.Violations[0], len(r.Violations)-1)
}

// add merges o into r, prefixing o's messages with prefix.
func (r *Result) add(o Result, prefix string) {
	r.Acked += o.Acked
	r.MaybePresent += o.MaybePresent
	r.MaybeAbsent += o.MaybeAbsent
	r.NotWritten += o.NotWritten
	for _, v := range o.Violations {
		v.Msg = prefix + v.Msg
		r.Violations = append(r.Violations, v)
	}
}

// Stream checks one stream: sent in produce order against log in offset
// order. It reports every violation, not only the first.
func Stream(sent []Sent, log []Entry) Result {
	return Incarnations(sent, [][]Entry{log})
}

// Incarnations checks one stream against the logs of every incarnation
// of its partition, oldest first: the topic was deleted and created again
// while the stream was produced. Each log is checked on its own for
// duplicates, order and strays; a record counts as in the log when it is
// in any of them, since an Acked record is gone with a deleted
// incarnation and a record written to the old one without an ack may be
// written again to the new one. Messages about a log other than the last
// name it ("in deleted incarnation N").
func Incarnations(sent []Sent, logs [][]Entry) Result {
	var r Result
	bad := func(k Kind, format string, args ...any) {
		r.Violations = append(r.Violations, Violation{Kind: k, Msg: fmt.Sprintf(format, args...)})
	}
	pos := make(map[string]int, len(sent))
	for i, s := range sent {
		if _, dup := pos[string(s.Value)]; dup {
			bad(NotUnique, "value %q produced twice (#%d): values must be unique", s.Value, i)
			continue
		}
		pos[string(s.Value)] = i
	}
	anywhere := make([]bool, len(sent)) // found in some incarnation
	// An acked record's callback offset is that of the incarnation it was
	// acked in, which need not be the first holding it (written unacked
	// to a deleted topic, then again to its new incarnation): it must
	// match in some incarnation. lastAt is where it was last found.
	offsetOK := make([]bool, len(sent))
	lastAt := make([]string, len(sent))
	found := make([]int, len(sent)) // times found in the current one
	total := 0                      // records in all logs
	for inc, log := range logs {
		where := ""
		if inc < len(logs)-1 {
			where = fmt.Sprintf(" in deleted incarnation %d", inc)
		}
		clear(found)
		total += len(log)
		latest := -1 // produce position of the latest record found so far
		for _, e := range log {
			j, ok := pos[string(e.Value)]
			if !ok {
				bad(Stray, "offset %d%s holds %q, never produced", e.Offset, where, e.Value)
				continue
			}
			s := sent[j]
			if found[j]++; found[j] > 1 {
				bad(Duplicate, "%q (produced #%d) again at offset %d%s", e.Value, j, e.Offset, where)
				continue
			}
			if j < latest {
				bad(Reorder, "%q (produced #%d) at offset %d%s after %q (produced #%d)", e.Value, j, e.Offset, where, sent[latest].Value, latest)
			}
			latest = max(latest, j)
			if s.Outcome == Acked && s.HasOffset {
				offsetOK[j] = offsetOK[j] || s.Offset == e.Offset
				lastAt[j] = fmt.Sprintf("%d%s", e.Offset, where)
			}
			if anywhere[j] {
				continue // judged where first found
			}
			anywhere[j] = true
			switch s.Outcome {
			case NotWritten:
				bad(Written, "%q (produced #%d) at offset %d%s was reported as not written", e.Value, j, e.Offset, where)
			case OrderLost:
				bad(Written, "%q (produced #%d) at offset %d%s failed with ErrOrderLost", e.Value, j, e.Offset, where)
			}
		}
	}
	for j, s := range sent {
		if s.Outcome == Acked && s.HasOffset && anywhere[j] && !offsetOK[j] {
			bad(OffsetMismatch, "%q (produced #%d): callback said offset %d, log has %s", s.Value, j, s.Offset, lastAt[j])
		}
		switch {
		case s.Outcome == Acked:
			r.Acked++
			if !anywhere[j] {
				bad(Lost, "acknowledged %q (produced #%d) missing (log holds %d records)", s.Value, j, total)
			}
		case s.Outcome == NotWritten || s.Outcome == OrderLost:
			r.NotWritten++
		case anywhere[j]:
			r.MaybePresent++
		default:
			r.MaybeAbsent++
		}
	}
	return r
}

// Partitions checks one stream per partition, in partition order; a
// partition with log entries and nothing sent is checked too (its entries
// are strays). Messages start with "partition N: ".
func Partitions(sent map[int32][]Sent, logs map[int32][]Entry) Result {
	parts := make([]int32, 0, len(sent)+len(logs))
	for p := range sent {
		parts = append(parts, p)
	}
	for p := range logs {
		if _, ok := sent[p]; !ok {
			parts = append(parts, p)
		}
	}
	slices.Sort(parts)
	var r Result
	for _, p := range parts {
		r.add(Stream(sent[p], logs[p]), fmt.Sprintf("partition %d: ", p))
	}
	return r
}

// AllAcked returns sent records for values, all Acked with no offset
// reported: the stream of a producer whose every record succeeded.
func AllAcked(values ...[]byte) []Sent {
	out := make([]Sent, len(values))
	for i, v := range values {
		out[i] = Sent{Value: v, Outcome: Acked}
	}
	return out
}
