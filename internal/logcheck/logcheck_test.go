package logcheck

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// spec builds a stream from a compact description: each element is a
// value, "v" Acked, "v?" FateUnknown, "v!" NotWritten, "v~" OrderLost,
// "v@N" Acked with offset N reported.
func spec(elems ...string) []Sent {
	out := make([]Sent, len(elems))
	for i, s := range elems {
		out[i] = Sent{Outcome: Acked}
		switch {
		case strings.HasSuffix(s, "?"):
			s, out[i].Outcome = s[:len(s)-1], FateUnknown
		case strings.HasSuffix(s, "!"):
			s, out[i].Outcome = s[:len(s)-1], NotWritten
		case strings.HasSuffix(s, "~"):
			s, out[i].Outcome = s[:len(s)-1], OrderLost
		case strings.Contains(s, "@"):
			at := strings.LastIndexByte(s, '@')
			_, err := fmt.Sscan(s[at+1:], &out[i].Offset)
			if err != nil {
				panic(err)
			}
			s, out[i].HasOffset = s[:at], true
		}
		out[i].Value = []byte(s)
	}
	return out
}

// logOf builds a log of values at offsets 0, 1, ....
func logOf(values ...string) []Entry {
	out := make([]Entry, len(values))
	for i, v := range values {
		out[i] = Entry{Value: []byte(v), Offset: int64(i)}
	}
	return out
}

// TestStream is the negative control of every exactly-once-in-order check
// in the repository (producer tests and their chaos test, the broker's kgo
// test, kafkatest, soak, highbdp): each legal log passes with the right counts, and each
// doctored one is reported with the rule it breaks.
func TestStream(t *testing.T) {
	for _, tc := range []struct {
		name string
		sent []Sent
		log  []string
		want Kind   // 0: must pass
		rep  Result // counts when it passes
	}{
		{name: "exact", sent: spec("a", "b", "c"), log: []string{"a", "b", "c"}, rep: Result{Acked: 3}},
		{name: "empty", sent: nil, log: nil},
		{name: "maybe present", sent: spec("a", "b?", "c"), log: []string{"a", "b", "c"}, rep: Result{Acked: 2, MaybePresent: 1}},
		{name: "maybe absent", sent: spec("a", "b?", "c?"), log: []string{"a"}, rep: Result{Acked: 1, MaybeAbsent: 2}},
		{name: "not written absent", sent: spec("a", "b!", "c"), log: []string{"a", "c"}, rep: Result{Acked: 2, NotWritten: 1}},
		{name: "order lost absent", sent: spec("a", "b~", "c~"), log: []string{"a"}, rep: Result{Acked: 1, NotWritten: 2}},
		{name: "offsets as reported", sent: spec("a@0", "b@1"), log: []string{"a", "b"}, rep: Result{Acked: 2}},
		{name: "duplicate", sent: spec("a", "b", "c"), log: []string{"a", "b", "b", "c"}, want: Duplicate},
		{name: "maybe duplicated", sent: spec("a", "b?"), log: []string{"a", "b", "b"}, want: Duplicate},
		{name: "retry appended later", sent: spec("a", "b", "c"), log: []string{"a", "b", "c", "a"}, want: Duplicate},
		{name: "lost middle", sent: spec("a", "b", "c"), log: []string{"a", "c"}, want: Lost},
		{name: "lost tail", sent: spec("a", "b", "c"), log: []string{"a", "b"}, want: Lost},
		{name: "lost all", sent: spec("a"), log: nil, want: Lost},
		{name: "reordered", sent: spec("a", "b", "c"), log: []string{"a", "c", "b"}, want: Reorder},
		{name: "maybe reordered", sent: spec("a", "b?", "c"), log: []string{"a", "c", "b"}, want: Reorder},
		{name: "not written present", sent: spec("a", "b!"), log: []string{"a", "b"}, want: Written},
		{name: "order lost present", sent: spec("a", "b~"), log: []string{"a", "b"}, want: Written},
		{name: "stray", sent: spec("a"), log: []string{"a", "z"}, want: Stray},
		{name: "offset mismatch", sent: spec("a@0", "b@2"), log: []string{"a", "b"}, want: OffsetMismatch},
		{name: "non-unique values", sent: spec("a", "a"), log: []string{"a"}, want: NotUnique},
	} {
		t.Run(tc.name, func(t *testing.T) {
			requireVerdict(t, Stream(tc.sent, logOf(tc.log...)), tc.want, tc.rep)
		})
	}
}

// requireVerdict requires r to pass with counts rep when want is 0, else
// to report a violation of kind want; it returns whether r failed.
func requireVerdict(t *testing.T, r Result, want Kind, rep Result) bool {
	t.Helper()
	if want == 0 {
		require.NoError(t, r.Err())
		assert.Equal(t, rep, r)
		return false
	}
	require.Error(t, r.Err())
	assert.Positive(t, r.Count(want), "violations: %v", r.Messages())
	assert.Contains(t, r.Err().Error(), want.String())
	return true
}

// TestPartitions shows each partition is checked on its own, a partition
// nothing was sent to holds only strays, and a partition missing from the
// logs loses its acked records.
func TestPartitions(t *testing.T) {
	sent := map[int32][]Sent{0: spec("0", "2", "4"), 1: spec("1", "3")}
	ok := Partitions(sent, map[int32][]Entry{0: logOf("0", "2", "4"), 1: logOf("1", "3")})
	require.NoError(t, ok.Err())
	assert.Equal(t, 5, ok.Acked)

	r := Partitions(sent, map[int32][]Entry{0: logOf("0", "2", "4"), 1: logOf("1", "3"), 2: logOf("x")})
	require.Equal(t, 1, r.Count(Stray), r.Messages())
	assert.Contains(t, r.Err().Error(), "partition 2: ")

	r = Partitions(sent, map[int32][]Entry{0: logOf("0", "2", "4")})
	require.Equal(t, 2, r.Count(Lost), r.Messages())
	assert.Contains(t, r.Err().Error(), "partition 1: ")

	// The same value in two partitions is two records, not a duplicate.
	r = Partitions(map[int32][]Sent{0: spec("a"), 1: spec("a")}, map[int32][]Entry{0: logOf("a"), 1: logOf("a")})
	require.NoError(t, r.Err())
}

// TestIncarnations is the negative control of the chaos test's check of
// a topic deleted and created again: each incarnation's log is held to
// the rules on its own, and a record counts as written when it is in any
// of them. Each legal pair of logs passes; each doctored one is reported
// with the rule it breaks, and a message about the old log names it.
func TestIncarnations(t *testing.T) {
	for _, tc := range []struct {
		name     string
		sent     []Sent
		old, cur []string
		want     Kind   // 0: must pass
		rep      Result // counts when it passes
		where    string // in the message when it fails
	}{
		{name: "acked gone with the old topic", sent: spec("a", "b", "c"), old: []string{"a", "b"}, cur: []string{"c"}, rep: Result{Acked: 3}},
		{name: "written again to the new topic", sent: spec("a", "b?", "c"), old: []string{"a", "b"}, cur: []string{"b", "c"}, rep: Result{Acked: 2, MaybePresent: 1}},
		{name: "order starts over", sent: spec("a", "b", "c"), old: []string{"b", "c"}, cur: []string{"a"}, rep: Result{Acked: 3}},
		{name: "nothing before the deletion", sent: spec("a"), old: nil, cur: []string{"a"}, rep: Result{Acked: 1}},
		{name: "duplicate in the old log", sent: spec("a", "b"), old: []string{"a", "a"}, cur: []string{"b"}, want: Duplicate, where: "deleted incarnation 0"},
		{name: "duplicate in the new log", sent: spec("a", "b?"), old: []string{"a", "b"}, cur: []string{"b", "b"}, want: Duplicate},
		{name: "reordered in the old log", sent: spec("a", "b"), old: []string{"b", "a"}, cur: nil, want: Reorder, where: "deleted incarnation 0"},
		{name: "lost in both", sent: spec("a", "b"), old: []string{"a"}, cur: nil, want: Lost},
		{name: "not written, in the old log", sent: spec("a", "b!"), old: []string{"a", "b"}, cur: nil, want: Written, where: "deleted incarnation 0"},
		{name: "order lost, in the new log", sent: spec("a", "b~"), old: []string{"a"}, cur: []string{"b"}, want: Written},
		{name: "stray in the old log", sent: spec("a"), old: []string{"z"}, cur: []string{"a"}, want: Stray, where: "deleted incarnation 0"},
		// b was written unacked to the old topic, then acked at offset 0
		// of the new one: its offset is judged where it matches.
		{name: "acked offset in the new log", sent: spec("a", "b@0"), old: []string{"a", "b"}, cur: []string{"b"}, rep: Result{Acked: 2}},
		{name: "acked offset in neither log", sent: spec("a", "b@5"), old: []string{"a", "b"}, cur: []string{"b"}, want: OffsetMismatch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Incarnations(tc.sent, [][]Entry{logOf(tc.old...), logOf(tc.cur...)})
			if !requireVerdict(t, r, tc.want, tc.rep) {
				return
			}
			if tc.where != "" {
				assert.Contains(t, r.Err().Error(), tc.where)
			} else {
				assert.NotContains(t, r.Err().Error(), "incarnation")
			}
		})
	}
	// One log is Stream.
	assert.Equal(t, Stream(spec("a", "b"), logOf("b", "a")), Incarnations(spec("a", "b"), [][]Entry{logOf("b", "a")}))
}

// TestResultErr shows Err names the first violation and counts the rest.
func TestResultErr(t *testing.T) {
	r := Stream(spec("a", "b", "c"), logOf("c", "b"))
	require.Equal(t, 2, len(r.Violations), r.Messages())
	assert.Equal(t, 1, r.Count(Reorder))
	assert.Equal(t, 1, r.Count(Lost))
	assert.Contains(t, r.Err().Error(), "reordered (and 1 more violations)")
	assert.True(t, Stream(spec("a"), logOf("a")).OK())
	assert.False(t, r.OK())
	assert.Equal(t, []Sent{{Value: []byte("a"), Outcome: Acked}}, AllAcked([]byte("a")))
}

// TestRandomized draws random streams and legal logs for them (every Acked
// record, a random subset of the FateUnknown ones, in produce order) and
// shows each passes, then breaks each log with one random fault in
// combination with the legal randomness and shows the fault's rule is
// reported.
func TestRandomized(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	outcomes := []Outcome{Acked, Acked, Acked, FateUnknown, NotWritten, OrderLost}
	for iter := range 2000 {
		n := 1 + rng.IntN(30)
		sent := make([]Sent, n)
		var log []Entry
		for i := range sent {
			sent[i] = Sent{Value: fmt.Appendf(nil, "v%d", i), Outcome: outcomes[rng.IntN(len(outcomes))]}
			if sent[i].Outcome == Acked || sent[i].Outcome == FateUnknown && rng.IntN(2) == 0 {
				if sent[i].Outcome == Acked && rng.IntN(2) == 0 {
					sent[i].Offset, sent[i].HasOffset = int64(len(log)), true
				}
				log = append(log, Entry{Value: sent[i].Value, Offset: int64(len(log))})
			}
		}
		r := Stream(sent, log)
		require.NoError(t, r.Err(), "iteration %d", iter)
		require.Equal(t, n, r.Acked+r.MaybePresent+r.MaybeAbsent+r.NotWritten)

		bad := append([]Entry(nil), log...)
		var want Kind
		switch fault := rng.IntN(5); {
		case fault == 0 && len(bad) > 0: // duplicate a random entry later
			i := rng.IntN(len(bad))
			bad = append(bad, bad[i])
			want = Duplicate
		case fault == 1 && len(bad) > 1 && !equalEntries(bad[0], bad[1]): // swap two neighbours
			i := rng.IntN(len(bad) - 1)
			bad[i], bad[i+1] = bad[i+1], bad[i]
			want = Reorder
		case fault == 2: // a record never produced
			bad = append(bad, Entry{Value: []byte("stray"), Offset: int64(len(bad))})
			want = Stray
		case fault == 3: // a failed-not-written record appears
			for i, s := range sent {
				if s.Outcome == NotWritten || s.Outcome == OrderLost {
					bad = append(bad, Entry{Value: sent[i].Value, Offset: int64(len(bad))})
					want = Written
					break
				}
			}
		default: // drop an acked record
			for i, e := range bad {
				if sent[indexOf(sent, e.Value)].Outcome == Acked {
					bad = append(bad[:i:i], bad[i+1:]...)
					want = Lost
					break
				}
			}
		}
		if want == 0 {
			continue
		}
		r = Stream(sent, bad)
		require.Positive(t, r.Count(want), "iteration %d: fault %v not reported: %v", iter, want, r.Messages())
	}
}

func equalEntries(a, b Entry) bool { return string(a.Value) == string(b.Value) }

func indexOf(sent []Sent, v []byte) int {
	for i, s := range sent {
		if string(s.Value) == string(v) {
			return i
		}
	}
	return -1
}
