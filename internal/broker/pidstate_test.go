package broker

import (
	"fmt"
	"math"
	"testing"
	"time"
)

// checkFunc is producerState.check, swappable for negative controls.
type checkFunc func(s *producerState, epoch int16, first, last int32, window int) (verdict, batchMeta)

func realCheck(s *producerState, epoch int16, first, last int32, window int) (verdict, batchMeta) {
	return s.check(epoch, first, last, window)
}

type seqBatch struct {
	epoch       int16
	first, last int32
}

type dedupCase struct {
	name    string
	window  int
	history []seqBatch // appended in order (each must be accepted)
	probe   seqBatch
	want    verdict
	wantOff int64 // base offset answered for a duplicate: index in history
	// probeWindow, if set, is the window at the probe: an old-mode node
	// checks 5 of the batches a window of 20 retained.
	probeWindow int
}

func s1(epoch int16, seq int32) seqBatch { return seqBatch{epoch, seq, seq} }

// seqs returns n one-record batches of epoch from seq 0.
func seqs(epoch int16, n int) []seqBatch {
	out := make([]seqBatch, n)
	for i := range out {
		out[i] = s1(epoch, int32(i))
	}
	return out
}

var dedupCases = []dedupCase{
	{name: "no state accepts any sequence", window: 5, probe: s1(0, 1234), want: verdictAppend},
	{name: "next sequence appends", window: 5, history: seqs(0, 3), probe: s1(0, 3), want: verdictAppend},
	{name: "gap is out of order", window: 5, history: seqs(0, 3), probe: s1(0, 5), want: verdictOutOfOrder},
	{name: "newest retry is duplicate", window: 5, history: seqs(0, 25), probe: s1(0, 24), want: verdictDuplicate, wantOff: 24},
	{name: "5th newest is duplicate with window 5", window: 5, history: seqs(0, 25), probe: s1(0, 20), want: verdictDuplicate, wantOff: 20},
	{name: "6th newest is out of order with window 5", window: 5, history: seqs(0, 25), probe: s1(0, 19), want: verdictOutOfOrder},
	{name: "20th newest is out of order with window 5", window: 5, history: seqs(0, 25), probe: s1(0, 5), want: verdictOutOfOrder},
	{name: "20th newest is duplicate with window 20", window: 20, history: seqs(0, 25), probe: s1(0, 5), want: verdictDuplicate, wantOff: 5},
	{name: "21st newest is out of order with window 20", window: 20, history: seqs(0, 25), probe: s1(0, 4), want: verdictOutOfOrder},
	{name: "old-mode leader checks only 5 of 20 retained", window: 20, probeWindow: 5, history: seqs(0, 25), probe: s1(0, 19), want: verdictOutOfOrder},
	{name: "old-mode leader still sees 5th newest", window: 20, probeWindow: 5, history: seqs(0, 25), probe: s1(0, 20), want: verdictDuplicate, wantOff: 20},
	{name: "same first, other last is not a duplicate", window: 5, history: []seqBatch{{0, 0, 2}, {0, 3, 5}}, probe: seqBatch{0, 3, 4}, want: verdictOutOfOrder},
	{name: "multi-record duplicate", window: 5, history: []seqBatch{{0, 0, 2}, {0, 3, 5}}, probe: seqBatch{0, 0, 2}, want: verdictDuplicate, wantOff: 0},
	{name: "older epoch is invalid", window: 5, history: []seqBatch{s1(0, 0), s1(1, 0)}, probe: s1(0, 1), want: verdictInvalidEpoch},
	{name: "older epoch retry of retained batch is invalid", window: 5, history: []seqBatch{s1(0, 0), s1(1, 0)}, probe: s1(0, 0), want: verdictInvalidEpoch},
	{name: "new epoch at 0 appends", window: 5, history: seqs(0, 10), probe: s1(1, 0), want: verdictAppend},
	{name: "new epoch not at 0 is out of order", window: 5, history: seqs(0, 10), probe: s1(1, 10), want: verdictOutOfOrder},
	{name: "new epoch forgets old batches", window: 5, history: append(seqs(0, 3), s1(1, 0)), probe: s1(1, 1), want: verdictAppend},
	{name: "sequence wraps to 0", window: 5, history: []seqBatch{s1(0, math.MaxInt32-1), s1(0, math.MaxInt32)}, probe: s1(0, 0), want: verdictAppend},
	{name: "batch spanning the wrap", window: 5, history: []seqBatch{{0, math.MaxInt32 - 1, 0}}, probe: s1(0, 1), want: verdictAppend},
	{name: "after wrap 1 is a gap", window: 5, history: []seqBatch{s1(0, math.MaxInt32)}, probe: s1(0, 1), want: verdictOutOfOrder},
	{name: "duplicate across the wrap", window: 5, history: []seqBatch{{0, math.MaxInt32 - 1, 0}, s1(0, 1)}, probe: seqBatch{0, math.MaxInt32 - 1, 0}, want: verdictDuplicate, wantOff: 0},
}

// runDedupCase replays c.history through check+push and returns what is
// wrong with the probe's answer, "" if nothing.
func runDedupCase(c dedupCase, check checkFunc) string {
	var s *producerState
	now := time.Unix(0, 0)
	for i, h := range c.history {
		v, _ := check(s, h.epoch, h.first, h.last, c.window)
		if v != verdictAppend {
			return fmt.Sprintf("history[%d] %+v: verdict %d, want append", i, h, v)
		}
		if s == nil {
			s = &producerState{epoch: h.epoch}
		}
		s.push(batchMeta{firstSeq: h.first, lastSeq: h.last, baseOffset: int64(i), lastOffset: int64(i), epoch: h.epoch}, c.window, now)
	}
	pw := c.window
	if c.probeWindow != 0 {
		pw = c.probeWindow
	}
	v, m := check(s, c.probe.epoch, c.probe.first, c.probe.last, pw)
	if v != c.want {
		return fmt.Sprintf("verdict %d, want %d", v, c.want)
	}
	if v == verdictDuplicate && m.baseOffset != c.wantOff {
		return fmt.Sprintf("duplicate answers offset %d, want %d", m.baseOffset, c.wantOff)
	}
	return ""
}

func TestProducerStateRules(t *testing.T) {
	for _, c := range dedupCases {
		t.Run(c.name, func(t *testing.T) {
			if msg := runDedupCase(c, realCheck); msg != "" {
				t.Fatal(msg)
			}
		})
	}
}

// TestProducerStateRulesNegativeControl breaks the rules one at a time and
// shows the table catches each broken implementation.
func TestProducerStateRulesNegativeControl(t *testing.T) {
	broken := map[string]checkFunc{
		"window ignored": func(s *producerState, e int16, f, l int32, w int) (verdict, batchMeta) {
			return realCheck(s, e, f, l, 1<<20)
		},
		"no duplicate detection": func(s *producerState, e int16, f, l int32, w int) (verdict, batchMeta) {
			v, m := realCheck(s, e, f, l, w)
			if v == verdictDuplicate {
				v = verdictOutOfOrder
			}
			return v, m
		},
		"gaps accepted": func(s *producerState, e int16, f, l int32, w int) (verdict, batchMeta) {
			v, m := realCheck(s, e, f, l, w)
			if v == verdictOutOfOrder {
				v = verdictAppend
			}
			return v, m
		},
		"epoch ignored": func(s *producerState, e int16, f, l int32, w int) (verdict, batchMeta) {
			if s != nil {
				e = s.epoch
			}
			return realCheck(s, e, f, l, w)
		},
		"no sequence wrap": func(s *producerState, e int16, f, l int32, w int) (verdict, batchMeta) {
			v, m := realCheck(s, e, f, l, w)
			if s != nil && len(s.batches) > 0 && s.batches[len(s.batches)-1].lastSeq == math.MaxInt32 && f == 0 {
				v = verdictOutOfOrder
			}
			return v, m
		},
		"state required (no trap)": func(s *producerState, e int16, f, l int32, w int) (verdict, batchMeta) {
			if s == nil && f != 0 {
				return verdictOutOfOrder, batchMeta{}
			}
			return realCheck(s, e, f, l, w)
		},
	}
	for name, check := range broken {
		caught := 0
		for _, c := range dedupCases {
			if runDedupCase(c, check) != "" {
				caught++
			}
		}
		if caught == 0 {
			t.Errorf("broken implementation %q passes every case", name)
		}
	}
}

func TestProducerStateTrimOnShrink(t *testing.T) {
	s := &producerState{}
	for i := range int32(20) {
		s.push(batchMeta{firstSeq: i, lastSeq: i, baseOffset: int64(i)}, 20, time.Time{})
	}
	s.trim(5)
	if len(s.batches) != 5 || s.batches[0].firstSeq != 15 {
		t.Fatalf("after trim to 5: %d batches, oldest seq %d; want 5 from 15", len(s.batches), s.batches[0].firstSeq)
	}
	if v, _ := s.check(0, 14, 14, 20); v != verdictOutOfOrder {
		t.Fatalf("retry of a trimmed batch: verdict %d, want out of order even with a larger window", v)
	}
}
