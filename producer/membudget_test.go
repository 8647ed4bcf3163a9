package producer

import (
	"context"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/semaphore"
)

// TestMemBudgetForcedBytesArePaidBackFirst: bytes forced past the limit
// are paid back by the next releases before anything can be acquired
// again (memBudget's doc).
func TestMemBudgetForcedBytesArePaidBackFirst(t *testing.T) {
	m := newMemBudget(100)
	require.NoError(t, m.Acquire(context.Background(), 100))
	m.Force(50) // 50 past the limit
	assert.Equal(t, int64(150), m.Held())
	m.Release(30)
	assert.False(t, m.TryAcquire(1), "20 still owed")
	m.Release(40) // pays the last 20, frees 20
	assert.True(t, m.TryAcquire(20))
	assert.False(t, m.TryAcquire(1))
	assert.Equal(t, int64(100), m.Held())
}

// TestMemBudgetForceTakesFreeBytesFirst: a Force larger than what is free
// takes the free bytes and owes only the rest, so nothing can be acquired
// until releases pay the debt (memBudget's doc). Negative control
// (knob memForceKeepsFree): owing all of it left the free bytes
// to TryAcquire while the budget was past its limit.
func TestMemBudgetForceTakesFreeBytesFirst(t *testing.T) {
	for _, keepsFree := range bugCases {
		m := newMemBudget(100)
		if keepsFree {
			m.regress.set(memForceKeepsFree)
		}
		require.NoError(t, m.Acquire(context.Background(), 60))
		m.Force(50) // 40 free pay, 10 owed
		assert.Equal(t, int64(110), m.Held())
		if keepsFree {
			assert.True(t, m.TryAcquire(30), "negative control: free bytes taken while 10 past the limit")
			continue
		}
		assert.False(t, m.TryAcquire(1), "10 past the limit")
		m.Release(10) // pays the debt
		assert.False(t, m.TryAcquire(1), "at the limit")
		m.Release(10)
		assert.True(t, m.TryAcquire(10))
		assert.Equal(t, int64(100), m.Held())
	}
}

// TestMemBudgetOneDebtor: TakeOrOwe lets one caller owe at a time; another
// is refused while it owes, and the release paying the debtor's part off
// wakes the refused one (paid), which may then owe (TakeOrOwe's doc).
// Negative control (knob memSharedDebt): every caller owed from the
// shared room, and splits of 32 partitions each part way down took all of
// it with nothing left in flight to pay it back: the partitions waited
// for releases that never came (TestSplitKeepsBufferMemoryBound under
// load, until delivery.timeout.ms).
func TestMemBudgetOneDebtor(t *testing.T) {
	for _, shared := range bugCases {
		m := newMemBudget(100)
		if shared {
			m.regress.set(memSharedDebt)
		}
		woke := 0
		m.paid = func() { woke++ }
		require.NoError(t, m.Acquire(context.Background(), 100))
		require.True(t, m.TakeOrOwe(30, 50, "a"))
		m.Force(5) // owed too, by none of them
		if shared {
			assert.True(t, m.TakeOrOwe(10, 50, "b"), "negative control: b owes beside a")
			continue
		}
		assert.False(t, m.TakeOrOwe(10, 50, "b"), "a owes")
		assert.True(t, m.TakeOrOwe(10, 50, "a"), "the debtor may owe more")
		assert.False(t, m.TakeOrOwe(20, 50, "a"), "past most")
		assert.Equal(t, int64(145), m.Held())
		m.Release(20)
		assert.Zero(t, woke, "a still owes 20")
		assert.False(t, m.TakeOrOwe(1, 50, "b"))
		m.Release(20) // pays a's part off; 5 still owed
		assert.Equal(t, 1, woke, "the refused caller is woken")
		assert.True(t, m.TakeOrOwe(10, 50, "b"), "b owes now")
		assert.False(t, m.TakeOrOwe(1, 50, "a"), "b owes")
		assert.Equal(t, int64(115), m.Held())
		m.Release(115)
		assert.Equal(t, int64(0), m.Held())
	}
}

// TestMemBudgetWaitersInOrder: a request that does not fit waits, and
// a smaller one made after it waits behind it rather than pass it, even
// though it would fit (memBudget.Acquire's doc); releases serve them in
// order.
func TestMemBudgetWaitersInOrder(t *testing.T) {
	m := newMemBudget(100)
	require.NoError(t, m.Acquire(context.Background(), 90))
	order := make(chan int64, 2)
	acquire := func(n int64) {
		require.NoError(t, m.Acquire(context.Background(), n))
		order <- n
	}
	go acquire(50)
	require.Eventually(t, func() bool { return m.waiting.Load() == 1 }, 5*time.Second, time.Millisecond)
	go acquire(5) // 10 are free, but 50 queued first
	require.Eventually(t, func() bool { return m.waiting.Load() == 2 }, 5*time.Second, time.Millisecond)
	assert.False(t, m.TryAcquire(1), "TryAcquire does not pass waiters either")
	m.Release(40) // 50 free: the first waiter only
	assert.Equal(t, int64(50), <-order)
	m.Release(10) // 10 free: now the second
	assert.Equal(t, int64(5), <-order)
	assert.Equal(t, int64(95), m.Held())
	assert.Zero(t, m.waiting.Load())
}

// TestMemBudgetCancelledWaiter: a waiter whose ctx ends returns ctx's
// error, holds nothing, and whoever queued behind it is served if the
// bytes are there; a ctx already done fails even with bytes free.
func TestMemBudgetCancelledWaiter(t *testing.T) {
	m := newMemBudget(100)
	require.NoError(t, m.Acquire(context.Background(), 80))
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- m.Acquire(ctx, 60) }()
	require.Eventually(t, func() bool { return m.waiting.Load() == 1 }, 5*time.Second, time.Millisecond)
	got := make(chan struct{})
	go func() {
		assert.NoError(t, m.Acquire(context.Background(), 15))
		close(got)
	}()
	require.Eventually(t, func() bool { return m.waiting.Load() == 2 }, 5*time.Second, time.Millisecond)
	cancel()
	require.ErrorIs(t, <-errc, context.Canceled)
	<-got // 20 were free all along: the cancelled head no longer blocks it
	assert.Equal(t, int64(95), m.Held())

	assert.ErrorIs(t, m.Acquire(ctx, 1), context.Canceled, "ctx done before the call")
	assert.Equal(t, int64(95), m.Held())
}

// TestMemBudgetConcurrentNeverOverLimit: under concurrent acquires,
// releases and cancellations the bytes acquired (not forced) never exceed
// the limit, and everything comes back. Run with -race. Negative control
// (knob memUnbounded): a take that does not check the free bytes
// goes past the limit, and the test sees it.
func TestMemBudgetConcurrentNeverOverLimit(t *testing.T) {
	const limit = 1000
	for _, unbounded := range bugCases {
		m := newMemBudget(limit)
		if unbounded {
			m.regress.set(memUnbounded)
		}
		var out, most atomic.Int64 // acquired and not yet released, as the callers see it; its peak
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(g), 1))
				for range 2000 {
					n := int64(1 + rng.IntN(300))
					ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rng.IntN(50))*time.Microsecond)
					var err error
					if rng.IntN(4) == 0 {
						if !m.TryAcquire(n) {
							err = context.Canceled
						}
					} else {
						err = m.Acquire(ctx, n)
					}
					cancel()
					if err != nil {
						continue
					}
					now := out.Add(n)
					for peak := most.Load(); now > peak && !most.CompareAndSwap(peak, now); peak = most.Load() {
					}
					runtime.Gosched()
					out.Add(-n)
					m.Release(n)
				}
			}()
		}
		wg.Wait()
		if unbounded {
			assert.Greater(t, most.Load(), int64(limit), "negative control: an unchecked take goes past the limit")
			continue
		}
		assert.LessOrEqual(t, most.Load(), int64(limit))
		assert.Zero(t, m.Held())
		assert.Equal(t, int64(limit), m.free.Load())
		assert.Zero(t, m.waiting.Load())
	}
}

// BenchmarkMemBudgetAcquire is Produce's per-record budget step (Acquire
// with a cancellable ctx, bytes free) with a release per 16 records, as a
// batch gives them back, next to x/sync's semaphore, which memBudget used
// before: that locked a mutex and polled ctx's done channel per record.
func BenchmarkMemBudgetAcquire(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b.Run("memBudget", func(b *testing.B) {
		m := newMemBudget(1 << 30)
		for i := range b.N {
			if err := m.Acquire(ctx, 100); err != nil {
				b.Fatal(err)
			}
			if i%16 == 15 {
				m.Release(1600)
			}
		}
	})
	b.Run("semaphore", func(b *testing.B) {
		s := semaphore.NewWeighted(1 << 30)
		var held atomic.Int64
		for i := range b.N {
			if err := s.Acquire(ctx, 100); err != nil {
				b.Fatal(err)
			}
			held.Add(100)
			if i%16 == 15 {
				held.Add(-1600)
				s.Release(1600)
			}
		}
	})
}
