package producer

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/longhaul-kafka/longhaul/internal/broker"
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
	txns[5].records[1][0].err = kerr.ErrorForCode(kerr.InvalidRecord.Code)
	e := func(name string, seq int, off int64) ctLogEntry { return ctLogEntry{txn: name, seq: seq, offset: off} }
	l := ctLog{
		records: map[int32][]ctLogEntry{
			0: {e("a0.0", 0, 0), e("b0.0", 0, 2), e("a0.0", 1, 3), e("a0.0", 2, 4)},
			1: {e("b0.0", 0, 0), e("a0.0", 0, 1), e("a0.0", 1, 2)},
		},
		offsets: map[int32]int64{1: 10, 3: 30},
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
// callback; a hanging transaction; a lenient start.
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
		{"lenient start", "gap: the broker took 2 transaction start(s)", func(_ []*ctTxn, l *ctLog) {
			l.lenientStarts = 2
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
