package producer

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
	"unsafe"

	"github.com/longhaul-kafka/longhaul/inflight"
	"github.com/longhaul-kafka/longhaul/internal/broker"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Issue 20, keyed records over 1,000 partitions: a batch opens every few
// records, and each sender pass walked every partition under acc.mu.
// These count what a pass costs, not how long it takes.

// newBatchWakeups opens a batch on each of 200 partitions, one at a time,
// at one instant of virtual time, letting the sender settle after each, and
// returns how often the sender loop ran meanwhile.
func newBatchWakeups(t *testing.T) int64 {
	const parts = 200
	var loops int64
	synctest.Test(t, func(t *testing.T) {
		c, n := memCluster(t, broker.Config{Topics: []broker.TopicConfig{{Name: "t", Partitions: parts}}})
		p := memProducer(t, c, n, Linger(50*time.Millisecond))
		l := newLedger("a", "t")
		for part := range int32(parts) {
			l.produce(p, part, 1, 10)
		}
		require.True(t, l.waitAll(time.Minute), "warm-up")
		time.Sleep(time.Second)
		l0 := p.s.probe.loops.Load()
		for part := range int32(parts) {
			l.produce(p, part, 1, 10)
			synctest.Wait()
		}
		loops = p.s.probe.loops.Load() - l0
		t.Logf("sender loop iterations for %d new batches within one linger: %d", parts, loops)
		require.True(t, l.waitAll(time.Minute))
		require.Empty(t, l.failures())
	})
	return loops
}

// TestNewBatchDoesNotWakeSenderWithTimerSet: a new batch wakes the sender
// only when the sender would not wake by the batch's linger deadline anyway
// (wakeForLinger): here the first batch wakes it, and the 199 opened after
// it, whose linger ends no earlier than the timer it then set, do not. Every
// batch still goes out (the ledger). Negative control: at commit 1a00859
// (knob wakeEveryBatch), TestNewBatchDoesNotWakeSenderNegativeControl.
func TestNewBatchDoesNotWakeSenderWithTimerSet(t *testing.T) {
	require.LessOrEqual(t, newBatchWakeups(t), int64(10), "one wake-up, not one per batch")
}

// expireWalksUnderLoad produces one record a millisecond over 100
// partitions for two seconds of virtual time (open batches all along, each
// sent after its 5 ms linger) and returns the sender's loop iterations and
// expire's walks over the partitions in that time.
func expireWalksUnderLoad(t *testing.T) (loops, walks int64) {
	const parts = 100
	synctest.Test(t, func(t *testing.T) {
		c, n := memCluster(t, broker.Config{RTT: time.Millisecond, Topics: []broker.TopicConfig{{Name: "t", Partitions: parts}}})
		p := memProducer(t, c, n, Linger(5*time.Millisecond), DeliveryTimeout(30*time.Second), RequestTimeout(10*time.Second))
		l := newLedger("a", "t")
		for part := range int32(parts) {
			l.produce(p, part, 1, 10)
		}
		require.True(t, l.waitAll(time.Minute), "warm-up")
		l0, w0 := p.s.probe.loops.Load(), p.s.probe.expireWalks.Load()
		for i := range 2000 {
			l.produce(p, int32(i%parts), 1, 10)
			time.Sleep(time.Millisecond)
		}
		loops, walks = p.s.probe.loops.Load()-l0, p.s.probe.expireWalks.Load()-w0
		t.Logf("sender loop iterations %d, expire walks over the partitions %d", loops, walks)
		require.True(t, l.waitAll(time.Minute))
		require.Empty(t, l.failures())
	})
	return loops, walks
}

// TestExpireWalksOnlyWhenDue: expire looks at every partition only when a
// delivery timeout may be due (the earliest its last walk found), not in
// every sender pass; the sender still loops hundreds of times. Negative
// control: at commit 1a00859 (knob expireEveryPass),
// TestExpireWalksOnlyWhenDueNegativeControl.
func TestExpireWalksOnlyWhenDue(t *testing.T) {
	loops, walks := expireWalksUnderLoad(t)
	require.GreaterOrEqual(t, loops, int64(200), "the sender is busy")
	require.Less(t, walks*20, loops, "a walk in fewer than one pass in 20")
}

// looksWhileLingering opens a batch on each of 400 partitions with a 1 s
// linger, then seals 50 full batches on 50 of them, one at a time at one
// instant of virtual time, and returns how many partitions the sender
// looked at under acc.mu meanwhile.
func looksWhileLingering(t *testing.T) int64 {
	const parts = 400
	var looks int64
	synctest.Test(t, func(t *testing.T) {
		c, n := memCluster(t, broker.Config{Topics: []broker.TopicConfig{{Name: "t", Partitions: parts}}})
		p := memProducer(t, c, n, Linger(time.Second), DeliveryTimeout(time.Minute), RequestTimeout(10*time.Second))
		l := newLedger("a", "t")
		for part := range int32(parts) {
			l.produce(p, part, 1, 10)
		}
		require.True(t, l.waitAll(time.Minute), "warm-up")
		for part := range int32(parts) {
			l.produce(p, part, 1, 10) // lingers for a second
		}
		synctest.Wait()
		l0 := p.s.probe.looks.Load()
		for part := range int32(50) {
			l.produce(p, part, 1, 600) // above batch.size: sealed at once
			synctest.Wait()
		}
		looks = p.s.probe.looks.Load() - l0
		t.Logf("partitions looked at for 50 sealed batches while %d batches linger: %d", parts, looks)
		require.True(t, l.waitAll(time.Minute))
		require.Empty(t, l.failures())
	})
	return looks
}

// TestSenderPassLooksOnlyAtChanges: under acc.mu a sender pass looks
// only at the partitions with sealed batches, the batches whose linger
// ended and those kept open past it, not at every partition holding data
// (issue 20: at 1,000 keyed partitions that walk, in every pass, kept
// Produce waiting for the lock). Negative control: at commit 1a00859 (knob
// walkActive), TestSenderPassLooksOnlyAtChangesNegativeControl.
func TestSenderPassLooksOnlyAtChanges(t *testing.T) {
	require.LessOrEqual(t, looksWhileLingering(t), int64(50*20), "a few looks per sealed batch (one walk is 400)")
}

// TestPendingRecordFitsHalfALine: a batch's entry per record is 32 bytes,
// two to a cache line; what only a record waiting for metadata needs (when
// it was accepted, its copied bytes) lives in waitingRecord instead.
// Where pointers are 4 bytes (GOARCH=386, arm) it is smaller still.
func TestPendingRecordFitsHalfALine(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) == 8 {
		require.Equal(t, uintptr(32), unsafe.Sizeof(pendingRecord{}))
	} else {
		require.LessOrEqual(t, unsafe.Sizeof(pendingRecord{}), uintptr(32))
	}
}

// TestDropOpenedCopiesOnlyPastHalf: dropping the entries a pass looked at
// leaves the rest in place until they are at most half of p.acc.opened, then
// moves them to the front, in order.
func TestDropOpenedCopiesOnlyPastHalf(t *testing.T) {
	p := &Producer{}
	parts := make([]*partBuf, 10)
	for i := range parts {
		parts[i] = &partBuf{ps: &partitionState{id: int32(i)}}
		p.acc.opened = append(p.acc.opened, openedBatch{pb: parts[i]})
	}
	first := &p.acc.opened[0]
	p.acc.dropOpened(3)
	require.Equal(t, 3, p.acc.openedHead, "fewer than half dropped: nothing moved")
	require.Len(t, p.acc.opened, 10)
	require.Same(t, first, &p.acc.opened[0], "same array")
	require.Nil(t, p.acc.opened[0].pb, "dropped entries hold no partition")
	p.acc.dropOpened(6)
	require.Zero(t, p.acc.openedHead, "past half: the rest moved to the front")
	require.Len(t, p.acc.opened, 4)
	for i, e := range p.acc.opened {
		require.Same(t, parts[6+i], e.pb)
	}
	p.acc.dropOpened(4)
	require.Empty(t, p.acc.opened)
	require.Zero(t, p.acc.openedHead)
}

// idleWakeups warms a producer up on four partitions, lets everything
// settle, and returns how often its sender loop ran over the next minute of
// virtual time with nothing to send.
func idleWakeups(t *testing.T) int64 {
	var loops int64
	synctest.Test(t, func(t *testing.T) {
		c, n := memCluster(t, broker.Config{Topics: []broker.TopicConfig{{Name: "t", Partitions: 4}}})
		p := memProducer(t, c, n)
		l := newLedger("a", "t")
		warmUp(t, p, l, 0, 1, 2, 3)
		time.Sleep(10 * time.Second) // linger, backoffs and delivery timeouts all behind
		l0 := p.s.probe.loops.Load()
		time.Sleep(time.Minute)
		loops = p.s.probe.loops.Load() - l0
		t.Logf("sender loop iterations in one idle minute: %d", loops)
		// Still works after the pause.
		l.produce(p, 1, 5, 10)
		require.True(t, l.waitAll(time.Minute))
		require.Empty(t, l.failures())
	})
	return loops
}

// TestIdleSenderDoesNotWake: with nothing buffered and nothing due, the
// sender sleeps until an event or the next deadline (metadata.max.age.ms,
// 5 minutes by default) instead of waking every second (issue 20: 23
// wake-ups per second idle, kgo 3). A count over a fixed interval of
// virtual time. Negative control (the 1 s cap, knob idleTick): at commit
// 1a00859, TestIdleSenderDoesNotWakeNegativeControl.
func TestIdleSenderDoesNotWake(t *testing.T) {
	require.LessOrEqual(t, idleWakeups(t), int64(2), "sender wake-ups in an idle minute")
}

// visitsWhileBlocked fills the window of every partition of a 400-partition
// topic over a 1 s round trip, then produces 50 full batches to 50 of the
// partitions while every response is still on its way, and returns how many
// partitions the sender visited meanwhile.
func visitsWhileBlocked(t *testing.T) int64 {
	const parts = 400
	var visits int64
	synctest.Test(t, func(t *testing.T) {
		c, n := memCluster(t, broker.Config{RTT: time.Second, Topics: []broker.TopicConfig{{Name: "t", Partitions: parts}}})
		p := memProducer(t, c, n, DeliveryTimeout(time.Minute), RequestTimeout(30*time.Second))
		l := newLedger("a", "t")
		for part := range int32(parts) {
			l.produce(p, part, 1, 10)
		}
		require.True(t, l.waitAll(time.Minute), "warm-up: one batch per partition opens its gate")
		full := func(part int32) {
			r := &Record{Topic: "t", Value: make([]byte, 600)} // above batch.size: sealed at once
			r.SetPartition(part)
			p.Produce(t.Context(), r, nil)
		}
		for part := range int32(parts) {
			for range 6 { // window 5: five in flight, one waiting
				full(part)
			}
		}
		synctest.Wait()
		v0 := p.s.probe.visits.Load()
		for part := range int32(50) {
			full(part)
			synctest.Wait()
		}
		visits = p.s.probe.visits.Load() - v0
		t.Logf("partitions visited for 50 new batches while %d partitions wait for their window: %d", parts, visits)
		require.NoError(t, p.Flush(t.Context()))
	})
	return visits
}

// TestSenderVisitsOnlyReadyPartitions: a new batch makes the sender look at
// its own partition, not at every partition holding data (issue 20: the
// send loop walked every partition on every pass, 15.5 % of CPU at 10 000
// partitions). A count, not a timing. Negative control (every partition
// visited on every pass, knob visitAll): at commit 1a00859,
// TestSenderVisitsOnlyReadyPartitionsNegativeControl.
func TestSenderVisitsOnlyReadyPartitions(t *testing.T) {
	require.Less(t, visitsWhileBlocked(t), int64(400), "fewer visits than one walk over every partition")
}

// TestNewBatchAfterWithdrawnHeldBatchKeepsItsLinger: an open batch held
// past linger.ms (its partition could not send: five batches in flight fill
// the window over a 1 s round trip) and then emptied by a withdrawal does
// not leave its "held" mark to the partition's next batch, which goes out
// after its own linger, not at delivery.timeout.ms.
func TestNewBatchAfterWithdrawnHeldBatchKeepsItsLinger(t *testing.T) {
	took, err := afterWithdrawnHeldBatch(t, false)
	require.NoError(t, err)
	require.Less(t, took, 2*time.Second, "linger plus one round trip, not delivery.timeout.ms")
}

// Negative control: with the mark inherited (knob keepHeldMark, the bug
// 07d9567 fixed) the next batch is never sent and fails at
// delivery.timeout.ms.
func TestNewBatchAfterWithdrawnHeldBatchNegativeControl(t *testing.T) {
	needRegress(t)
	took, err := afterWithdrawnHeldBatch(t, true)
	require.ErrorIs(t, err, ErrDeliveryTimeout)
	require.GreaterOrEqual(t, took, 2*time.Second)
}

// afterWithdrawnHeldBatch holds an open batch past linger.ms behind a full
// window, withdraws it, and returns how long the partition's next record
// took and its error.
func afterWithdrawnHeldBatch(t *testing.T, keep bool) (took time.Duration, err error) {
	synctest.Test(t, func(t *testing.T) {
		c, n := memCluster(t, broker.Config{RTT: time.Second, Topics: []broker.TopicConfig{{Name: "t", Partitions: 1}}})
		p := memProducer(t, c, n, Linger(5*time.Millisecond), RequestTimeout(10*time.Second), DeliveryTimeout(30*time.Second),
			bug(t, keepHeldMark, keep))
		small := func() *Record { return &Record{Topic: "t", Value: []byte("v")} }
		require.NoError(t, p.ProduceSync(t.Context(), small()).FirstErr(), "warm-up opens the gate")
		full := make(chan error, 5)
		for range 5 { // above batch.size: each sealed at once; the window is full
			p.Produce(t.Context(), &Record{Topic: "t", Value: make([]byte, 600)}, func(_ *Record, err error) { full <- err })
		}
		// Lingers past linger.ms behind the full window, then is withdrawn.
		ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
		werr := p.ProduceSync(ctx, small()).FirstErr()
		cancel()
		require.ErrorIs(t, werr, context.DeadlineExceeded)
		for range 5 {
			require.NoError(t, <-full)
		}
		time.Sleep(100 * time.Millisecond)
		start := time.Now()
		err = p.ProduceSync(t.Context(), small()).FirstErr()
		took = time.Since(start)
	})
	return took, err
}

// The sender sleeps until something changes in the states where nothing
// it can do helps: it must not loop without blocking (a livelock: a core
// at 100 % in the user's process) or wake on a short timer that is always
// already due. Under testing/synctest a loop like that shows as many loop
// iterations over a stretch of virtual time in which nothing happened
// (and, if it never blocks, as virtual time that does not advance: the
// test hits its real timeout). Found while looking into the hang of
// TestMemoryReleasedPerCompletion, whose goroutine dumps showed the sender
// runnable: there it was not spinning but woken every 5 minutes of virtual
// time by metadata.max.age.ms, the timer that kept synctest from reporting
// the test's own deadlock (see memoryPerCompletion).

// stuckLoops counts the sender's loop iterations over a stretch of
// virtual time in three states, each settled first:
//   - memory: buffer.memory is all held by completions queued behind a
//     callback that blocks, and a Produce waits for it;
//   - inflight: records wait for a topic's metadata while the refresh
//     asking for it is in flight (the broker stalls);
//   - backoff: a batch waits for its partition's leader, which metadata
//     keeps reporting as none, so refreshes back off one after another.
//
// It also returns the metadata requests sent in the backoff state.
func stuckLoops(t *testing.T) (memory, inflight, backoff, refreshes int64) {
	t.Run("memory", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			c, n := memCluster(t, broker.Config{Topics: []broker.TopicConfig{{Name: "t", Partitions: 2}}})
			p := memProducer(t, c, n, BufferMemory(8192), MaxRequestSize(8192))
			require.NoError(t, p.ProduceSync(context.Background(), toPartition("t", 0, []byte("v"))).FirstErr())
			release, entered := make(chan struct{}), make(chan struct{})
			defer close(release)
			p.Produce(context.Background(), toPartition("t", 0, []byte("v")), func(*Record, error) { close(entered); <-release })
			<-entered
			// Fill buffer.memory with records that fit (one that did not
			// would wait here for ever: nothing is released while the
			// callback blocks).
			for i := 0; i < 10; i++ {
				r := toPartition("t", 1, make([]byte, 2000))
				if int64(recordMemory(r)) > 8192-p.mem.Held() {
					break
				}
				p.Produce(context.Background(), r, nil)
				time.Sleep(100 * time.Millisecond) // sent and acked: a batch each
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			waited := make(chan error, 1)
			go func() { waited <- p.mem.Acquire(ctx, 4000) }() // as Produce does
			time.Sleep(10 * time.Second)                       // every batch acked and queued
			require.Greater(t, p.mem.Held()+4000, int64(8192), "the acquire waits")
			l0 := p.s.probe.loops.Load()
			time.Sleep(time.Minute)
			memory = p.s.probe.loops.Load() - l0
			cancel()
			require.ErrorIs(t, <-waited, context.Canceled, "it waited for the whole minute")
		})
	})

	t.Run("inflight", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			c, n := memCluster(t, broker.Config{Topics: []broker.TopicConfig{{Name: "t", Partitions: 1}, {Name: "u", Partitions: 1}}})
			p := memProducer(t, c, n, RequestTimeout(10*time.Minute), DeliveryTimeout(20*time.Minute), MaxBlock(20*time.Minute))
			require.NoError(t, p.ProduceSync(context.Background(), toPartition("t", 0, []byte("v"))).FirstErr())
			time.Sleep(time.Second)
			c.Stall(0, 5*time.Minute)
			m0 := c.MetadataRequests()
			done := make(chan error, 1)
			p.Produce(context.Background(), &Record{Topic: "u", Value: []byte("v")}, func(_ *Record, err error) { done <- err })
			time.Sleep(10 * time.Second)
			l0 := p.s.probe.loops.Load()
			time.Sleep(time.Minute)
			inflight = p.s.probe.loops.Load() - l0
			require.Zero(t, c.MetadataRequests()-m0, "the refresh asking for u waits in the stalled broker")
			select {
			case err := <-done:
				require.NoError(t, err, "u's record, once the stall ends")
			case <-time.After(10 * time.Minute):
				t.Fatal("u's record got no outcome")
			}
			require.Equal(t, int64(1), c.MetadataRequests()-m0, "one refresh: the one that was in flight")
		})
	})

	t.Run("backoff", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			c, n := memCluster(t, broker.Config{Topics: []broker.TopicConfig{{Name: "t", Partitions: 2}}})
			p := memProducer(t, c, n, RetryBackoff(5*time.Second), RetryBackoffMax(5*time.Second),
				DeliveryTimeout(20*time.Minute), RequestTimeout(time.Minute))
			require.NoError(t, p.ProduceSync(context.Background(), toPartition("t", 1, []byte("v"))).FirstErr())
			c.RewriteMetadata(func(resp *kmsg.MetadataResponse) {
				for i := range resp.Topics {
					for j := range resp.Topics[i].Partitions {
						if resp.Topics[i].Partitions[j].Partition == 0 {
							resp.Topics[i].Partitions[j].Leader = -1
						}
					}
				}
			})
			p.s.wantMetadata()
			time.Sleep(10 * time.Second)
			p.Produce(context.Background(), toPartition("t", 0, []byte("v")), nil)
			time.Sleep(10 * time.Second)
			l0, m0 := p.s.probe.loops.Load(), c.MetadataRequests()
			time.Sleep(time.Minute)
			backoff, refreshes = p.s.probe.loops.Load()-l0, c.MetadataRequests()-m0
			c.RewriteMetadata(nil)
		})
	})
	t.Logf("sender loop iterations in a minute: memory wait %d, refresh in flight %d, refreshes backing off %d (%d refreshes)",
		memory, inflight, backoff, refreshes)
	return memory, inflight, backoff, refreshes
}

// TestSenderSleepsWhileStuck: in each stuck state the sender wakes only
// for what is due: a few times a minute (metadata.max.age.ms, delivery
// and metadata timers), or a few times per metadata refresh while
// refreshes back off. Negative control: at commit 1a00859 (knob idleTick, a
// sender that wakes once a second whatever is due),
// TestSenderSleepsWhileStuckNegativeControl.
func TestSenderSleepsWhileStuck(t *testing.T) {
	memory, inflight, backoff, refreshes := stuckLoops(t)
	require.LessOrEqual(t, memory, int64(3), "while a Produce waits for memory held behind a blocked callback")
	require.LessOrEqual(t, inflight, int64(3), "while a metadata refresh is in flight")
	require.Positive(t, refreshes)
	require.LessOrEqual(t, backoff, 3*refreshes+3, "while metadata refreshes back off")
}

// TestFreeRequestDropsLargeSlices: a pooled request keeps room for up to
// keepRequestBatches batches and tickets; a request that spanned more
// partitions gives its slices up, so idle memory does not grow with the
// partition count (the control shows small slices are kept).
func TestFreeRequestDropsLargeSlices(t *testing.T) {
	s := &sender{}
	big := &sentRequest{batches: make([]*batch, 1, keepRequestBatches+1), ir: inflight.Request{Tickets: make([]inflight.Ticket, 0, keepRequestBatches+1)}}
	small := &sentRequest{batches: make([]*batch, 1, 8), ir: inflight.Request{Tickets: make([]inflight.Ticket, 0, 8)}}
	s.freeRequest(big)
	s.freeRequest(small)
	assert.Nil(t, big.batches)
	assert.Nil(t, big.ir.Tickets)
	assert.Equal(t, 8, cap(small.batches), "small slices are pooled with the request")
	assert.Equal(t, 8, cap(small.ir.Tickets))
	assert.Empty(t, small.batches)
	assert.Len(t, s.srFree, 2, "both requests go back to the free list")
}
