package producer

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
)

// memBudget is buffer.memory. Produce acquires a record's worst-case
// encoded size before placing it (blocking only there); an open batch
// holds the larger of its records' sizes and its buffer's capacity
// (growMemory, taken as the buffer grows), and from sealing on exactly
// its buffer's capacity (settleMemory), so the budget counts the memory
// batches really hold, not only record bytes. Settling once per batch,
// not per record, keeps the budget's lock off the per-record path. A buffer
// that grows under acc.mu cannot wait: Force takes the growth at
// once, past the limit if need be, and the next releases pay that back
// before Produce may acquire again.
//
// Acquiring while bytes are free and nobody waits is one compare-and-swap
// on free, without the lock: Produce acquires once per record, and a lock
// there (plus the context's done channel a semaphore polls) cost a few
// percent of the producer's CPU at 1 KiB records. free only grows under
// mu (Release), which is also where waiters queue, so a waiter that found
// too little free cannot miss the release that frees enough.
type memBudget struct {
	limit   int64
	free    atomic.Int64 // limit minus the bytes acquired or forced and not released
	waiting atomic.Int32 // len(waiters): the lock-free path runs only at 0

	mu      sync.Mutex
	debt    int64 // forced beyond the limit, paid back first by Release
	waiters []*memWaiter
	// owing: TakeOrOwe refused while something was owed; the release that
	// pays the debt off, or the debtor's part of it, calls paid (the
	// sender's wake), so it tries again.
	owing bool
	paid  func()
	// debtor is the one TakeOrOwe caller that owes (debtorOwes bytes of
	// debt), nil when none does: the others are refused until it is paid
	// back, so their partial splits cannot share out the debt's room
	// until none can go on.
	debtor     any
	debtorOwes int64

	regress regressions // memUnbounded, memForceKeepsFree (negative controls; empty in the default build)
}

// memWaiter is an Acquire blocked until n bytes are free, in FIFO order.
type memWaiter struct {
	n     int64
	ready chan struct{} // closed once the bytes are taken for it
}

func newMemBudget(limit int64) *memBudget {
	m := &memBudget{limit: limit}
	m.free.Store(limit)
	return m
}

// take takes n bytes from free if that many are free, without waiting.
func (m *memBudget) take(n int64) bool {
	for {
		f := m.free.Load()
		if f < n && !m.regress.on(memUnbounded) {
			return false
		}
		if m.free.CompareAndSwap(f, f-n) {
			return true
		}
	}
}

// Acquire blocks until n bytes are free or ctx is done. Waiters are served
// in order: a small request does not pass a large one queued before it
// (except one that found the queue empty in the instant the large one
// joined it). If ctx is already done Acquire fails even when bytes are
// free.
func (m *memBudget) Acquire(ctx context.Context, n int64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if m.waiting.Load() == 0 && m.take(n) {
		return nil
	}
	m.mu.Lock()
	if len(m.waiters) == 0 && m.take(n) {
		m.mu.Unlock()
		return nil
	}
	w := &memWaiter{n: n, ready: make(chan struct{})}
	m.waiters = append(m.waiters, w)
	m.waiting.Store(int32(len(m.waiters)))
	m.mu.Unlock()
	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
	}
	m.mu.Lock()
	select {
	case <-w.ready:
		// Served after ctx ended: give the bytes back, as Release does
		// (forced debt first).
		m.releaseLocked(n)
	default:
		i := slices.Index(m.waiters, w)
		m.waiters = slices.Delete(m.waiters, i, i+1)
		m.waiting.Store(int32(len(m.waiters)))
	}
	// Whoever queued behind w may fit now.
	m.notifyLocked()
	m.mu.Unlock()
	return ctx.Err()
}

// TryAcquire takes n bytes if they are free now and nobody waits.
func (m *memBudget) TryAcquire(n int64) bool {
	return m.waiting.Load() == 0 && m.take(n)
}

// Force takes n bytes without waiting, past the limit if need be.
func (m *memBudget) Force(n int64) {
	if n <= 0 {
		return
	}
	// Under mu with Release's payback, so no release can slip between a
	// failed take and the debt it leaves and hand Produce bytes that pay
	// for nothing.
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.regress.on(memForceKeepsFree) {
		if len(m.waiters) > 0 || !m.take(n) {
			m.debt += n
		}
		return
	}
	// What is free pays first and only the rest is owed, so free is 0
	// while anything is owed: leaving the free bytes there let Produce
	// acquire them while the budget was past its limit, and a producer
	// whose batches took larger pooled buffers went on accepting records
	// to several times buffer.memory.
	for {
		f := m.free.Load()
		paid := max(0, min(f, n))
		if m.free.CompareAndSwap(f, f-paid) {
			m.debt += n - paid
			return
		}
	}
}

// TakeOrOwe takes n bytes for who on the sender goroutine, which cannot
// wait: from the free bytes if that many are free (ahead of waiting Produce
// calls: the bytes serve records already accepted), else what is free and
// the rest owed, as Force does, as long as the debt stays within most and
// no other caller owes. Otherwise it takes nothing and reports false; the
// release that pays the debt, or the other caller's part of it, off calls
// paid. So what TakeOrOwe owes never takes the budget past its limit plus
// most, is paid back before Produce may acquire again, and is owed by one
// caller at a time: a caller refused because others' partial work holds
// the room could otherwise wait for releases that never come.
func (m *memBudget) TakeOrOwe(n, most int64, who any) bool {
	if n <= 0 {
		return true
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.take(n) {
		return true
	}
	if m.debtor != nil && m.debtor != who && !m.regress.on(memSharedDebt) {
		m.owing = true
		return false
	}
	for {
		f := m.free.Load()
		paid := max(0, min(f, n))
		if m.debt+n-paid > most {
			m.owing = true
			return false
		}
		if m.free.CompareAndSwap(f, f-paid) {
			m.debt += n - paid
			if n > paid {
				m.debtor = who
				m.debtorOwes += n - paid
			}
			return true
		}
	}
}

// Release gives back n bytes; forced bytes are paid back first.
func (m *memBudget) Release(n int64) {
	if n <= 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.releaseLocked(n)
}

// releaseLocked pays back forced debt first, then frees the rest and
// serves the waiters it lets in.
func (m *memBudget) releaseLocked(n int64) {
	paid := min(m.debt, n)
	m.debt -= paid
	if m.debtor != nil {
		m.debtorOwes -= min(m.debtorOwes, paid)
		if m.debtorOwes == 0 {
			m.debtor = nil
		}
	}
	if m.owing && (m.debt == 0 || m.debtor == nil) {
		m.owing = false
		if m.paid != nil {
			m.paid() // must not block: a wake
		}
	}
	if n > paid {
		if m.free.Add(n-paid) > m.limit {
			panic("producer: buffer.memory released more than held")
		}
		m.notifyLocked()
	}
}

// notifyLocked serves queued waiters in order while the first one fits.
func (m *memBudget) notifyLocked() {
	k := 0
	for k < len(m.waiters) && m.take(m.waiters[k].n) {
		close(m.waiters[k].ready)
		k++
	}
	if k > 0 {
		m.waiters = slices.Delete(m.waiters, 0, k)
		m.waiting.Store(int32(len(m.waiters)))
	}
}

// Held returns the bytes held now: acquired and forced, not yet released.
func (m *memBudget) Held() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.limit - m.free.Load() + m.debt
}

// growMemory makes b hold at least its buffer's capacity, taking the
// difference: called as records are placed.
func (a *accumulator) growMemory(b *batch) {
	if a.cfg.regress.on(recordBytesOnly) {
		return
	}
	if c := int64(b.builder.Cap()); c > b.memory {
		a.mem.Force(c - b.memory)
		b.memory = c
	}
}

// settleMemory makes b hold exactly its buffer's capacity of buffer.memory
// (0 once it has no records), taking or giving back the difference.
func (a *accumulator) settleMemory(b *batch) {
	want := int64(b.builder.Cap())
	if len(b.records) == 0 {
		want = 0
	}
	if a.cfg.regress.on(recordBytesOnly) {
		return
	}
	switch d := want - b.memory; {
	case d > 0:
		a.mem.Force(d)
	case d < 0:
		a.mem.Release(-d)
	}
	b.memory = want
}
