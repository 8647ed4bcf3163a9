package producer

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/longhaul-kafka/longhaul/internal/broker"
)

// recorder implements every Hook* interface and keeps what it saw, with the
// goroutine each call ran on.
type recorder struct {
	mu         sync.Mutex
	sent       []BatchInfo
	acked      []BatchInfo
	offsets    []int64
	rejected   []rejection
	done       []doneRecord
	windows    []windowChange
	ids        [][4]int64
	connects   []connectEvent
	disconnect []connectEvent
	throttles  []time.Duration
	senderGIDs map[uint64]int // goroutine ids of the sender-side calls
	order      []string       // "done:<value>" and "cb:<value>", in call order
}

type rejection struct {
	info     BatchInfo
	err      error
	retrying bool
}

type doneRecord struct {
	r   *Record
	err error
	gid uint64
}

type windowChange struct {
	topic     string
	partition int32
	old, new  int
	why       WindowCause
}

type connectEvent struct {
	node int32
	addr string
	err  error
}

func newRecorder() *recorder { return &recorder{senderGIDs: make(map[uint64]int)} }

// onSender notes the goroutine of a sender-side call; mu is held.
func (h *recorder) onSender() { h.senderGIDs[goroutineID()]++ }

func (h *recorder) OnBatchSent(b BatchInfo) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.onSender()
	h.sent = append(h.sent, b)
}

func (h *recorder) OnBatchAcked(b BatchInfo, baseOffset int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.onSender()
	h.acked = append(h.acked, b)
	h.offsets = append(h.offsets, baseOffset)
}

func (h *recorder) OnBatchRejected(b BatchInfo, err error, retrying bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.onSender()
	h.rejected = append(h.rejected, rejection{b, err, retrying})
}

func (h *recorder) OnRecordDone(r *Record, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.done = append(h.done, doneRecord{r, err, goroutineID()})
	h.order = append(h.order, "done:"+string(r.Value))
}

func (h *recorder) OnWindowChanged(topic string, partition int32, old, new int, why WindowCause) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.onSender()
	h.windows = append(h.windows, windowChange{topic, partition, old, new, why})
}

func (h *recorder) OnProducerID(oldID int64, oldEpoch int16, id int64, epoch int16) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.onSender()
	h.ids = append(h.ids, [4]int64{oldID, int64(oldEpoch), id, int64(epoch)})
}

func (h *recorder) OnBrokerConnect(node int32, addr string, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.onSender()
	h.connects = append(h.connects, connectEvent{node, addr, err})
}

func (h *recorder) OnBrokerDisconnect(node int32, addr string, cause error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.onSender()
	h.disconnect = append(h.disconnect, connectEvent{node, addr, cause})
}

func (h *recorder) OnThrottle(node int32, d time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.onSender()
	h.throttles = append(h.throttles, d)
}

// windowsOf returns the window changes seen so far.
func (h *recorder) windowsOf() []windowChange {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]windowChange(nil), h.windows...)
}

// produceN produces n one-record-per-call records to topic/partition,
// values "<prefix><i>", and requires them all written.
func produceN(t *testing.T, p *Producer, topic string, partition int32, prefix string, n int) []*Record {
	t.Helper()
	recs := make([]*Record, n)
	for i := range recs {
		recs[i] = &Record{Topic: topic, Value: []byte(prefix + string(rune('a'+i%26)))}
		recs[i].SetPartition(partition)
	}
	require.NoError(t, p.ProduceSync(context.Background(), recs...).FirstErr())
	return recs
}

// TestHooksBatchesRecordsWindowIdentity: on a clean run every hook reports
// what happened, with the values the producer and broker agree on.
func TestHooksBatchesRecordsWindowIdentity(t *testing.T) {
	c := startCluster(t, broker.Config{Topics: []broker.TopicConfig{{Name: "t", Partitions: 1, Window: 20}}})
	h := newRecorder()
	p := newTestProducer(t, c, Hooks(h))

	var cbMu sync.Mutex
	var cbGID uint64
	const n = 40
	var wg sync.WaitGroup
	for i := range n {
		r := &Record{Topic: "t", Value: []byte{byte('A' + i%26), byte('0' + i/26)}}
		r.SetPartition(0)
		wg.Add(1)
		p.Produce(context.Background(), r, func(r *Record, err error) {
			defer wg.Done()
			assert.NoError(t, err)
			cbMu.Lock()
			cbGID = goroutineID()
			cbMu.Unlock()
			h.mu.Lock()
			h.order = append(h.order, "cb:"+string(r.Value))
			h.mu.Unlock()
		})
	}
	wg.Wait()
	require.NoError(t, p.Flush(context.Background()))
	st := p.Stats()

	h.mu.Lock()
	defer h.mu.Unlock()
	// Identity: the first InitProducerId, from nothing.
	require.Len(t, h.ids, 1)
	assert.Equal(t, [4]int64{-1, -1, st.ProducerID, int64(st.ProducerEpoch)}, h.ids[0])
	// Connections: node 0 at the cluster's address, no error.
	require.NotEmpty(t, h.connects)
	assert.Equal(t, connectEvent{0, c.Addr(), nil}, h.connects[0])
	assert.Empty(t, h.disconnect)
	assert.Empty(t, h.rejected)
	assert.Empty(t, h.throttles)

	// Batches: every batch sent once, acked once, the records add up, the
	// offsets are the log's.
	require.NotEmpty(t, h.sent)
	require.Len(t, h.acked, len(h.sent), "one ack per attempt")
	recs, bytes := 0, 0
	next := int64(0)
	for i, b := range h.acked {
		assert.Equal(t, "t", b.Topic)
		assert.Equal(t, int32(0), b.Partition)
		assert.Equal(t, int32(0), b.Node)
		assert.Equal(t, 1, b.Attempt)
		assert.Equal(t, int32(next), b.BaseSequence, "sequence of batch %d", i)
		assert.Equal(t, next, h.offsets[i], "offset of batch %d", i)
		assert.Positive(t, b.Bytes)
		assert.GreaterOrEqual(t, b.Age, time.Duration(0))
		assert.Equal(t, 20, b.Window, "the window once this ack is applied")
		assert.Equal(t, h.sent[i].Records, b.Records)
		assert.Equal(t, h.sent[i].Bytes, b.Bytes)
		assert.GreaterOrEqual(t, b.Age, h.sent[i].Age, "acked after sent")
		recs += b.Records
		bytes += b.Bytes
		next += int64(b.Records)
	}
	assert.Equal(t, n, recs)
	assert.Equal(t, int64(n), st.RecordsSent)
	assert.Equal(t, 5, h.sent[0].Window, "the first batch goes out before anything is learned")
	assert.Len(t, c.Records("t", 0), n)

	// Window: learned once, 5 to 20.
	assert.Equal(t, []windowChange{{"t", 0, 5, 20, WindowLearned}}, h.windows)

	// Records: one done per record, success, on the callback goroutine,
	// each just before its callback.
	require.Len(t, h.done, n)
	for _, d := range h.done {
		assert.NoError(t, d.err)
		assert.Equal(t, cbGID, d.gid, "OnRecordDone runs on the callback goroutine")
	}
	require.Len(t, h.order, 2*n)
	for i := 0; i < len(h.order); i += 2 {
		assert.Equal(t, "done:"+h.order[i+1][len("cb:"):], h.order[i], "OnRecordDone comes just before its callback")
	}
	// Every other hook ran on one goroutine, the sender, not the callback
	// goroutine.
	require.Len(t, h.senderGIDs, 1)
	for gid := range h.senderGIDs {
		assert.NotEqual(t, cbGID, gid)
	}
}

// TestHooksWindowCauses: each cause of a window change is reported with
// the old and new values: leader change, reconnect, idle re-arm, bump.
func TestHooksWindowCauses(t *testing.T) {
	// Virtual time: the idle re-arm must fire where the test sleeps past it
	// and nowhere else, which a real clock on a loaded machine cannot promise.
	synctest.Test(t, func(t *testing.T) {
		c := virtualCluster(t, broker.Config{Nodes: 2, Topics: []broker.TopicConfig{{Name: "t", Partitions: 1, Window: 20}}})
		h := newRecorder()
		p := newTestProducer(t, c, Hooks(h), IdleRearm(200*time.Millisecond))
		learned := windowChange{"t", 0, 5, 20, WindowLearned}

		produceN(t, p, "t", 0, "a", 3)
		require.Equal(t, []windowChange{learned}, h.windowsOf())

		// Leader change: the partition moves to node 1 and starts at 5.
		require.NoError(t, c.MoveLeader("t", 0, 1))
		produceN(t, p, "t", 0, "b", 3)
		require.Equal(t, []windowChange{learned, {"t", 0, 20, 5, WindowLeaderChange}, learned}, h.windowsOf())

		// Reconnect: node 1 closes its connections; the next batch finds the
		// connection closed and dials again.
		c.DropConnections(1)
		produceN(t, p, "t", 0, "c", 3)
		got := h.windowsOf()
		require.Equal(t, []windowChange{{"t", 0, 20, 5, WindowReconnect}, learned}, got[3:])

		// Idle: no ack for longer than longhaul.idle.rearm.ms.
		time.Sleep(300 * time.Millisecond)
		produceN(t, p, "t", 0, "d", 3)
		got = h.windowsOf()
		require.Equal(t, []windowChange{{"t", 0, 20, 5, WindowIdle}, learned}, got[5:])

		// Bump: OUT_OF_ORDER_SEQUENCE_NUMBER on the oldest batch (the broker
		// lost our state) bumps the epoch; every window starts again.
		c.InjectError("t", 0, kerr.OutOfOrderSequenceNumber.Code, 1)
		produceN(t, p, "t", 0, "e", 1)
		got = h.windowsOf()
		require.Equal(t, []windowChange{{"t", 0, 20, 5, WindowBump}, learned}, got[7:])

		h.mu.Lock()
		defer h.mu.Unlock()
		require.Len(t, h.ids, 2)
		first, bump := h.ids[0], h.ids[1]
		assert.Equal(t, [4]int64{first[2], first[3], first[2], first[3] + 1}, bump, "same id, epoch + 1")
		// The disconnect names node 1, its address and why.
		require.NotEmpty(t, h.disconnect)
		assert.Equal(t, int32(1), h.disconnect[0].node)
		assert.Equal(t, c.Addrs()[1], h.disconnect[0].addr)
		assert.Error(t, h.disconnect[0].err)
		// The leader move was reported as a rejected attempt, to be retried.
		var notLeader, oooSeq int
		for _, r := range h.rejected {
			switch {
			case errors.Is(r.err, kerr.NotLeaderForPartition):
				notLeader++
				assert.True(t, r.retrying)
				assert.Equal(t, int32(0), r.info.Node, "the attempt went to the old leader")
			case errors.Is(r.err, kerr.OutOfOrderSequenceNumber):
				oooSeq++
				assert.True(t, r.retrying)
			}
		}
		assert.Positive(t, notLeader)
		assert.Equal(t, 1, oooSeq)
		assert.Equal(t, len(h.sent), len(h.acked)+len(h.rejected), "every attempt ends once")
	})
}

// TestHooksFailuresThrottleClose: a non-retriable error, a throttled
// response, and batches in flight at Close.
func TestHooksFailuresThrottleClose(t *testing.T) {
	c := startCluster(t, broker.Config{Topics: []broker.TopicConfig{{Name: "t", Partitions: 1, Window: 20}}})
	h := newRecorder()
	p, err := New(BootstrapServers(c.Addr()), Linger(time.Millisecond), RetryBackoff(5*time.Millisecond), Hooks(h))
	require.NoError(t, err)

	produceN(t, p, "t", 0, "a", 1)

	// INVALID_RECORD fails the batch: reported as not retrying, and the
	// record's done carries the error its callback gets.
	c.InjectError("t", 0, kerr.InvalidRecord.Code, 1)
	r := &Record{Topic: "t", Value: []byte("bad")}
	r.SetPartition(0)
	res := p.ProduceSync(context.Background(), r)
	require.ErrorIs(t, res.FirstErr(), kerr.InvalidRecord)

	// Throttle: reported per ProduceResponse with the broker's value.
	c.SetProduceThrottle(0, 250*time.Millisecond)
	produceN(t, p, "t", 0, "b", 1)
	c.SetProduceThrottle(0, 0)

	// Close while a batch is in flight (the node stalls).
	c.Stall(0, 10*time.Second)
	stuck := &Record{Topic: "t", Value: []byte("stuck")}
	stuck.SetPartition(0)
	stuckErr := make(chan error, 1)
	p.Produce(context.Background(), stuck, func(_ *Record, err error) { stuckErr <- err })
	waitFor(t, "the batch to be sent", func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		return len(h.sent) == 4
	})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	p.Close(ctx)
	require.ErrorIs(t, <-stuckErr, ErrClosed)

	h.mu.Lock()
	defer h.mu.Unlock()
	require.Len(t, h.rejected, 2)
	assert.ErrorIs(t, h.rejected[0].err, kerr.InvalidRecord)
	assert.False(t, h.rejected[0].retrying)
	assert.Equal(t, 1, h.rejected[0].info.Records)
	assert.ErrorIs(t, h.rejected[1].err, ErrClosed)
	assert.False(t, h.rejected[1].retrying)
	assert.Equal(t, len(h.sent), len(h.acked)+len(h.rejected), "every attempt ends once, Close included")

	assert.Equal(t, []time.Duration{250 * time.Millisecond}, h.throttles)

	var bad, closed int
	for _, d := range h.done {
		switch string(d.r.Value) {
		case "bad":
			bad++
			assert.ErrorIs(t, d.err, kerr.InvalidRecord)
		case "stuck":
			closed++
			assert.ErrorIs(t, d.err, ErrClosed)
		default:
			assert.NoError(t, d.err)
		}
	}
	assert.Equal(t, 1, bad)
	assert.Equal(t, 1, closed)
	assert.Len(t, h.done, 4)

	require.NotEmpty(t, h.disconnect)
	assert.ErrorIs(t, h.disconnect[len(h.disconnect)-1].err, ErrClosed)
	ready := 0
	for _, e := range h.connects {
		if e.err == nil {
			ready++
		}
	}
	assert.Equal(t, ready, len(h.disconnect), "one disconnect per ready connection")
}

// TestHooksConnectFailure: a failed connection attempt is reported with
// its error, then the successful one.
func TestHooksConnectFailure(t *testing.T) {
	c := startCluster(t, broker.Config{Nodes: 2, Topics: []broker.TopicConfig{{Name: "t", Partitions: 2}}})
	h := newRecorder()
	refused := errors.New("test: dial refused")
	var mu sync.Mutex
	refuse := true
	node1 := c.Addrs()[1]
	p := newTestProducer(t, c, Hooks(h), Dialer(func(ctx context.Context, network, addr string) (net.Conn, error) {
		mu.Lock()
		fail := refuse && addr == node1
		refuse = refuse && !fail
		mu.Unlock()
		if fail {
			return nil, refused
		}
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}))
	produceN(t, p, "t", 1, "a", 1) // partition 1 is led by node 1
	h.mu.Lock()
	defer h.mu.Unlock()
	var toNode1 []connectEvent
	for _, e := range h.connects {
		if e.node == 1 {
			toNode1 = append(toNode1, e)
		}
	}
	require.Len(t, toNode1, 2)
	assert.ErrorIs(t, toNode1[0].err, refused)
	assert.Equal(t, node1, toNode1[0].addr)
	assert.NoError(t, toNode1[1].err)
}

// TestHooksRejectsUselessValue: a value implementing no hook is a
// configuration error, not silently ignored.
func TestHooksRejectsUselessValue(t *testing.T) {
	_, err := New(BootstrapServers("127.0.0.1:1"), Hooks(struct{}{}))
	var ce *ConfigError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, "hooks", ce.Property)
}

// TestWindowCauseString: every cause has its documented name.
func TestWindowCauseString(t *testing.T) {
	for c, want := range map[WindowCause]string{
		WindowLearned: "learned", WindowLeaderChange: "leader change", WindowReconnect: "reconnect",
		WindowIdle: "idle", WindowBump: "bump", 0: "unknown",
	} {
		assert.Equal(t, want, c.String())
	}
}

// TestHookDispatchBuildsNothingUnsubscribed: an event no hook is
// registered for, and the client metrics push not subscribed to metrics,
// returns before anything describes it. The batch here has no partition
// and the sender no producer, so building a BatchInfo or a RequestInfo
// (which reads the partition's and the node's limits) would panic; with a
// hook registered or the push subscribed, the same call builds them.
func TestHookDispatchBuildsNothingUnsubscribed(t *testing.T) {
	s := &sender{}
	b := &batch{attempts: 1, records: make([]pendingRecord, 3)}
	sr := &sentRequest{node: &nodeState{id: 0}, batches: []*batch{b}}
	tel := &telemetry{nodeLatency: make(map[int32]*telemetryStat)}
	for _, hs := range []*hookSet{{}, {tel: tel}} {
		assert.NotPanics(t, func() {
			hs.requestSent(s, sr)
			hs.batchAcked(s, 0, b, 0)
			hs.batchRejected(s, 0, b, errors.New("x"), true)
			hs.requestDone(s, sr.node, time.Millisecond, nil)
			hs.throttled(0, time.Millisecond)
		})
	}
	assert.Equal(t, telemetryStat{}, tel.queueTime, "nothing handed to an unsubscribed push")
	assert.Equal(t, telemetryStat{}, tel.reqLatency)
	assert.Equal(t, int64(3), tel.retries.Load(), "the running total counts")

	// Subscribed: the figures are taken, without a BatchInfo (the
	// partition-less batch goes through).
	tel.subscribed(true)
	hs := &hookSet{tel: tel}
	assert.NotPanics(t, func() {
		hs.requestSent(s, sr)
		hs.requestDone(s, sr.node, time.Millisecond, nil)
		hs.throttled(0, time.Millisecond)
	})
	assert.Equal(t, int64(1), tel.queueTime.n)
	assert.Equal(t, int64(1), tel.reqLatency.n)
	assert.Equal(t, 1.0, tel.throttle.max)
	// A user hook makes the dispatch describe the batch.
	hs.sent = []HookBatchSent{newRecorder()}
	assert.Panics(t, func() { hs.requestSent(s, sr) })
}

// orderHook notes its name in a shared list at each OnBatchSent.
type orderHook struct {
	name string
	mu   *sync.Mutex
	log  *[]string
}

func (h orderHook) OnBatchSent(BatchInfo) {
	h.mu.Lock()
	defer h.mu.Unlock()
	*h.log = append(*h.log, h.name)
}

// TestHooksCalledInOrderGiven: hooks run in the order given, and a
// repeated Hooks option adds to the list (it replaces nothing).
func TestHooksCalledInOrderGiven(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, n := memCluster(t, broker.Config{Topics: []broker.TopicConfig{{Name: "t", Partitions: 1}}})
		var mu sync.Mutex
		var log []string
		h := func(name string) orderHook { return orderHook{name, &mu, &log} }
		p := memProducer(t, c, n, Hooks(h("a"), h("b")), Hooks(h("c")))
		require.NoError(t, p.ProduceSync(t.Context(), toPartition("t", 0, []byte("one"))).FirstErr())
		require.NoError(t, p.ProduceSync(t.Context(), toPartition("t", 0, []byte("two"))).FirstErr())
		mu.Lock()
		defer mu.Unlock()
		assert.Equal(t, []string{"a", "b", "c", "a", "b", "c"}, log)
	})
}
