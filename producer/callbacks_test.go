package producer

// Tests of what the end of a callback completion releases: buffer.memory
// after each completion's callbacks, Flush waiters at the end of the
// callback goroutine's pass.

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/longhaul-kafka/longhaul/internal/broker"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMemoryReleasedPerCompletion: buffer.memory is released after each
// completion's callbacks, not at the end of the callback goroutine's pass
// (callbacks.go): a callback's Produce, which does not wait for
// buffer.memory, needs the bytes an earlier completion of the same pass
// held. Two batches acked while a slow
// callback holds the callback goroutine come back in one pass; the second
// one's callback produces a record that fits only once the first one's
// memory is back, and it gets it at once rather than failing with
// ErrBufferFull (Produce from a callback does not wait).
func TestMemoryReleasedPerCompletion(t *testing.T) {
	require.NoError(t, memoryPerCompletion(t, false), "the record produced from the callback")
}

// Negative control: with buffer.memory released at the end of the pass
// (regress.releasePerPass) the record produced from the second callback
// finds buffer.memory full: only the end of its own pass frees the bytes,
// and Produce from a callback does not wait for them (it would wait for
// itself).
func TestMemoryReleasedPerCompletionNegativeControl(t *testing.T) {
	needRegress(t)
	err := memoryPerCompletion(t, true)
	require.ErrorIs(t, err, ErrBufferFull, "the record produced from the callback found the bytes of the pass's first completion held")
}

// memoryPerCompletion builds the state TestMemoryReleasedPerCompletion
// describes and returns the outcome of the record produced from the second
// callback of the pass.
//
// The sizes are measured, not assumed: a batch holds its buffer's capacity
// of buffer.memory (memory.go), and a batch of one small record may get a
// recycled buffer of up to 4 KiB from an earlier batch of this process
// (accumulator.go, keepBuffer). The old version of this test assumed the
// slow callback's batch of 10 bytes held about that much, with a budget
// that left no room for the test's own records otherwise: when it got a
// recycled 4 KiB buffer (about one run in ten with -count), the test's
// second 4,000-byte Produce waited for memory held by completions queued
// behind the slow callback the test itself had yet to release, a deadlock
// synctest could not report because the producer always has a timer armed
// (metadata.max.age.ms): virtual time ran on, five minutes per sender
// pass, until the real test timeout.
func memoryPerCompletion(t *testing.T, perPass bool) error {
	var outcome error
	synctest.Test(t, func(t *testing.T) {
		c, n := memCluster(t, broker.Config{RTT: 10 * time.Millisecond, Topics: []broker.TopicConfig{{Name: "t", Partitions: 3, Window: 10}}})
		const budget = 16384
		p := memProducer(t, c, n, BufferMemory(budget), MaxRequestSize(budget), BatchSize(budget),
			bug(t, releasePerPass, perPass))
		rec := func(part int32, size int) *Record { return toPartition("t", part, make([]byte, size)) }
		require.NoError(t, p.ProduceSync(context.Background(), rec(2, 10)).FirstErr(), "metadata and producer id")
		// produce places r, which must fit now: nothing releases memory
		// before the slow callback returns, so a Produce that waited
		// here would wait for ever.
		produce := func(r *Record, cb Callback) {
			require.LessOrEqual(t, int64(recordMemory(r)), budget-p.mem.Held(), "the test's own record fits")
			p.Produce(context.Background(), r, cb)
		}

		// A slow callback holds the callback goroutine.
		release, entered := make(chan struct{}), make(chan struct{})
		produce(rec(2, 10), func(*Record, error) { close(entered); <-release })
		<-entered
		slow := p.mem.Held() // the slow callback's batch, all that is held now

		// A failed check below must not leave the callback goroutine
		// stuck for Close at cleanup.
		var once sync.Once
		unblock := func() { once.Do(func() { close(release) }) }
		defer unblock()

		var calls atomic.Int32
		var third *Record // set before the callbacks run
		produced := make(chan error, 1)
		cb := func(_ *Record, err error) {
			assert.NoError(t, err)
			if calls.Add(1) < 2 {
				return
			}
			// The second completion of the pass: the first one's
			// memory is free, this one's is not.
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			p.Produce(ctx, third, func(_ *Record, err error) { produced <- err })
		}
		produce(rec(0, 4000), cb)
		produce(rec(1, 4000), cb)
		time.Sleep(time.Second) // both acked and queued behind the slow callback
		require.Zero(t, calls.Load())
		p.cbs.mu.Lock()
		queued := append([]completion(nil), p.cbs.q...)
		p.cbs.mu.Unlock()
		require.Len(t, queued, 2, "both completions wait for the slow callback: the next pass takes them together")
		first, second := queued[0].memory, queued[1].memory
		require.Equal(t, slow+first+second, p.mem.Held(), "held: the slow batch and the two queued")

		// The third record fits with only the second batch held, not
		// with both (even once the slow callback's bytes are back).
		v := int(budget - second - first/2)
		for third = rec(2, v); int64(recordMemory(third)) > budget-second-first/2; third = rec(2, v) {
			v--
		}
		need := int64(recordMemory(third))
		t.Logf("buffer.memory held: slow callback's batch %d, queued %d and %d; third record %d of %d", slow, first, second, need, budget)
		require.Greater(t, need, budget-first-second, "does not fit while both are held")
		require.LessOrEqual(t, need, budget-second, "fits once the first is released")
		unblock()
		select {
		case outcome = <-produced:
		case <-time.After(time.Minute):
			t.Fatal("the record produced from the callback got no outcome")
		}
		require.Equal(t, int32(2), calls.Load())
	})
	return outcome
}

// TestFlushReleasedAtEndOfCallbackPass: Flush waiters are released at the
// end of the callback goroutine's pass, after every callback of it ran
// (doneTally): with the record Flush waits for (a) and a record produced
// after the Flush (b) called back in one pass, Flush does not return while
// b's callback runs, though a's has run, and returns once it ends.
func TestFlushReleasedAtEndOfCallbackPass(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, n := memCluster(t, broker.Config{RTT: 10 * time.Millisecond, Topics: []broker.TopicConfig{{Name: "t", Partitions: 3, Window: 10}}})
		p := memProducer(t, c, n)
		rec := func(part int32) *Record { return toPartition("t", part, []byte("v")) }
		require.NoError(t, p.ProduceSync(context.Background(), rec(2)).FirstErr(), "metadata and producer id")

		// A slow callback holds the callback goroutine while a and b
		// are acknowledged, so they come back in one pass.
		releaseSlow, entered := make(chan struct{}), make(chan struct{})
		p.Produce(context.Background(), rec(2), func(*Record, error) { close(entered); <-releaseSlow })
		<-entered
		var aDone atomic.Bool
		p.Produce(context.Background(), rec(0), func(_ *Record, err error) { assert.NoError(t, err); aDone.Store(true) })
		flushed := make(chan error, 1)
		go func() { flushed <- p.Flush(context.Background()) }()
		synctest.Wait() // Flush has begun: b is not among its records
		releaseB, inB := make(chan struct{}), make(chan struct{})
		p.Produce(context.Background(), rec(1), func(_ *Record, err error) { assert.NoError(t, err); close(inB); <-releaseB })
		time.Sleep(time.Second) // a and b acknowledged, queued behind the slow callback
		close(releaseSlow)
		<-inB
		require.True(t, aDone.Load(), "a was called back before b, in the same pass")
		time.Sleep(time.Second)
		select {
		case err := <-flushed:
			t.Fatalf("Flush returned (%v) while a callback of the pass was running", err)
		default:
		}
		close(releaseB)
		require.NoError(t, <-flushed)
	})
}

// TestCallbackOrderCoversAcceptedRecordsOnly: Produce's doc promises
// callbacks in Produce order within each partition among the records
// Produce accepted, and leaves a refused record's callback in no set order
// with them. Records accepted to partition 0 wait in flight (the broker
// stalls) while Close begins; a record then produced to partition 0 is
// refused with a bare ErrClosed and called back before the accepted ones,
// which are called back, delivered, in Produce order. (The order of
// accepted records under faults is TestMixedFaultCallbacksInOrderAfterLostResponse's,
// with its negative control callbacksUnordered.)
func TestCallbackOrderCoversAcceptedRecordsOnly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, n := memCluster(t, broker.Config{Topics: []broker.TopicConfig{{Name: "t", Partitions: 1}}})
		p := memProducer(t, c, n)
		require.NoError(t, p.ProduceSync(context.Background(), toPartition("t", 0, []byte("warm"))).FirstErr())

		var (
			mu    sync.Mutex
			order []string
			errs  = map[string]error{}
		)
		cb := func(name string) Callback {
			return func(_ *Record, err error) {
				mu.Lock()
				defer mu.Unlock()
				order = append(order, name)
				errs[name] = err
			}
		}
		c.Stall(0, time.Second)
		accepted := []string{"a0", "a1", "a2", "a3", "a4"}
		for _, name := range accepted {
			p.Produce(context.Background(), toPartition("t", 0, []byte(name)), cb(name))
		}
		closed := make(chan error, 1)
		go func() { closed <- p.Close(context.Background()) }()
		synctest.Wait() // Close has begun: it waits for the stalled records
		require.True(t, p.closing.Load())
		p.Produce(context.Background(), toPartition("t", 0, []byte("refused")), cb("refused"))
		require.NoError(t, <-closed)

		mu.Lock()
		defer mu.Unlock()
		require.Equal(t, append([]string{"refused"}, accepted...), order,
			"the refused record is called back before the records of its partition accepted earlier; those keep Produce order")
		require.ErrorIs(t, errs["refused"], ErrClosed)
		var de *DeliveryError
		require.False(t, errors.As(errs["refused"], &de), "refused, not sent: a bare ErrClosed")
		for _, name := range accepted {
			require.NoError(t, errs[name], name)
		}
		require.Len(t, c.Records("t", 0), 1+len(accepted))
	})
}

// TestProduceFromCallbackDoesNotWaitForMemory: Produce's doc lets a
// callback call Produce. The bytes a Produce waits for are given back
// after callbacks run, on the callback goroutine, so a Produce called
// there that waited for buffer.memory waited for itself: the callback
// goroutine stopped, no buffer.memory came back, and (with a ctx that
// never ends) every callback, Flush and Close after it hung. Called from
// a callback, Produce now fails the record at once with ErrBufferFull, as
// TryProduce does, when buffer.memory is full; the caller may produce it
// again once its callback returned.
func TestProduceFromCallbackDoesNotWaitForMemory(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, n := memCluster(t, broker.Config{Topics: []broker.TopicConfig{{Name: "t", Partitions: 1}}})
		const budget = 16384
		p := memProducer(t, c, n, BufferMemory(budget), MaxRequestSize(budget), BatchSize(budget))
		require.NoError(t, p.ProduceSync(context.Background(), toPartition("t", 0, []byte("warm"))).FirstErr())

		var big *Record
		inner := make(chan error, 1)
		outer := make(chan error, 1)
		p.Produce(context.Background(), toPartition("t", 0, []byte("first")), func(_ *Record, err error) {
			outer <- err
			// This callback's batch holds its buffer.memory until the
			// callback returns: a record needing more than the rest
			// does not fit now, and fits alone.
			held := p.mem.Held()
			v := int(budget - held + 1)
			for big = toPartition("t", 0, make([]byte, v)); int64(recordMemory(big)) <= budget-held; big = toPartition("t", 0, make([]byte, v)) {
				v++
			}
			if int64(recordMemory(big)) > budget-61 {
				inner <- nil // cannot build the case; the check below fails
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			p.Produce(ctx, big, func(_ *Record, err error) { inner <- err })
		})
		require.NoError(t, <-outer)
		var err error
		select {
		case err = <-inner:
		case <-time.After(10 * time.Minute):
			t.Fatal("the record produced from the callback got no outcome")
		}
		require.NotNil(t, big)
		require.ErrorIs(t, err, ErrBufferFull, "Produce from a callback must not wait for bytes only callbacks give back")

		// Once the callback returned, the record fits.
		require.NoError(t, p.ProduceSync(context.Background(), toPartition("t", 0, big.Value)).FirstErr())
		require.Len(t, c.Records("t", 0), 3)
	})
}
