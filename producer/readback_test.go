package producer

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/longhaul-kafka/longhaul/internal/broker"
	"github.com/longhaul-kafka/longhaul/protocol"
)

// readbackHook keeps every ReadbackInfo it is given.
type readbackHook struct {
	mu    sync.Mutex
	infos []ReadbackInfo
}

func (h *readbackHook) OnReadback(i ReadbackInfo) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.infos = append(h.infos, i)
}

func (h *readbackHook) all() []ReadbackInfo {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]ReadbackInfo(nil), h.infos...)
}

// readbackAt checks info against c's log: a batch with its identity
// starts at each of its offsets and holds its records.
func readbackAt(t *testing.T, c *broker.Cluster, info ReadbackInfo) {
	t.Helper()
	recs := c.Records(info.Topic, info.Partition)
	for _, x := range info.Offsets {
		n := 0
		for _, r := range recs {
			if r.Offset >= x && r.Offset < x+int64(info.Records) {
				require.Equal(t, info.ProducerID, r.ProducerID, "offset %d", r.Offset)
				require.Equal(t, info.ProducerEpoch, r.ProducerEpoch, "offset %d", r.Offset)
				require.Equal(t, info.BaseSequence+int32(r.Offset-x), r.Sequence, "offset %d", r.Offset)
				n++
			}
		}
		require.Equal(t, info.Records, n, "records of the batch at offset %d", x)
	}
}

// failUntilTimeout makes batch B of partition 0 fail with its fate unknown
// after delivery.timeout.ms: its first attempt is answered REQUEST_TIMED_OUT,
// appended first when appended is set, and every retry is refused with
// REQUEST_TIMED_OUT unappended. Then a record C is produced, whose batch
// (under the bumped epoch) is the fence.
func failUntilTimeout(t *testing.T, c *broker.Cluster, p *Producer, l *ledger, appended bool) {
	t.Helper()
	mode := broker.Refuse
	if appended {
		mode = broker.AppendThenFail
	}
	c.ScriptAnswers("t", 0, broker.Answer{Code: kerr.RequestTimedOut.Code, Mode: mode})
	c.InjectError("t", 0, kerr.RequestTimedOut.Code, 100000)
	l.produce(p, 0, 1, 100) // B
	time.Sleep(p.cfg.deliveryTimeout + time.Second)
	c.InjectError("t", 0, 0, 0)
	l.produce(p, 0, 1, 100) // C
	require.True(t, l.waitAll(time.Minute), "callbacks")
}

// TestReadbackSettlesWritten: a batch written although its attempts were
// answered with errors until delivery.timeout.ms is found at its offset
// once the next batch is acknowledged under the bumped epoch: its record's
// callback succeeds with that offset, and the callback of the record after
// it waited for it (order kept).
func TestReadbackSettlesWritten(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := &readbackHook{}
		c, p, l := warmWindow20(t, 1, Linger(0), ReadBack(true), Hooks(h))
		failUntilTimeout(t, c, p, l, true)
		const b = 200 // warmUp's records come first
		require.NoError(t, recordErr(t, l, 0, b), "B was written")
		require.NoError(t, recordErr(t, l, 0, b+1))
		infos := h.all()
		require.Len(t, infos, 1)
		require.Equal(t, ReadbackWritten, infos[0].Outcome)
		require.Len(t, infos[0].Offsets, 1)
		require.Equal(t, int64(200), infos[0].From, "K: the end of the last acknowledgement before B was sent")
		require.Equal(t, int64(201), infos[0].Fence, "Y: C, right after B")
		readbackAt(t, c, infos[0])
		require.Equal(t, ReadbackStats{Written: 1}, p.Stats().Readback)
		requireClean(t, c, "t", 1, l)
		require.Equal(t, []int{b, b + 1}, l.order[0][b:], "callback order")
	})
}

// TestReadbackSettlesNotWritten: a batch whose attempts were all refused
// unappended is found absent once fenced: ErrNotWritten, without
// FateUnknown; nothing of it is in the log.
func TestReadbackSettlesNotWritten(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := &readbackHook{}
		c, p, l := warmWindow20(t, 1, Linger(0), ReadBack(true), Hooks(h))
		failUntilTimeout(t, c, p, l, false)
		const b = 200
		err := recordErr(t, l, 0, b)
		require.ErrorIs(t, err, ErrNotWritten)
		require.ErrorIs(t, err, ErrDeliveryTimeout, "the failure that made the fate unknown is kept")
		require.False(t, IsFateUnknown(err))
		require.NoError(t, recordErr(t, l, 0, b+1))
		infos := h.all()
		require.Len(t, infos, 1)
		require.Equal(t, ReadbackNotWritten, infos[0].Outcome)
		require.Equal(t, ReadbackStats{NotWritten: 1}, p.Stats().Readback)
		requireClean(t, c, "t", 1, l)
	})
}

// TestReadbackOff: by default a batch of unknown fate is called back at
// once with FateUnknown, and nothing is read back.
func TestReadbackOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := &readbackHook{}
		c, p, l := warmWindow20(t, 1, Linger(0), Hooks(h))
		failUntilTimeout(t, c, p, l, true)
		require.True(t, IsFateUnknown(recordErr(t, l, 0, 200)))
		require.Empty(t, h.all())
		require.Equal(t, ReadbackStats{}, p.Stats().Readback)
	})
}

// TestReadbackUnknownReasons: each reason read-back cannot prove absence
// for leaves the fate unknown, with that reason in the error.
func TestReadbackUnknownReasons(t *testing.T) {
	cases := []struct {
		name     string
		setup    func(c *broker.Cluster)
		opts     []Opt
		appended bool // B is in the log
		foreign  int  // batches another producer writes to the partition before B
		reason   error
		counted  func(ReadbackStats) int64
	}{
		{"not authorized", func(c *broker.Cluster) {
			c.RewriteFetch(func(_ int32, r *kmsg.FetchResponse) {
				r.Topics[0].Partitions[0].ErrorCode = kerr.TopicAuthorizationFailed.Code
			})
		}, nil, true, 0, ErrReadbackNotAuthorized, func(s ReadbackStats) int64 { return s.NotAuthorized }},
		{"log start past K", func(c *broker.Cluster) {
			c.RewriteFetch(func(_ int32, r *kmsg.FetchResponse) { r.Topics[0].Partitions[0].LogStartOffset = 250 })
		}, nil, false, 0, ErrReadbackLogStart, func(s ReadbackStats) int64 { return s.LogStart }},
		{"byte budget", nil, []Opt{ReadBackMaxBytes(1000)}, true, 50, ErrReadbackBudget, func(s ReadbackStats) int64 { return s.Budget }},
		{"time budget", func(c *broker.Cluster) {
			// Every read answers with nothing: the fence is never reached.
			c.RewriteFetch(func(_ int32, r *kmsg.FetchResponse) { r.Topics[0].Partitions[0].RecordBatches = nil })
		}, nil, true, 0, ErrReadbackBudget, func(s ReadbackStats) int64 { return s.Budget }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c, n := memCluster(t, broker.Config{RTT: 20 * time.Millisecond,
					Topics: []broker.TopicConfig{{Name: "t", Partitions: 1, Window: 20}}})
				p := memProducer(t, c, n, append([]Opt{Linger(0), ReadBack(true)}, tc.opts...)...)
				l := newLedger("a", "t")
				warmUp(t, p, l, 0)
				ls := []*ledger{l}
				if tc.foreign > 0 {
					q := memProducer(t, c, n, Linger(0))
					lq := newLedger("q", "t")
					produceEach(lq, q, 0, tc.foreign)
					require.True(t, lq.waitAll(time.Minute))
					ls = append(ls, lq)
				}
				if tc.setup != nil {
					tc.setup(c)
				}
				failUntilTimeout(t, c, p, l, tc.appended)
				err := recordErr(t, l, 0, 200)
				require.True(t, IsFateUnknown(err), "%v", err)
				require.ErrorIs(t, err, tc.reason)
				require.ErrorIs(t, err, ErrDeliveryTimeout)
				st := p.Stats().Readback
				require.Equal(t, int64(1), st.Unknown)
				require.Equal(t, int64(1), tc.counted(st))
				requireClean(t, c, "t", 1, ls...)
			})
		})
	}
}

// TestReadbackCompactedTopic: on a compacted topic absence proves nothing
// (the cleaner may have removed the batch): the fate stays unknown; a
// batch found there is still settled as written.
func TestReadbackCompactedTopic(t *testing.T) {
	for _, appended := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			c, n := memCluster(t, broker.Config{RTT: 20 * time.Millisecond,
				Topics: []broker.TopicConfig{{Name: "t", Partitions: 1, Window: 20, CleanupPolicy: "compact"}}})
			p := memProducer(t, c, n, Linger(0), ReadBack(true))
			l := newLedger("a", "t")
			warmUp(t, p, l, 0)
			failUntilTimeout(t, c, p, l, appended)
			err := recordErr(t, l, 0, 200)
			if appended {
				require.NoError(t, err)
				return
			}
			require.True(t, IsFateUnknown(err), "%v", err)
			require.ErrorIs(t, err, ErrReadbackCompacted)
			require.Equal(t, int64(1), p.Stats().Readback.Compacted)
		})
	}
}

// TestReadbackNoFence: with nothing more produced to the partition no
// fence comes; after longhaul.readback.timeout.ms, or delivery.timeout.ms
// when that is shorter, the record is called back with its fate unknown
// (ErrReadbackNoFence).
func TestReadbackNoFence(t *testing.T) {
	for _, tc := range []struct{ timeout, waited time.Duration }{{3 * time.Second, 3 * time.Second}, {time.Hour, 6 * time.Second}} {
		synctest.Test(t, func(t *testing.T) {
			c, p, l := warmWindow20(t, 1, Linger(0), ReadBack(true), ReadBackTimeout(tc.timeout))
			c.InjectError("t", 0, kerr.RequestTimedOut.Code, 100000)
			l.produce(p, 0, 1, 100)
			start := time.Now()
			require.True(t, l.waitAll(time.Hour))
			err := recordErr(t, l, 0, 200)
			require.True(t, IsFateUnknown(err), "%v", err)
			require.ErrorIs(t, err, ErrReadbackNoFence)
			// delivery.timeout.ms (6 s) to fail, then the wait.
			require.Equal(t, p.cfg.deliveryTimeout+tc.waited, time.Since(start).Truncate(time.Second))
			require.Equal(t, int64(1), p.Stats().Readback.NoFence)
		})
	}
}

// TestReadbackConfig: the budgets must be positive; the switch is a
// boolean.
func TestReadbackConfig(t *testing.T) {
	for _, o := range []Opt{ReadBackTimeout(0), ReadBackMaxBytes(0), Property("longhaul.readback.enable", "maybe")} {
		_, err := New(BootstrapServers("127.0.0.1:1"), o)
		require.ErrorIs(t, err, ErrInvalidConfig)
	}
	p, err := New(BootstrapServers("127.0.0.1:1"))
	require.NoError(t, err)
	defer p.Close(t.Context())
	require.False(t, p.cfg.readback, "off by default")
	require.Equal(t, int64(64<<20), p.cfg.readbackMaxBytes)
	require.Equal(t, 30*time.Second, p.cfg.readbackTimeout)
}

// TestReadbackClose: Close waits for a read-back as for any record, and
// when its ctx ends first the record is called back with its fate unknown
// and ErrClosed.
func TestReadbackClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, p, l := warmWindow20(t, 1, Linger(0), ReadBack(true))
		c.InjectError("t", 0, kerr.RequestTimedOut.Code, 100000)
		l.produce(p, 0, 1, 100)
		time.Sleep(p.cfg.deliveryTimeout + time.Second)
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		require.ErrorIs(t, p.Close(ctx), context.DeadlineExceeded, "Close waits for the read-back as long as ctx lets it")
		require.True(t, l.waitAll(time.Minute))
		err := recordErr(t, l, 0, 200)
		require.True(t, IsFateUnknown(err), "%v", err)
		require.ErrorIs(t, err, ErrClosed)
		require.Equal(t, int64(1), p.Stats().Readback.Unknown)
	})
}

// TestReadbackNotInTransactions: a transactional producer never holds a
// record of unknown fate for read-back; its transaction becomes
// abortable instead.
func TestReadbackNotInTransactions(t *testing.T) {
	var bb protocol.BatchBuilder
	bb.Append(1, nil, []byte("v"), nil)
	raw, err := bb.Build(nil, protocol.BatchHeader{ProducerID: 1, BaseSequence: 0})
	require.NoError(t, err)
	sent := func() *batch { return &batch{attempts: 1, bytes: raw, part: &partitionState{topic: &topicState{}}} }
	p, err := New(BootstrapServers("127.0.0.1:1"), TransactionalID("tx"), ReadBack(true))
	require.NoError(t, err)
	defer p.Close(t.Context())
	require.False(t, p.s.settleLater(sent(), ErrDeliveryTimeout), "transactional")
	// The same batch is held by an idempotent producer (settleLater only
	// lists it; nothing else runs on it here).
	q, err := New(BootstrapServers("127.0.0.1:1"), ReadBack(true))
	require.NoError(t, err)
	done := make(chan bool)
	q.post(func() { done <- q.s.settleLater(sent(), ErrDeliveryTimeout); q.s.settling = nil })
	require.True(t, <-done, "idempotent")
	q.Close(t.Context())
}
