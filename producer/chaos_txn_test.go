package producer

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/longhaul-kafka/longhaul/internal/broker"
	"github.com/longhaul-kafka/longhaul/internal/memnet"
	"github.com/longhaul-kafka/longhaul/protocol"
)

// ctSynthetic is a clean outcome built by hand: a0.0 committed (3
// records on partition 0, 2 on 1, an offset), a0.1 aborted (2 records
// written and aborted, an offset), b0.0 of unknown outcome and committed,
// b0.1 of unknown outcome and not, b0.2 left open, a0.2 failed; the log
// interleaves the committed ones.
func ctSynthetic() ([]*ctTxn, ctLog) {
	txn := func(name string, end ctEnd, counts map[int32]int, offsets ...ctOffset) *ctTxn {
		x := newCTTxn(name)
		x.end = end
		for part, n := range counts {
			for range n {
				x.records[part] = append(x.records[part], &ctRecord{calls: 1})
			}
		}
		x.offsets = offsets
		return x
	}
	txns := []*ctTxn{
		txn("a0.0", ctCommitted, map[int32]int{0: 3, 1: 2}, ctOffset{part: 1, offset: 10, sent: true}),
		txn("a0.1", ctAborted, map[int32]int{0: 2}, ctOffset{part: 2, offset: 20, sent: true}),
		txn("b0.0", ctUnknown, map[int32]int{0: 1, 1: 1}, ctOffset{part: 3, offset: 30, sent: true}),
		txn("b0.1", ctUnknown, map[int32]int{1: 2}, ctOffset{part: 4, offset: 40, sent: true}),
		txn("b0.2", ctOpen, map[int32]int{0: 1}),
		txn("a0.2", ctFailed, map[int32]int{1: 1}),
	}
	t0 := time.Date(2000, 1, 1, 0, 0, 1, 0, time.UTC)
	txns[5].records[1][0].err = kerr.ErrorForCode(kerr.InvalidRecord.Code)
	txns[5].records[1][0].done = t0
	e := func(name string, seq int, off int64) ctLogEntry { return ctLogEntry{txn: name, seq: seq, offset: off} }
	l := ctLog{
		records: map[int32][]ctLogEntry{
			0: {e("a0.0", 0, 0), e("b0.0", 0, 2), e("a0.0", 1, 3), e("a0.0", 2, 4)},
			1: {e("b0.0", 0, 0), e("a0.0", 0, 1), e("a0.0", 1, 2)},
		},
		offsets: map[int32]int64{1: 10, 3: 30},
		// A failed transaction may leave a gap after its failure.
		gaps: []ctGap{{txn: "a0.2", part: 1, seq: 0, at: t0.Add(time.Millisecond)}},
	}
	return txns, l
}

// TestChaosTxnCheckerNegativeControl: checkTxns passes the clean
// synthetic outcome and finds each doctored defect, one per rule: a
// committed transaction's record missing, twice, out of order, in a
// partition it never produced to (a phantom), its offset not committed
// or overwritten; a committed
// transaction with a failed record; an aborted, a failed and an open
// transaction visible (a record, an offset); a transaction of unknown
// outcome partly in; a record no transaction produced; a double
// callback; a hanging transaction; a gap (a transaction's first batch
// on a partition taken at a sequence other than 0) in a sound
// transaction, or in a failed one before its failure.
func TestChaosTxnCheckerNegativeControl(t *testing.T) {
	txns, l := ctSynthetic()
	require.Empty(t, checkTxns(txns, l))
	for _, tc := range []struct {
		name, want string
		doctor     func(txns []*ctTxn, l *ctLog)
	}{
		{"committed record missing", "committed: a0.0 record 0/1 is not in the log", func(_ []*ctTxn, l *ctLog) {
			l.records[0] = append(l.records[0][:2], l.records[0][3:]...)
		}},
		{"committed record twice", "committed: a0.0 record 1/1 is in the log 2 times", func(_ []*ctTxn, l *ctLog) {
			l.records[1] = append(l.records[1], ctLogEntry{txn: "a0.0", seq: 1, offset: 7})
		}},
		{"committed records reordered", "committed: a0.0 record 0/2 at offset 3, before", func(_ []*ctTxn, l *ctLog) {
			l.records[0][2].seq, l.records[0][3].seq = 2, 1
		}},
		{"committed record in a partition not produced to", "phantom: partition 2 offset 0: a0.0/0 was never produced", func(_ []*ctTxn, l *ctLog) {
			l.records[2] = []ctLogEntry{{txn: "a0.0", seq: 0, offset: 0}}
		}},
		{"committed offset missing", "committed: a0.0 sent offset 10 of in/1, the group has none", func(_ []*ctTxn, l *ctLog) {
			delete(l.offsets, 1)
		}},
		{"committed offset overwritten", "committed: a0.0 sent offset 10 of in/1, the group has 11", func(_ []*ctTxn, l *ctLog) {
			l.offsets[1] = 11
		}},
		{"commit after a failed record", "commit after failure: a0.0 reported committed, its record 1/0 failed", func(txns []*ctTxn, _ *ctLog) {
			txns[0].records[1][0].err = kerr.ErrorForCode(kerr.OutOfOrderSequenceNumber.Code)
		}},
		{"aborted record visible", "aborted: a0.1 (aborted: <nil>) is visible: 1 record(s) in partition 0", func(_ []*ctTxn, l *ctLog) {
			l.records[0] = append(l.records[0], ctLogEntry{txn: "a0.1", seq: 1, offset: 9})
		}},
		{"aborted offset committed", "aborted: a0.1 (aborted: <nil>) is visible: offset 20 of in/2 committed", func(_ []*ctTxn, l *ctLog) {
			l.offsets[2] = 20
		}},
		{"failed transaction visible", "aborted: a0.2 (failed", func(_ []*ctTxn, l *ctLog) {
			l.records[1] = append(l.records[1], ctLogEntry{txn: "a0.2", seq: 0, offset: 9})
		}},
		{"open transaction visible", "aborted: b0.2 (open", func(_ []*ctTxn, l *ctLog) {
			l.records[0] = append(l.records[0], ctLogEntry{txn: "b0.2", seq: 0, offset: 9})
		}},
		{"unknown outcome partly in", "unknown: b0.1 record 1/1 is not in the log", func(_ []*ctTxn, l *ctLog) {
			l.records[1] = append(l.records[1], ctLogEntry{txn: "b0.1", seq: 0, offset: 9})
		}},
		{"unknown outcome, only its offset in", "unknown: b0.1 record 1/0 is not in the log", func(_ []*ctTxn, l *ctLog) {
			l.offsets[4] = 40
		}},
		{"unknown outcome, in but its offset not", "unknown: b0.0 sent offset 30 of in/3, the group has none", func(_ []*ctTxn, l *ctLog) {
			delete(l.offsets, 3)
		}},
		{"phantom record", "phantom: partition 1 offset 9: a0.0/5 was never produced", func(_ []*ctTxn, l *ctLog) {
			l.records[1] = append(l.records[1], ctLogEntry{txn: "a0.0", seq: 5, offset: 9})
		}},
		{"phantom transaction", "phantom: partition 1 offset 9: z9.9/0 was never produced", func(_ []*ctTxn, l *ctLog) {
			l.records[1] = append(l.records[1], ctLogEntry{txn: "z9.9", seq: 0, offset: 9})
		}},
		{"double callback", "callbacks: a0.1 record 0/1 called back 2 times", func(txns []*ctTxn, _ *ctLog) {
			txns[1].records[0][1].calls = 2
		}},
		{"no callback", "callbacks: b0.2 record 0/0 called back 0 times", func(txns []*ctTxn, _ *ctLog) {
			txns[4].records[0][0].calls = 0
		}},
		{"hanging transaction", "hanging: partition 1", func(_ []*ctTxn, l *ctLog) {
			l.open = []string{"partition 1: last stable offset 3, end 5"}
		}},
		{"gap in a sound transaction", "gap: partition 0: the broker took a0.0's record 1 as its first", func(_ []*ctTxn, l *ctLog) {
			l.gaps = append(l.gaps, ctGap{txn: "a0.0", part: 0, seq: 1})
		}},
		{"gap before the failure", "gap: partition 1: the broker took a0.2's record 0 as its first", func(_ []*ctTxn, l *ctLog) {
			l.gaps[0].at = l.gaps[0].at.Add(-2 * time.Millisecond)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			txns, l := ctSynthetic()
			tc.doctor(txns, &l)
			v := checkTxns(txns, l)
			require.NotEmpty(t, v)
			require.True(t, strings.HasPrefix(v[0], tc.want), "got %q, want %q...", v[0], tc.want)
			kind := tc.want[:strings.IndexByte(tc.want, ':')+1]
			for _, x := range v {
				require.True(t, strings.HasPrefix(x, kind), "%q: only violations of kind %q expected", x, kind)
			}
		})
	}
}

// TestChaosTxnCheckerReadsCluster: collectCTLog reads what checkTxns
// needs from the embedded broker: transactions written through the
// transaction manager's core over the wire (a committed one with an
// offset, an aborted one with an offset, one left open and timed out by
// the coordinator) pass, and the same log judged against wrong reports
// fails: the aborted one reported committed is missing, the committed one
// reported aborted is visible. A partition held by a transaction still
// open shows as hanging.
func TestChaosTxnCheckerReadsCluster(t *testing.T) {
	for _, tv := range []int{1, 2} {
		t.Run(fmt.Sprintf("TV%d", tv), func(t *testing.T) {
			c, err := broker.Start(broker.Config{Nodes: 3, Topics: []broker.TopicConfig{{Name: ctTopic, Partitions: 2}}})
			require.NoError(t, err)
			t.Cleanup(func() { c.Close() })
			require.NoError(t, c.SetTransactionVersion(int16(tv)))
			d := newTxnWireDriver(t, c.Addr(), protocol.DialConfig{}, ctTopic, 2)
			require.NoError(t, d.core.initTransactions())
			require.NoError(t, d.until(txnOpInit))
			g := protocol.GroupMetadata{GroupID: ctGroup, Generation: -1}
			var txns []*ctTxn
			run := func(name string, counts []int, offset ctOffset, end ctEnd) {
				x := newCTTxn(name)
				x.offsets = []ctOffset{offset}
				require.NoError(t, d.core.begin(tv))
				for part, n := range counts {
					tp := protocol.TopicPartition{Topic: ctTopic, Partition: int32(part)}
					var vals []string
					for i := range n {
						vals = append(vals, string(value(name, int32(part), i, 40)))
						x.records[int32(part)] = append(x.records[int32(part)], &ctRecord{calls: 1})
					}
					if n > 0 {
						require.NoError(t, d.produce(tp, vals...))
					}
				}
				in := protocol.TopicPartition{Topic: ctInput, Partition: offset.part}
				require.NoError(t, d.core.sendOffsets(g, []protocol.TxnOffset{{TopicPartition: in, Offset: offset.offset, LeaderEpoch: -1}}))
				require.NoError(t, d.until(txnOpSendOffsets))
				switch end {
				case ctCommitted:
					require.NoError(t, d.core.commit())
					require.NoError(t, d.until(txnOpCommit))
				case ctAborted:
					_, err := d.core.abort()
					require.NoError(t, err)
					require.NoError(t, d.until(txnOpAbort))
				}
				x.end = end
				txns = append(txns, x)
			}
			run("a0.0", []int{3, 2}, ctOffset{part: 1, offset: 10, sent: true}, ctCommitted)
			run("a0.1", []int{1, 2}, ctOffset{part: 2, offset: 20, sent: true}, ctAborted)
			run("a0.2", []int{0, 2}, ctOffset{part: 3, offset: 30, sent: true}, ctOpen)
			require.Eventually(t, func() bool {
				info, _ := c.Transaction(d.txnID)
				return info.State == "Ongoing"
			}, 10*time.Second, time.Millisecond)

			l := collectCTLog(c, 2, txns)
			require.Equal(t, []string{"hanging: partition 1: last stable offset 6, end 8"}, checkTxns(txns, l))

			require.True(t, c.TimeOutTransaction(d.txnID))
			waitTxnComplete(t, c, d.txnID)
			l = collectCTLog(c, 2, txns)
			require.Empty(t, checkTxns(txns, l))
			require.Len(t, l.records[0], 3)
			require.Len(t, l.records[1], 2)
			require.Equal(t, map[int32]int64{1: 10}, l.offsets)

			txns[0].end, txns[1].end = ctAborted, ctCommitted
			v := checkTxns(txns, l)
			require.NotEmpty(t, v)
			for _, want := range []string{"committed: a0.1 record 0/0 is not in the log", "aborted: a0.0 (aborted"} {
				require.True(t, containsPrefix(v, want), "%q not among %v", want, v)
			}
		})
	}
}

// containsPrefix reports whether a string of v starts with prefix.
func containsPrefix(v []string, prefix string) bool {
	for _, s := range v {
		if strings.HasPrefix(s, prefix) {
			return true
		}
	}
	return false
}

// The randomized transactional test (issue 31): schedules drawn from a
// seed run two transactional producers (transactional ids "a" and "b"),
// sometimes a zombie (a second producer of "a", which fences the first)
// and a raw InitProducerId fencing "b", each producer running a script of
// transactions (bursts of records across partitions, offsets sent for
// the group, commit or abort), on the embedded broker on virtual time,
// under transaction version 1 or 2 (and 2 on a Kafka 4.0-like cluster:
// Produce up to v12, a transaction's first batch taken at any sequence),
// with windows above 5, among the faults of TestChaosMixedFaults
// (scripted answers, KIP-951 hints among them, lost responses, closed
// connections, stalls, slow nodes, throttles, leader moves, window
// changes, nodes moving to new addresses, a node before KIP-1269, a
// Kafka 2.4 cluster) and the coordinator's (errors
// injected, coordinator moves, markers slow, held, lost and written
// across a failover, a failover between a request's change and its
// answer, transactions timed out). A producer fenced or failed
// is replaced by a new one of the same id, as an application restarts
// (not "a" once its zombie took over). Once the faults stop, a tail
// transaction of each id must commit. checkTxns then judges the
// transactions against a read_committed read of the log and the group's
// offsets.
//
//	LONGHAUL_CHAOS_TXN_SEED=123        rerun one seed, printing its schedule
//	LONGHAUL_CHAOS_TXN_SCHEDULES=50000 run more (or fewer) schedules
//	LONGHAUL_CHAOS_TXN_FIRST=1000      first seed (default 1)
//	LONGHAUL_CHAOS_LOG=1               log the producers' debug output

// Transactional chaos parameters.
const (
	ctNodes     = 3
	ctParts     = 4
	ctSpan      = 3 * time.Second // faults happen in [0, span)
	ctOpTimeout = 30 * time.Second
)

// ctStep is one scheduled fault.
type ctStep struct {
	at   time.Duration
	what string
	do   func(r *ctRun)
}

// ctBurst is n records to a partition, then a pause.
type ctBurst struct {
	part  int32
	n     int
	pause time.Duration
}

// ctPlan is one transaction of a script.
type ctPlan struct {
	gap    time.Duration // before BeginTransaction
	bursts []ctBurst
	// offsetsAfter is the burst after which the transaction sends an
	// offset, -1 for none.
	offsetsAfter int
	abort        bool
}

// ctScript is what one transactional id's producer runs.
type ctScript struct {
	id    string // transactional id
	name  string // the producers' names: name0, name1 after a restart...
	start time.Duration
	txns  []ctPlan
}

// ctSchedule is one drawn schedule.
type ctSchedule struct {
	seed        uint64
	tv          int16
	kafka40     bool // Produce up to v12 and lenient transaction starts
	window      int
	txnTimeout  time.Duration
	markerDelay time.Duration
	scripts     []ctScript // "a", "b", then the zombie of "a" if drawn
	steps       []ctStep
	// oldNode is a node of a release before KIP-1269 (Produce up to v13,
	// no window announced), -1 none; kafka24: every node is Kafka 2.4
	// (transaction version 1 only, no KIP-360 epoch bump).
	oldNode int32
	kafka24 bool
	// moved: nodes move to new addresses (broker.Cluster.MoveNode); the
	// producers bootstrap from every node's first address.
	moved   bool
	regress regressions
}

func (s *ctSchedule) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d: transaction version %d", s.seed, s.tv)
	if s.kafka40 {
		b.WriteString(" on a Kafka 4.0-like cluster (Produce up to v12, lenient transaction starts)")
	}
	if s.kafka24 {
		b.WriteString(" on a Kafka 2.4 cluster")
	}
	if s.oldNode >= 0 {
		fmt.Fprintf(&b, ", node %d before KIP-1269", s.oldNode)
	}
	fmt.Fprintf(&b, ", window %d, transaction.timeout.ms %v, marker delay %v\n", s.window, s.txnTimeout, s.markerDelay)
	for _, sc := range s.scripts {
		fmt.Fprintf(&b, "  %s (transactional id %s) from %v:", sc.name, sc.id, sc.start)
		for i, pl := range sc.txns {
			fmt.Fprintf(&b, " [%d: after %v", i, pl.gap)
			for j, bu := range pl.bursts {
				fmt.Fprintf(&b, "; %d to p%d", bu.n, bu.part)
				if j == pl.offsetsAfter {
					b.WriteString(", offsets")
				}
				if bu.pause > 0 {
					fmt.Fprintf(&b, ", %v", bu.pause)
				}
			}
			if pl.abort {
				b.WriteString("; abort]")
			} else {
				b.WriteString("; commit]")
			}
		}
		b.WriteString("\n")
	}
	for _, st := range s.steps {
		fmt.Fprintf(&b, "  %7v %s\n", st.at, st.what)
	}
	return b.String()
}

// drawTxnSchedule draws a schedule from seed.
func drawTxnSchedule(seed uint64) *ctSchedule {
	rng := rand.New(rand.NewPCG(seed, 0x31))
	s := &ctSchedule{seed: seed, tv: int16(1 + rng.IntN(2)), window: []int{8, 20, 50}[rng.IntN(3)],
		txnTimeout: time.Minute, markerDelay: broker.DefaultMarkerDelay}
	if s.tv == 2 && rng.IntN(3) == 0 {
		s.kafka40 = true
	}
	if rng.IntN(4) == 0 {
		// Short enough that a transaction slowed by the faults times
		// out at its coordinator.
		s.txnTimeout = 1500*time.Millisecond + time.Duration(rng.Int64N(int64(1500*time.Millisecond)))
	}
	if rng.IntN(2) == 0 {
		s.markerDelay = time.Duration(rng.Int64N(int64(150 * time.Millisecond)))
	}
	at := func() time.Duration { return time.Duration(rng.Int64N(int64(ctSpan))) }
	part := func() int32 { return rng.Int32N(ctParts) }
	node := func() int32 { return rng.Int32N(ctNodes) }
	plans := func(n int) []ctPlan {
		var out []ctPlan
		for range n {
			pl := ctPlan{gap: time.Duration(rng.Int64N(int64(500 * time.Millisecond))), offsetsAfter: -1, abort: rng.IntN(5) == 0}
			for range 1 + rng.IntN(4) {
				bu := ctBurst{part: part(), n: 1 + rng.IntN(40)}
				if rng.IntN(2) == 0 {
					bu.pause = time.Duration(rng.Int64N(int64(60 * time.Millisecond)))
				}
				pl.bursts = append(pl.bursts, bu)
			}
			if rng.IntN(2) == 0 {
				pl.offsetsAfter = rng.IntN(len(pl.bursts))
			}
			out = append(out, pl)
		}
		return out
	}
	s.scripts = []ctScript{
		{id: "a", name: "a", txns: plans(2 + rng.IntN(5))},
		{id: "b", name: "b", start: time.Duration(rng.Int64N(int64(200 * time.Millisecond))), txns: plans(2 + rng.IntN(5))},
	}
	if rng.IntN(4) == 0 {
		s.scripts = append(s.scripts, ctScript{id: "a", name: "az", start: at(), txns: plans(1 + rng.IntN(3))})
	}
	add := func(t time.Duration, what string, do func(*ctRun)) {
		s.steps = append(s.steps, ctStep{at: t, what: what, do: do})
	}
	ids := []string{"a", "b"}
	for range 2 + rng.IntN(6) {
		t := at()
		switch rng.IntN(17) {
		case 0, 1, 2:
			p := part()
			answers, names := drawAnswers(rng)
			add(t, fmt.Sprintf("partition %d answers %s", p, names), func(r *ctRun) { r.c.ScriptAnswers(ctTopic, p, answers...) })
		case 3:
			nd, n := node(), 1+rng.IntN(5)
			add(t, fmt.Sprintf("node %d drops its next %d produce responses", nd, n), func(r *ctRun) { r.c.DropProduceResponses(nd, n) })
		case 4:
			nd, n := node(), 1+rng.IntN(5)
			if rng.IntN(2) == 0 {
				add(t, fmt.Sprintf("node %d closes a connection after %d requests", nd, n), func(r *ctRun) { r.c.CloseAfterRequests(nd, n) })
			} else {
				add(t, fmt.Sprintf("node %d drops its connections", nd), func(r *ctRun) { r.c.DropConnections(nd) })
			}
		case 5:
			nd, d := node(), time.Duration(rng.Int64N(int64(2*chaosReqTimeout)))
			add(t, fmt.Sprintf("node %d stalls %v", nd, d), func(r *ctRun) {
				r.c.Stall(nd, d)
				r.quietFrom(d)
			})
		case 6:
			p, nd := part(), node()
			add(t, fmt.Sprintf("partition %d moves to node %d", p, nd), func(r *ctRun) { r.c.MoveLeader(ctTopic, p, nd) })
		case 7:
			w := []int{5, 8, 20, 50}[rng.IntN(4)]
			add(t, fmt.Sprintf("window set to %d", w), func(r *ctRun) { r.c.SetWindow(ctTopic, w) })
		case 8:
			nd := node()
			rtt := 20*time.Millisecond + time.Duration(rng.Int64N(int64(80*time.Millisecond)))
			d := time.Duration(rng.Int64N(int64(800 * time.Millisecond)))
			add(t, fmt.Sprintf("node %d answers in %v for %v", nd, rtt, d), func(r *ctRun) {
				r.c.SetRTT(nd, rtt)
				r.after(d, func() { r.c.SetRTT(nd, chaosRTT) })
			})
		case 9, 10:
			e := broker.TxnCoordinatorErrors[rng.IntN(len(broker.TxnCoordinatorErrors))]
			key, n := e.Keys[rng.IntN(len(e.Keys))], 1+rng.IntN(4)
			add(t, fmt.Sprintf("the next %d coordinator requests of API key %d answer %s", n, key, e.Err.Message), func(r *ctRun) {
				r.c.InjectCoordinatorError(key, e.Err.Code, n)
			})
		case 11:
			nd := node()
			key, txn := []string{"a", "b", ctGroup}[rng.IntN(3)], true
			if key == ctGroup {
				txn = false
			}
			add(t, fmt.Sprintf("the coordinator of %s moves to node %d", key, nd), func(r *ctRun) {
				if err := r.c.MoveCoordinator(key, txn, nd); err != nil {
					panic(err)
				}
			})
		case 12:
			d := time.Duration(rng.Int64N(int64(400 * time.Millisecond)))
			add(t, fmt.Sprintf("markers held for %v", d), func(r *ctRun) {
				r.c.HoldMarkers(true)
				r.after(d, func() { r.c.HoldMarkers(false) })
			})
		case 13:
			n := 1 + rng.IntN(3)
			add(t, fmt.Sprintf("the next %d marker writes are lost (written again later)", n), func(r *ctRun) { r.c.LoseMarkers(n) })
		case 14:
			add(t, "the coordinator fails over between the markers of the next transaction", func(r *ctRun) { r.c.FailOverBetweenMarkers(1) })
		case 15:
			id := ids[rng.IntN(2)]
			add(t, fmt.Sprintf("transaction of %s times out at its coordinator", id), func(r *ctRun) { r.c.TimeOutTransaction(id) })
		case 16:
			add(t, "a raw InitProducerId of transactional id b (a zombie instance) fences b's producer", func(r *ctRun) {
				r.rawFence("b")
			})
		}
	}
	// Old releases and nodes moving to new addresses, from their own
	// stream.
	ex := rand.New(rand.NewPCG(seed, 0x3131))
	s.oldNode = -1
	if ex.IntN(4) == 0 {
		s.oldNode = ex.Int32N(ctNodes)
	}
	s.kafka24 = s.tv == 1 && ex.IntN(6) == 0
	if ex.IntN(5) == 0 {
		s.moved = true
		for range 1 + ex.IntN(2) {
			t, nd := time.Duration(ex.Int64N(int64(ctSpan))), ex.Int32N(ctNodes)
			m := broker.NodeMove{Replace: ex.IntN(2) == 0, Mode: broker.SameMode}
			what := fmt.Sprintf("node %d moves to a new address", nd)
			if m.Replace {
				m.Snapshot = ex.IntN(2) == 0
				what += fmt.Sprintf(", another process (producer state from a snapshot: %v)", m.Snapshot)
			}
			if ex.IntN(2) == 0 {
				m.Grace = 20*time.Millisecond + time.Duration(ex.Int64N(int64(580*time.Millisecond)))
				what += fmt.Sprintf("; the old one answers after %v, then closes", m.Grace)
			}
			add(t, what, func(r *ctRun) {
				if _, err := r.c.MoveNode(nd, m); err != nil {
					panic(err)
				}
				r.quietFrom(m.Grace)
			})
		}
	}
	// Throttles and KIP-951 hints, as TestChaosMixedFaults draws them
	// (chaosSchedule.throttles).
	if ex.IntN(4) == 0 {
		t, nd := time.Duration(ex.Int64N(int64(ctSpan))), ex.Int32N(ctNodes)
		rate := int64([]int{8, 16, 32}[ex.IntN(3)]) << 10
		d := 200*time.Millisecond + time.Duration(ex.Int64N(int64(1300*time.Millisecond)))
		add(t, fmt.Sprintf("node %d enforces a produce quota of %d KiB/s for %v", nd, rate>>10, d), func(r *ctRun) {
			r.c.SetProduceQuota(nd, rate)
			r.after(d, func() { r.c.SetProduceQuota(nd, 0) })
			r.quietFrom(d + chaosReqTimeout)
		})
	}
	if ex.IntN(4) == 0 {
		nl := kerr.NotLeaderForPartition.Code
		t, p := time.Duration(ex.Int64N(int64(ctSpan))), ex.Int32N(ctParts)
		var answers []broker.Answer
		var names []string
		for range 1 + ex.IntN(3) {
			if ex.IntN(2) == 0 {
				answers = append(answers, broker.Answer{Code: nl, Hint: &broker.LeaderHint{Leader: 9, Epoch: 1 << 20}})
				names = append(names, "NOT_LEADER hinting node 9 (no address) at epoch 2^20")
				continue
			}
			nd := ex.Int32N(ctNodes)
			answers = append(answers, broker.Answer{Code: nl, Hint: &broker.LeaderHint{Leader: nd, Epoch: 0}})
			names = append(names, fmt.Sprintf("NOT_LEADER hinting node %d at epoch 0", nd))
		}
		add(t, fmt.Sprintf("partition %d answers %s", p, strings.Join(names, ", ")), func(r *ctRun) {
			r.c.ScriptAnswers(ctTopic, p, answers...)
		})
	}
	// A coordinator failing over between a request's change and its
	// answer, from a stream of its own: a retried InitProducerId bump is
	// then PRODUCER_FENCED with no other producer alive (the coordinator
	// that loaded the id does not know the epoch before the bump, as in
	// Kafka), which the producer reports as fenced, as Java does.
	fo := rand.New(rand.NewPCG(seed, 0x313131))
	if fo.IntN(4) == 0 {
		t := time.Duration(fo.Int64N(int64(ctSpan)))
		key, n := []int16{22, 26, -1}[fo.IntN(3)], 1+fo.IntN(3)
		names := map[int16]string{22: "InitProducerId", 26: "EndTxn", -1: "InitProducerId or EndTxn"}
		add(t, fmt.Sprintf("the coordinator fails over between the change and the answer of its next %d %s", n, names[key]), func(r *ctRun) {
			r.c.FailOverBeforeAnswer(key, n)
		})
	}
	sort.SliceStable(s.steps, func(i, j int) bool { return s.steps[i].at < s.steps[j].at })
	return s
}

// ctRun is the state of one transactional schedule being run.
type ctRun struct {
	t   *testing.T
	s   *ctSchedule
	c   *broker.Cluster
	n   *memnet.Network
	led *ctLedger
	bg  sync.WaitGroup // goroutines of after

	mu         sync.Mutex
	producers  []*Producer
	wires      map[*Producer]*ctWire
	violations []string
	zombie     bool      // the zombie of "a" took over
	quiet      time.Time // when the last stall ends
	rawFenced  int       // raw InitProducerId fences done
	fenced     int       // producers that saw ErrProducerFenced
	abortable  int       // commits refused as abortable
	unknown    int       // commits of unknown outcome
}

// after runs f once d passed, in the bubble.
func (r *ctRun) after(d time.Duration, f func()) {
	r.bg.Add(1)
	go func() {
		defer r.bg.Done()
		time.Sleep(d)
		f()
	}()
}

// quietFrom notes a fault lasting d from now: the tail waits for it.
func (r *ctRun) quietFrom(d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if end := time.Now().Add(d); end.After(r.quiet) {
		r.quiet = end
	}
}

func (r *ctRun) violate(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.violations = append(r.violations, fmt.Sprintf(format, args...))
}

// ctWire watches the requests one producer writes to its connections,
// where they leave it (the broker may read them later: a stall, a
// throttle): once its open transaction turned abort-only (a record of it
// failed, or AbortTransaction was called), no Produce request may be
// written until the next BeginTransaction, at a later instant than that
// (in flight at that moment is sent before it); and inside a version 1
// transaction no Produce above v11 (protocol.MaxTV1ProduceVersion).
type ctWire struct {
	r    *ctRun
	name string // the producer's script name and instance

	mu    sync.Mutex
	cur   *ctTxn    // the transaction open on the producer
	since time.Time // when cur turned abort-only; zero: not
	seen  int       // Produce requests written since then (reported once)
}

// begin notes x as the producer's open transaction.
func (w *ctWire) begin(x *ctTxn) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.cur, w.since, w.seen = x, time.Time{}, 0
}

// abortOnly notes that x turned abort-only now, unless it did before.
func (w *ctWire) abortOnly(x *ctTxn) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cur == x && w.since.IsZero() {
		w.since = time.Now()
	}
}

// request checks one request written: its API key and version.
func (w *ctWire) request(key, version int16) {
	if key != 0 {
		return
	}
	if w.r.s.tv == 1 && version > 11 {
		w.r.violate("tv1: %s wrote Produce v%d inside a version 1 transaction", w.name, version)
	}
	w.mu.Lock()
	x, since := w.cur, w.since
	late := !since.IsZero() && time.Now().After(since)
	if late {
		w.seen++
	}
	first := late && w.seen == 1
	w.mu.Unlock()
	if first {
		w.r.violate("drain: %s wrote a Produce request %v after its transaction %s turned abort-only",
			w.name, time.Since(since), x.name)
	}
}

// dial wraps dial's connections so that w sees what they write.
func (w *ctWire) dial(dial func(ctx context.Context, network, addr string) (net.Conn, error)) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &ctWireConn{Conn: c, w: w}, nil
	}
}

// ctWireConn splits what is written into request frames (a 4-byte size,
// then the API key and version), keeping only each frame's first 8 bytes.
type ctWireConn struct {
	net.Conn
	w    *ctWire
	hdr  [8]byte
	have int // bytes of hdr filled
	skip int // bytes left of the current frame after hdr
}

func (c *ctWireConn) Write(b []byte) (int, error) {
	for rest := b; len(rest) > 0; {
		if c.skip > 0 {
			k := min(c.skip, len(rest))
			c.skip -= k
			rest = rest[k:]
			continue
		}
		k := copy(c.hdr[c.have:], rest)
		c.have += k
		rest = rest[k:]
		if c.have == len(c.hdr) {
			c.have = 0
			c.skip = int(binary.BigEndian.Uint32(c.hdr[0:4])) - 4
			c.w.request(int16(binary.BigEndian.Uint16(c.hdr[4:6])), int16(binary.BigEndian.Uint16(c.hdr[6:8])))
		}
	}
	return c.Conn.Write(b)
}

// newProducer starts a producer of transactional id id and initializes
// it; nil if it could not be.
func (r *ctRun) newProducer(id string, k int) *Producer {
	boot := []string{r.c.Addr()}
	if r.s.moved {
		boot = r.c.Addrs()
	}
	w := &ctWire{r: r, name: fmt.Sprintf("producer %d of %s", k, id)}
	p, err := New(BootstrapServers(boot...), Dialer(w.dial(r.n.Dial)), Linger(time.Millisecond),
		RetryBackoff(5*time.Millisecond), RetryBackoffMax(50*time.Millisecond),
		RequestTimeout(chaosReqTimeout), DeliveryTimeout(chaosDelivery),
		MaxInFlightRequestsPerConnection(20), BatchSize(512),
		TransactionalID(id), TransactionTimeout(r.s.txnTimeout),
		optFunc(func(c *config) error { c.regress, c.probe = r.s.regress, new(senderProbe); return nil }),
		seededRandom(r.s.seed<<8|uint64(k)), Logger(chaosLogger(k)))
	if err != nil {
		r.violate("api: New: %v", err)
		return nil
	}
	r.mu.Lock()
	r.producers = append(r.producers, p)
	r.wires[p] = w
	r.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), ctOpTimeout)
	defer cancel()
	if err := p.InitTransactions(ctx); err != nil {
		if !txnClassed(err) {
			r.violate("api: InitTransactions of %s: %v, of no error class", id, err)
		}
		return nil
	}
	return p
}

// txnClassed reports whether err is of one of the transactional error
// classes (KIP-1050) the API promises.
func txnClassed(err error) bool {
	for _, class := range []error{ErrTransactionAbortable, ErrProducerFenced, ErrTransactionFatal, ErrCommitUnknown, ErrTransactionState} {
		if errors.Is(err, class) {
			return true
		}
	}
	return false
}

// script runs sc: its transactions, one after the other, restarting its
// producer when it is fenced or fails (at most 3 times), until a zombie
// of its id took over.
func (r *ctRun) script(sc ctScript, k int) {
	time.Sleep(sc.start)
	if sc.name == "az" {
		r.mu.Lock()
		r.zombie = true
		r.mu.Unlock()
	}
	inst := 0
	p := r.newProducer(sc.id, k)
	for i := 0; i < len(sc.txns); i++ {
		if p != nil {
			time.Sleep(sc.txns[i].gap)
			if r.runTxn(p, fmt.Sprintf("%s%d.%d", sc.name, inst, i), sc.txns[i]) {
				continue
			}
		}
		r.mu.Lock()
		stop := sc.name == "a" && r.zombie
		r.mu.Unlock()
		if stop || inst == 3 {
			return
		}
		inst++
		p = r.newProducer(sc.id, k+8*inst)
	}
}

// runTxn runs one transaction of plan on p, named name; it reports
// whether p can go on (not fenced, not failed).
func (r *ctRun) runTxn(p *Producer, name string, plan ctPlan) bool {
	x := r.led.begin(name)
	r.wire(p).begin(x)
	if err := p.BeginTransaction(); err != nil {
		r.led.set(func() { x.end, x.err = ctFailed, err })
		return r.judgeDead(name, "BeginTransaction", err)
	}
	for i, bu := range plan.bursts {
		r.led.produce(p, x, bu.part, bu.n)
		if i == plan.offsetsAfter {
			o, idx := r.led.offset(x)
			ctx, cancel := context.WithTimeout(context.Background(), ctOpTimeout)
			err := p.SendOffsetsToTransaction(ctx, GroupMetadata{GroupID: ctGroup, Generation: -1},
				[]TransactionOffset{{Topic: ctInput, Partition: o.part, Offset: o.offset, LeaderEpoch: -1}})
			cancel()
			if err == nil {
				r.led.set(func() { x.offsets[idx].sent = true })
			} else if !txnClassed(err) {
				r.violate("api: %s: SendOffsetsToTransaction: %v, of no error class", name, err)
			}
		}
		time.Sleep(bu.pause)
	}
	if plan.abort {
		return r.abortTxn(p, x)
	}
	err := r.retried(func(ctx context.Context) error { return p.CommitTransaction(ctx) })
	switch {
	case err == nil:
		r.led.set(func() { x.end = ctCommitted })
		return true
	case errors.Is(err, ErrCommitUnknown):
		r.mu.Lock()
		r.unknown++
		r.mu.Unlock()
		r.led.set(func() { x.end, x.err = ctUnknown, err })
		return true // the next BeginTransaction initializes again
	case errors.Is(err, context.DeadlineExceeded):
		r.violate("liveness: %s: CommitTransaction did not return within %v twice", name, ctOpTimeout)
		r.led.set(func() { x.end, x.err = ctUnknown, err })
		return false
	case errors.Is(err, ErrTransactionAbortable):
		r.mu.Lock()
		r.abortable++
		r.mu.Unlock()
		return r.abortTxn(p, x)
	}
	r.led.set(func() { x.end, x.err = ctFailed, err })
	return r.judgeDead(name, "CommitTransaction", err)
}

// retried calls f with a context of ctOpTimeout, and once more if that
// ended first (the call goes on in the background: the second waits for
// its outcome).
func (r *ctRun) retried(f func(ctx context.Context) error) error {
	var err error
	for range 2 {
		ctx, cancel := context.WithTimeout(context.Background(), ctOpTimeout)
		err = f(ctx)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			return err
		}
	}
	return err
}

// wire is p's ctWire.
func (r *ctRun) wire(p *Producer) *ctWire {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.wires[p]
}

// abortTxn aborts x on p.
func (r *ctRun) abortTxn(p *Producer, x *ctTxn) bool {
	r.wire(p).abortOnly(x)
	err := r.retried(func(ctx context.Context) error { return p.AbortTransaction(ctx) })
	if err == nil {
		r.led.set(func() { x.end = ctAborted })
		return true
	}
	r.led.set(func() { x.end, x.err = ctFailed, err })
	if errors.Is(err, context.DeadlineExceeded) {
		r.violate("liveness: %s: AbortTransaction did not return within %v twice", x.name, ctOpTimeout)
		return false
	}
	return r.judgeDead(x.name, "AbortTransaction", err)
}

// judgeDead takes a transactional call's error: a producer fenced or
// failed cannot go on; any error must be of a class.
func (r *ctRun) judgeDead(name, call string, err error) bool {
	if !txnClassed(err) {
		r.violate("api: %s: %s: %v, of no error class", name, call, err)
		return false
	}
	if errors.Is(err, ErrProducerFenced) {
		r.mu.Lock()
		r.fenced++
		r.mu.Unlock()
		return false
	}
	return !errors.Is(err, ErrTransactionFatal)
}

// rawFence initializes transactional id id over a connection of its own,
// as a new instance of its application would: the producer holding it is
// fenced, its open transaction aborted. It is done once an answer came
// without error, or the coordinator fenced an open transaction for it (a
// restarted producer of the id may initialize again meanwhile).
func (r *ctRun) rawFence(id string) {
	cfg := protocol.DialConfig{Dial: r.n.Dial}
	for range 100 {
		ctx, cancel := context.WithTimeout(context.Background(), 2*chaosReqTimeout)
		fenced := r.c.TxnStats().Fenced
		code := r.rawInit(ctx, cfg, id)
		cancel()
		if code == 0 || r.c.TxnStats().Fenced > fenced {
			r.mu.Lock()
			r.rawFenced++
			r.mu.Unlock()
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	r.violate("raw fence: InitProducerId of %s never succeeded", id)
}

// rawInit sends one InitProducerId of id to its coordinator and returns
// its error code (-1 for a transport error).
func (r *ctRun) rawInit(ctx context.Context, cfg protocol.DialConfig, id string) int16 {
	boot, err := protocol.Dial(ctx, r.c.Addr(), cfg)
	if err != nil {
		return -1
	}
	defer boot.Close()
	res, err := protocol.FindCoordinator(ctx, boot, protocol.CoordinatorTransaction, id)
	if err != nil || res.ErrorCode != 0 {
		return -1
	}
	conn, err := protocol.Dial(ctx, res.Addr, cfg)
	if err != nil {
		return -1
	}
	defer conn.Close()
	ir, err := protocol.InitTransactionalID(ctx, conn, id, r.s.txnTimeout, -1, -1)
	if err != nil {
		return -1
	}
	return ir.ErrorCode
}

// ctCoverage counts what a run's schedules exercised.
type ctCoverage struct {
	schedules, committed, aborted, abortable, unknown, zombie, rawFenced, fenced int
	timedOut, concurrent, lostMarkers, failovers, kafka40, tv1                   int
	// answerFailovers: the coordinator failed over between a change and
	// its answer; loadFenced: a bump's retry was fenced after such a
	// failover (or a move).
	answerFailovers, loadFenced int
}

func (c *ctCoverage) add(o ctCoverage) {
	c.schedules += o.schedules
	c.committed += o.committed
	c.aborted += o.aborted
	c.abortable += o.abortable
	c.unknown += o.unknown
	c.zombie += o.zombie
	c.rawFenced += o.rawFenced
	c.fenced += o.fenced
	c.timedOut += o.timedOut
	c.concurrent += o.concurrent
	c.lostMarkers += o.lostMarkers
	c.failovers += o.failovers
	c.kafka40 += o.kafka40
	c.tv1 += o.tv1
	c.answerFailovers += o.answerFailovers
	c.loadFenced += o.loadFenced
}

func (c ctCoverage) String() string {
	return fmt.Sprintf("%d schedules (%d under transaction version 1, %d on a 4.0-like cluster): %d committed a transaction, %d aborted one, %d had a commit refused as abortable, %d a commit of unknown outcome, %d ran a zombie, %d fenced by a raw InitProducerId, %d saw a producer fenced, %d timed a transaction out, %d met CONCURRENT_TRANSACTIONS, %d lost markers, %d failed over between markers, %d between a change and its answer, %d had a bump's retry fenced by a coordinator that loaded the id",
		c.schedules, c.tv1, c.kafka40, c.committed, c.aborted, c.abortable, c.unknown, c.zombie, c.rawFenced, c.fenced, c.timedOut, c.concurrent, c.lostMarkers, c.failovers,
		c.answerFailovers, c.loadFenced)
}

// gaps returns what fewer than one schedule in a hundred of a run (and
// at least one) exercised.
func (c ctCoverage) gaps() []string {
	least := max(1, c.schedules/100)
	var g []string
	for _, x := range []struct {
		n    int
		what string
	}{
		{c.committed, "committed a transaction"}, {c.aborted, "aborted a transaction"},
		{c.abortable, "had a commit refused as abortable"}, {c.zombie, "ran a zombie"},
		{c.rawFenced, "fenced a producer by a raw InitProducerId"}, {c.fenced, "saw a producer fenced"},
		{c.timedOut, "timed a transaction out"}, {c.concurrent, "met CONCURRENT_TRANSACTIONS"},
		{c.lostMarkers, "lost a marker"}, {c.failovers, "failed over between markers"},
		{c.kafka40, "ran on a 4.0-like cluster"}, {c.tv1, "ran transaction version 1"},
		{c.answerFailovers, "failed over between a change and its answer"},
	} {
		if x.n < least {
			g = append(g, fmt.Sprintf("coverage: %d of %d schedules %s", x.n, c.schedules, x.what))
		}
	}
	return g
}

// runTxnSchedule runs s inside the current synctest bubble and returns
// every violation found and what it exercised.
func runTxnSchedule(t *testing.T, s *ctSchedule) ([]string, ctCoverage) {
	cfg := broker.Config{Nodes: ctNodes, RTT: chaosRTT, Topics: []broker.TopicConfig{{Name: ctTopic, Partitions: ctParts, Window: s.window}}}
	if s.kafka40 {
		cfg.ProduceMaxVersions = map[int32]int16{}
		for nd := range int32(ctNodes) {
			cfg.ProduceMaxVersions[nd] = broker.Kafka40ProduceMaxVersion
		}
	}
	if s.oldNode >= 0 {
		cfg.OldNodes = []int32{s.oldNode}
	}
	if s.kafka24 {
		for nd := range int32(ctNodes) {
			cfg.Kafka24Nodes = append(cfg.Kafka24Nodes, nd)
		}
	}
	c, n := memCluster(t, cfg)
	c.SetLenientTransactionStart(s.kafka40)
	require.NoError(t, c.SetTransactionVersion(s.tv))
	c.SetMarkerDelay(s.markerDelay)
	r := &ctRun{t: t, s: s, c: c, n: n, led: &ctLedger{}, wires: map[*Producer]*ctWire{}}
	r.led.failed = func(p *Producer, x *ctTxn) { r.wire(p).abortOnly(x) }
	var scripts sync.WaitGroup
	for k, sc := range s.scripts {
		scripts.Add(1)
		go func() {
			defer scripts.Done()
			r.script(sc, k)
		}()
	}
	start := time.Now()
	for _, st := range s.steps {
		if d := st.at - time.Since(start); d > 0 {
			time.Sleep(d)
		}
		st.do(r)
	}
	done := make(chan struct{})
	go func() { scripts.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Minute):
		r.violate("liveness: the scripts did not end within 10 minutes")
		<-done
	}
	r.bg.Wait()
	// The faults stop.
	for p := range int32(ctParts) {
		c.InjectError(ctTopic, p, 0, 0)
	}
	for nd := range int32(ctNodes) {
		c.DropProduceResponses(nd, 0)
		c.CloseAfterRequests(nd, 0)
		c.SetRTT(nd, chaosRTT)
		c.SetProduceQuota(nd, 0)
	}
	c.InjectCoordinatorError(-1, 0, 0)
	c.LoseMarkers(0)
	c.FailOverBetweenMarkers(0)
	c.FailOverBeforeAnswer(-1, 0)
	c.HoldMarkers(false)
	if !r.led.waitAll(chaosDelivery + 3*chaosReqTimeout) {
		r.violate("liveness: callbacks missing %v after the scripts ended", chaosDelivery+3*chaosReqTimeout)
	}
	closeAll := func() {
		r.mu.Lock()
		ps := r.producers
		r.producers = nil
		r.mu.Unlock()
		for i, p := range ps {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			p.Close(ctx)
			cancel()
			if !memoryReleased(p) {
				r.violate("memory: producer %d: buffer.memory not back to 0 after Close", i)
			}
		}
	}
	closeAll()
	// A tail transaction of each id, from a new instance, must commit
	// once the last stall ended.
	r.mu.Lock()
	quiet := r.quiet
	r.mu.Unlock()
	if d := time.Until(quiet); d > 0 {
		time.Sleep(d)
	}
	for k, id := range []string{"a", "b"} {
		p := r.newProducer(id, 100+k)
		if p == nil {
			r.violate("liveness: the tail producer of %s could not initialize", id)
			continue
		}
		x := r.led.begin("t" + id + "0.0")
		r.wire(p).begin(x)
		if err := p.BeginTransaction(); err != nil {
			r.violate("liveness: the tail transaction of %s: BeginTransaction: %v", id, err)
			r.led.set(func() { x.end, x.err = ctFailed, err })
			continue
		}
		for part := range int32(ctParts) {
			r.led.produce(p, x, part, 3)
		}
		err := r.retried(func(ctx context.Context) error { return p.CommitTransaction(ctx) })
		if err == nil {
			r.led.set(func() { x.end = ctCommitted })
		} else {
			r.violate("liveness: the tail transaction of %s did not commit: %v", id, err)
			r.led.set(func() { x.end, x.err = ctFailed, err })
		}
	}
	if !r.led.waitAll(chaosDelivery + 3*chaosReqTimeout) {
		r.violate("liveness: tail callbacks missing")
	}
	closeAll()
	// Every transaction ended: wait for the last markers.
	for end := time.Now().Add(time.Minute); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		busy := false
		for _, id := range []string{"a", "b"} {
			if info, ok := c.Transaction(id); ok && (info.State == "PrepareCommit" || info.State == "PrepareAbort") {
				busy = true
			}
		}
		if !busy {
			break
		}
	}
	txns := r.led.snapshot()
	v := append(r.violations, checkTxns(txns, collectCTLog(c, ctParts, txns))...)
	if n, first := c.OverWindow(); n > 0 {
		v = append(v, fmt.Sprintf("window: %d batches in flight beyond the window announced, e.g. %v", n, firstN(first, 2)))
	}
	v = append(v, mutedSendViolations(c)...)
	st := c.TxnStats()
	cov := ctCoverage{schedules: 1, abortable: min(1, r.abortable), unknown: min(1, r.unknown), rawFenced: min(1, r.rawFenced),
		fenced: min(1, r.fenced), timedOut: min(1, int(st.TimedOut)), concurrent: min(1, int(st.ConcurrentTransactions)),
		lostMarkers: min(1, int(st.LostMarkers)), failovers: min(1, int(st.MarkerFailovers)),
		answerFailovers: min(1, int(st.AnswerFailovers)), loadFenced: min(1, int(st.LoadFencedRetries))}
	if r.zombie {
		cov.zombie = 1
	}
	if s.kafka40 {
		cov.kafka40 = 1
	}
	if s.tv == 1 {
		cov.tv1 = 1
	}
	for _, x := range txns {
		switch {
		case x.end == ctCommitted && !strings.HasPrefix(x.name, "t"):
			cov.committed = 1
		case x.end == ctAborted:
			cov.aborted = 1
		}
	}
	return v, cov
}

// TestChaosTransactions runs LONGHAUL_CHAOS_TXN_SCHEDULES transactional
// schedules (10000 by default, 300 under -race, 100 with -short) in four
// parallel shards and reports every failing seed with its schedule; a
// run of 100 schedules or more also fails on a coverage gap
// (ctCoverage.gaps).
func TestChaosTransactions(t *testing.T) {
	total := 10000
	switch {
	case testing.Short():
		total = 100
	case raceEnabled:
		total = 300
	}
	total = envInt("LONGHAUL_CHAOS_TXN_SCHEDULES", total)
	first := uint64(envInt("LONGHAUL_CHAOS_TXN_FIRST", 1))
	if seed := os.Getenv("LONGHAUL_CHAOS_TXN_SEED"); seed != "" {
		n, err := strconv.ParseUint(seed, 10, 64)
		require.NoError(t, err)
		oneThread(t)
		s := drawTxnSchedule(n)
		t.Logf("%v", s)
		var v []string
		synctest.Test(t, func(t *testing.T) { v, _ = runTxnSchedule(t, s) })
		require.Empty(t, v, "seed %d", n)
		return
	}
	const shards = 4
	var mu sync.Mutex
	var cov ctCoverage
	failed := 0
	kinds := map[string][]uint64{}
	begin := time.Now()
	for sh := range shards {
		t.Run(fmt.Sprintf("shard%d", sh), func(t *testing.T) {
			t.Parallel()
			for i := sh; i < total; i += shards {
				seed := first + uint64(i)
				s := drawTxnSchedule(seed)
				var v []string
				var sc ctCoverage
				synctest.Test(t, func(t *testing.T) { v, sc = runTxnSchedule(t, s) })
				mu.Lock()
				cov.add(sc)
				if len(v) > 0 {
					failed++
					seen := map[string]bool{}
					for _, x := range v {
						kind := x[:max(0, strings.IndexByte(x, ':'))]
						if !seen[kind] {
							seen[kind] = true
							kinds[kind] = append(kinds[kind], seed)
						}
					}
					if failed <= 5 {
						t.Errorf("%v violations (%d): %v\nrerun: LONGHAUL_CHAOS_TXN_SEED=%d go test ./producer -run TestChaosTransactions$", s, len(v), firstN(v, 5), seed)
					}
				}
				mu.Unlock()
			}
		})
	}
	t.Cleanup(func() {
		t.Logf("%d schedules (seeds %d..%d) in %v, %d failed", total, first, first+uint64(total)-1, time.Since(begin), failed)
		for k, seeds := range kinds {
			t.Logf("  %s: %d seeds, e.g. %v", k, len(seeds), seeds[:min(8, len(seeds))])
		}
		t.Logf("coverage: %v", cov)
		if total >= 100 {
			for _, g := range cov.gaps() {
				t.Error(g)
			}
		}
	})
}
