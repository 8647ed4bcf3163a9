package producer

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/longhaul-kafka/longhaul/internal/broker"
	"github.com/longhaul-kafka/longhaul/protocol"
)

// The randomized mixed-fault test in read-back mode: the producers run
// with longhaul.readback.enable, every record's outcome is checked as
// always (checkOutcome: ErrNotWritten is "not written", so such a record
// must be absent from every log at the end, after the quiet tail), and
// every batch read-back found is checked against the log: a batch with
// its producer id, epoch and sequences starts at each offset reported.
// Fetch answers are served as a lagging replica would every other time
// (the data cut short, the high watermark with it), so a read that took
// the end of the data for absence would be caught.

// chaosReadbackTimeout is longhaul.readback.timeout.ms in read-back mode.
const chaosReadbackTimeout = 2 * time.Second

// chaosReadback is one schedule's read-back mode: the outcomes reported
// by HookReadback, for every producer of the schedule.
type chaosReadback struct {
	mu      sync.Mutex
	infos   []ReadbackInfo
	fetches atomic.Int64
	// prefill is how many records another producer writes to each
	// partition before the schedule's producers start, and logStart
	// where the log start is then moved (DeleteRecords), per partition:
	// the producers' first batches go to logs whose start is above 0.
	prefill  int
	logStart []int64
}

// drawLogStart draws read-back mode's log-start vocabulary into s, from
// a stream of its own (the rest of the schedule stays what the seed
// draws): the prefill and first log starts, and up to two moves of a
// partition's log start while the schedule runs, to a drawn distance
// below its end.
func (r *chaosReadback) drawLogStart(s *chaosSchedule) {
	rng := rand.New(rand.NewPCG(s.seed, 0x1095))
	r.prefill = 1 + rng.IntN(8)
	for range chaosParts {
		r.logStart = append(r.logStart, 1+rng.Int64N(int64(r.prefill)))
	}
	for range rng.IntN(3) {
		at, p, back := time.Duration(rng.Int64N(int64(chaosSpan))), rng.Int32N(chaosParts), rng.Int64N(30)
		s.steps = append(s.steps, chaosStep{at: at, what: fmt.Sprintf("partition %d: log start to %d below its end", p, back), do: func(c *broker.Cluster, _ *chaosRun) {
			recs := c.Records(chaosTopic, p)
			if len(recs) > 0 {
				c.DeleteRecords(chaosTopic, p, recs[len(recs)-1].Offset+1-back)
			}
		}})
	}
	sort.SliceStable(s.steps, func(i, j int) bool { return s.steps[i].at < s.steps[j].at })
}

// fill writes r.prefill records to every partition with a producer of its
// own (opts: the schedule's login), before the schedule's producers start,
// and moves each partition's log start to r.logStart. Its records are in
// no ledger: the checks skip them.
func (r *chaosReadback) fill(t *testing.T, c *broker.Cluster, opts ...Opt) {
	if r == nil {
		return
	}
	w, err := New(append(opts, Linger(0), RequestTimeout(chaosReqTimeout))...)
	require.NoError(t, err)
	for p := range int32(chaosParts) {
		for i := range r.prefill {
			rec := &Record{Topic: chaosTopic, Value: fmt.Appendf(nil, "fill-%d", i)}
			rec.SetPartition(p)
			require.NoError(t, w.ProduceSync(t.Context(), rec).FirstErr())
		}
	}
	require.NoError(t, w.Close(t.Context()))
	for p := range int32(chaosParts) {
		c.DeleteRecords(chaosTopic, p, r.logStart[p])
	}
}

// OnReadback implements HookReadback.
func (r *chaosReadback) OnReadback(i ReadbackInfo) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.infos = append(r.infos, i)
}

// opts are the options of every producer of the schedule (none when off).
func (r *chaosReadback) opts() []Opt {
	if r == nil {
		return nil
	}
	return []Opt{ReadBack(true), ReadBackTimeout(chaosReadbackTimeout), Hooks(r)}
}

// wait is how much longer a callback may take: a batch of unknown fate,
// and the partition's callbacks behind it, wait for read-back.
func (r *chaosReadback) wait() time.Duration {
	if r == nil {
		return 0
	}
	return chaosReadbackTimeout
}

// lag makes every other Fetch answer of c look like a lagging replica's:
// the batches from the middle of the answer on are left out and the high
// watermark is put where they started.
func (r *chaosReadback) lag(c *broker.Cluster) {
	if r == nil {
		return
	}
	c.RewriteFetch(func(_ int32, resp *kmsg.FetchResponse) {
		if r.fetches.Add(1)%2 == 0 {
			return
		}
		for ti := range resp.Topics {
			for pi := range resp.Topics[ti].Partitions {
				p := &resp.Topics[ti].Partitions[pi]
				hs, _, err := protocol.BatchHeaders(p.RecordBatches)
				if err != nil || len(hs) == 0 {
					continue
				}
				keep := len(hs) / 2
				n := 0
				for _, h := range hs[:keep] {
					n += h.TotalLen()
				}
				p.RecordBatches = p.RecordBatches[:n]
				p.HighWatermark = hs[keep].BaseOffset
				p.LastStableOffset = min(p.LastStableOffset, p.HighWatermark)
			}
		}
	})
}

// check returns a violation for every batch reported written (once or
// twice) that is not in the log at the offsets reported, in the topic's
// current incarnation or a deleted one.
func (r *chaosReadback) check(c *broker.Cluster, deleted [][][]broker.LogRecord) []string {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var v []string
	for _, info := range r.infos {
		if info.Outcome != ReadbackWritten && info.Outcome != ReadbackWrittenTwice {
			continue
		}
		logs := [][]broker.LogRecord{c.Records(info.Topic, info.Partition)}
		for _, d := range deleted {
			if int(info.Partition) < len(d) {
				logs = append(logs, d[info.Partition])
			}
		}
		for _, x := range info.Offsets {
			if !batchAt(logs, info, x) {
				v = append(v, fmt.Sprintf("readback: %s[%d] pid %d epoch %d seq %d (%d records) reported %s at offset %d, which holds no such batch",
					info.Topic, info.Partition, info.ProducerID, info.ProducerEpoch, info.BaseSequence, info.Records, info.Outcome, x))
			}
		}
	}
	return v
}

// batchAt reports whether one of logs holds info's batch at offset x.
func batchAt(logs [][]broker.LogRecord, info ReadbackInfo, x int64) bool {
	for _, log := range logs {
		n := 0
		for _, rec := range log {
			if rec.Offset >= x && rec.Offset < x+int64(info.Records) && rec.ProducerID == info.ProducerID &&
				rec.ProducerEpoch == info.ProducerEpoch && rec.Sequence == info.BaseSequence+int32(rec.Offset-x) {
				n++
			}
		}
		if n == info.Records {
			return true
		}
	}
	return false
}

// readbackTally counts read-back outcomes over a run of schedules.
type readbackTally struct {
	mu       sync.Mutex
	outcomes map[ReadbackOutcome]int
	reasons  map[string]int
	// first counts the batches settled (not unknown) from K at the end
	// of the fill: first batches whose K a ListOffsets gave.
	first int
}

func (t *readbackTally) add(r *chaosReadback) {
	t.mu.Lock()
	defer t.mu.Unlock()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, i := range r.infos {
		t.outcomes[i.Outcome]++
		if i.Outcome != ReadbackUnknown && i.From == int64(r.prefill) {
			t.first++
		}
		if i.Reason != nil {
			t.reasons[reasonName(i.Reason)]++
		}
	}
}

// reasonName is the ErrReadback* (or ErrClosed) i's reason wraps.
func reasonName(err error) string {
	for _, k := range []struct {
		err  error
		name string
	}{{ErrReadbackNotAuthorized, "not authorized"}, {ErrReadbackLogStart, "log start"}, {ErrReadbackCompacted, "compacted"},
		{ErrReadbackNewProducerID, "new producer id"}, {ErrReadbackTopicRecreated, "topic recreated"}, {ErrReadbackBudget, "budget"}, {ErrReadbackNoFence, "no fence"}, {ErrClosed, "closed"}} {
		if errors.Is(err, k.err) {
			return k.name
		}
	}
	return err.Error()
}

// runReadbackSchedules runs n schedules from seed first in read-back mode,
// with bug (if set) brought back in each, and returns the failing seeds'
// first violations and the tally; it stops at the first failure when
// stopAtFirst is set.
func runReadbackSchedules(t *testing.T, first uint64, n int, bug knob, withBug, stopAtFirst bool) (map[uint64][]string, *readbackTally) {
	tally := &readbackTally{outcomes: map[ReadbackOutcome]int{}, reasons: map[string]int{}}
	failed := map[uint64][]string{}
	for i := range n {
		seed := first + uint64(i)
		s := drawSchedule(seed)
		s.readback = &chaosReadback{}
		s.readback.drawLogStart(s)
		if withBug {
			s.regress.set(bug)
		}
		var v []string
		synctest.Test(t, func(t *testing.T) { v = runSchedule(t, s) })
		tally.add(s.readback)
		if len(v) > 0 {
			failed[seed] = firstN(v, 3)
			if stopAtFirst {
				break
			}
		}
	}
	return failed, tally
}

// TestChaosReadback runs LONGHAUL_CHAOS_READBACK schedules (1000 by
// default, 200 under -race or -short) in read-back mode: no violation, and
// the run settled batches both as written and as not written (else the
// checks above saw nothing).
func TestChaosReadback(t *testing.T) {
	total := 1000
	if testing.Short() || raceEnabled {
		total = 200
	}
	total = envInt("LONGHAUL_CHAOS_READBACK", total)
	first := uint64(envInt("LONGHAUL_CHAOS_FIRST", 1))
	begin := time.Now()
	failed, tally := runReadbackSchedules(t, first, total, 0, false, false)
	t.Logf("%d schedules in read-back mode in %v: outcomes %v, unknown by reason %v, %d settled from K at the fill's end", total, time.Since(begin), tally.outcomes, tally.reasons, tally.first)
	for seed, v := range failed {
		t.Errorf("seed %d: %v\nrerun: LONGHAUL_CHAOS_FIRST=%d LONGHAUL_CHAOS_READBACK=1 go test ./producer -run TestChaosReadback$", seed, v, seed)
	}
	require.Positive(t, tally.outcomes[ReadbackWritten], "no batch settled as written: the check of offsets saw nothing")
	require.Positive(t, tally.outcomes[ReadbackNotWritten], "no batch settled as not written: the check of absence saw nothing")
}

// TestChaosReadbackFindsEachBug: the read-back mode finds each of
// read-back's negative controls within 3,000 schedules, not told the
// scenario: a read that does not wait for the fence (it takes the end of
// a lagging replica's data for absence: a written batch reported not
// written), and a match on the base sequence alone (another epoch's or
// producer's batch taken for it: an absent batch reported written).
func TestChaosReadbackFindsEachBug(t *testing.T) {
	needRegress(t)
	for _, bug := range []struct {
		name string
		k    knob
	}{{"no fence", readbackNoFence}, {"base sequence only", readbackSeqOnly}, {"K after the first Produce", readbackKAfter}} {
		t.Run(bug.name, func(t *testing.T) {
			failed, _ := runReadbackSchedules(t, 1, 3000, bug.k, true, true)
			require.NotEmpty(t, failed, "the read-back mode missed the bug in 3,000 schedules")
			for seed, v := range failed {
				t.Logf("found at seed %d: %v", seed, v)
			}
		})
	}
}
