package producer

import (
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/longhaul-kafka/longhaul/internal/broker"
)

// firstBatchSetup starts a one-partition cluster (cfg's topic "t"), has
// another producer write 5 records to it and moves the log start to 3:
// the read-back producer p's first batch goes to a log whose start is
// above 0. hook, if set, rewrites ListOffsets answers.
func firstBatchSetup(t *testing.T, cfg broker.Config, opts ...Opt) (*broker.Cluster, *Producer, *ledger, *readbackHook) {
	t.Helper()
	cfg.RTT = 20 * time.Millisecond
	cfg.Topics = []broker.TopicConfig{{Name: "t", Partitions: 1, Window: 20}}
	c, n := memCluster(t, cfg)
	q := memProducer(t, c, n, Linger(0))
	lq := newLedger("q", "t")
	produceEach(lq, q, 0, 5)
	require.True(t, lq.waitAll(time.Minute))
	require.Equal(t, int64(3), c.DeleteRecords("t", 0, 3))
	h := &readbackHook{}
	p := memProducer(t, c, n, append([]Opt{Linger(0), ReadBack(true), Hooks(h)}, opts...)...)
	return c, p, newLedger("a", "t"), h
}

// TestReadbackFirstBatch: a partition's first batch of unknown fate, on a
// log whose start (3) is above 0, is settled once fenced: K is the high
// watermark (5) a ListOffsets written ahead of the batch's first Produce
// request answered, so the read starts there, not at 0 where the log
// start would make absence unprovable (ErrReadbackLogStart). Written: the
// callback succeeds with its offset; not written: ErrNotWritten.
func TestReadbackFirstBatch(t *testing.T) {
	for _, appended := range []bool{true, false} {
		name := map[bool]string{true: "written", false: "not written"}[appended]
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c, p, l, h := firstBatchSetup(t, broker.Config{})
				failUntilTimeout(t, c, p, l, appended)
				infos := h.all()
				require.Len(t, infos, 1)
				require.Equal(t, int64(5), infos[0].From, "K: the high watermark before the first send")
				err := recordErr(t, l, 0, 0)
				if appended {
					require.NoError(t, err)
					require.Equal(t, ReadbackWritten, infos[0].Outcome)
					require.Equal(t, []int64{5}, infos[0].Offsets)
					require.Equal(t, int64(6), infos[0].Fence)
					readbackAt(t, c, infos[0])
				} else {
					require.ErrorIs(t, err, ErrNotWritten)
					require.Equal(t, ReadbackNotWritten, infos[0].Outcome)
					require.Equal(t, int64(5), infos[0].Fence)
				}
				require.NoError(t, recordErr(t, l, 0, 1))
			})
		})
	}
}

// TestReadbackFirstBatchNoK: when the ListOffsets giving a first batch's K
// fails, K stays 0 and the reason says why: an error code, TOPIC_AUTHORIZATION_FAILED
// (after which the partition sends no more ListOffsets), a broker without
// ListOffsets v4 (Kafka 2.0: Produce capped at v6). On a log whose start
// is above 0 the batch not found stays unknown (ErrReadbackLogStart, or
// ErrReadbackBudget when the byte budget ends the read first), the reason
// saying K is 0 and why.
func TestReadbackFirstBatchNoK(t *testing.T) {
	for _, tc := range []struct {
		name   string
		code   int16 // ListOffsets latest answers this
		cfg    broker.Config
		why    string
		probes int // ListOffsets latest answered, for B and C
		opts   []Opt
		reason error
	}{
		{"error code", kerr.NotLeaderForPartition.Code, broker.Config{}, "NOT_LEADER_FOR_PARTITION", 2, nil, ErrReadbackLogStart},
		{"not authorized", kerr.TopicAuthorizationFailed.Code, broker.Config{}, "TOPIC_AUTHORIZATION_FAILED", 1, nil, ErrReadbackLogStart},
		{"no v4", 0, broker.Config{ProduceMaxVersions: map[int32]int16{0: 6}}, "lacks ListOffsets v4", 0, nil, ErrReadbackLogStart},
		{"error code, byte budget", kerr.UnknownLeaderEpoch.Code, broker.Config{}, "UNKNOWN_LEADER_EPOCH", 2, []Opt{ReadBackMaxBytes(1)}, ErrReadbackBudget},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c, p, l, h := firstBatchSetup(t, tc.cfg, tc.opts...)
				var latest atomic.Int64
				c.RewriteListOffsets(func(_ int32, r *kmsg.ListOffsetsResponse) {
					sp := &r.Topics[0].Partitions[0]
					if sp.Offset < 5 {
						return // read-back's own ListOffsets earliest (3)
					}
					latest.Add(1)
					if tc.code != 0 {
						sp.ErrorCode, sp.Offset = tc.code, -1
					}
				})
				failUntilTimeout(t, c, p, l, false)
				infos := h.all()
				require.Len(t, infos, 1)
				require.Equal(t, int64(0), infos[0].From, "K stays 0")
				err := recordErr(t, l, 0, 0)
				require.True(t, IsFateUnknown(err), "%v", err)
				require.ErrorIs(t, err, tc.reason)
				require.ErrorIs(t, infos[0].Reason, tc.reason)
				require.True(t, strings.Contains(err.Error(), "K 0") && strings.Contains(err.Error(), tc.why), "%v", err)
				require.Equal(t, int64(tc.probes), latest.Load(), "ListOffsets latest answered")
				require.NoError(t, recordErr(t, l, 0, 1))
			})
		})
	}
}

// TestReadbackWaitsForK: a fenced batch whose ListOffsets has not been
// answered is not read (K unknown): startScan waits, and settleDue does
// not give up on it at its deadline; the answer starts the read, from the
// high watermark answered.
func TestReadbackWaitsForK(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, p, _ := warmWindow20(t, 1, Linger(0), ReadBack(true))
		type seen struct {
			waiting, scanning bool
			fence             int64
			kept              int
			resumed, started  bool
			from              int64
		}
		ch := make(chan seen)
		p.post(func() {
			s := p.s
			ps := p.acc.topics["t"].ts.parts[0]
			pr := &kProbe{}
			b := &batch{part: ps, attempts: 1, kProbe: pr}
			j := &settleJob{b: b, fence: -1, since: time.Now(), deadline: time.Now()}
			s.settling = append(s.settling, j)
			s.startScan(j, 7)
			var v seen
			v.waiting, v.scanning, v.fence = j.waitK, j.scanning, j.fence
			s.settleDue(time.Now().Add(time.Hour))
			v.kept = len(s.settling)
			pr.done, pr.hw = true, 3
			s.kAnswered(nil, nil, nil, nil)
			v.resumed, v.started, v.from = !j.waitK, j.scanning, j.from
			ch <- v
		})
		v := <-ch
		require.True(t, v.waiting && v.scanning, "waiting for K")
		require.Equal(t, int64(7), v.fence)
		require.Equal(t, 1, v.kept, "not given up at its deadline")
		require.True(t, v.resumed && v.started, "the answer started the read")
		require.Equal(t, int64(3), v.from, "K: the answer")
		require.Eventually(t, func() bool {
			n := make(chan int)
			p.post(func() { n <- len(p.s.settling) })
			return <-n == 0
		}, time.Minute, 10*time.Millisecond, "the read ended (its deadline had passed)")
	})
}
