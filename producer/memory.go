package producer

import (
	"context"
	"sync"
	"sync/atomic"

	"golang.org/x/sync/semaphore"
)

// memBudget is buffer.memory. Produce acquires a record's worst-case
// encoded size before placing it (blocking only there); an open batch
// holds the larger of its records' sizes and its buffer's capacity
// (growMemory, taken as the buffer grows), and from sealing on exactly
// its buffer's capacity (settleMemory), so the budget counts the memory
// batches really hold, not only record bytes. Settling once per batch,
// not per record, keeps the budget's lock off the per-record path. A buffer
// that grows under Producer.mu cannot wait: Force takes the growth at
// once, past the limit if need be, and the next releases pay that back
// before Produce may acquire again.
type memBudget struct {
	sem  *semaphore.Weighted
	mu   sync.Mutex
	debt int64        // forced beyond the limit, paid back first by Release
	held atomic.Int64 // bytes held: acquired and forced, not yet released
}

func newMemBudget(limit int64) *memBudget {
	return &memBudget{sem: semaphore.NewWeighted(limit)}
}

// Acquire blocks until n bytes are free or ctx is done.
func (m *memBudget) Acquire(ctx context.Context, n int64) error {
	if err := m.sem.Acquire(ctx, n); err != nil {
		return err
	}
	m.held.Add(n)
	return nil
}

// TryAcquire takes n bytes if they are free now.
func (m *memBudget) TryAcquire(n int64) bool {
	if !m.sem.TryAcquire(n) {
		return false
	}
	m.held.Add(n)
	return true
}

// Force takes n bytes without waiting, past the limit if need be.
func (m *memBudget) Force(n int64) {
	if n <= 0 {
		return
	}
	m.held.Add(n)
	// Under mu with Release's payback, so no release can slip between a
	// failed TryAcquire and the debt it leaves and hand Produce bytes
	// that pay for nothing.
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.sem.TryAcquire(n) {
		m.debt += n
	}
}

// Release gives back n bytes; forced bytes are paid back first.
func (m *memBudget) Release(n int64) {
	if n <= 0 {
		return
	}
	m.held.Add(-n)
	m.mu.Lock()
	defer m.mu.Unlock()
	paid := min(m.debt, n)
	m.debt -= paid
	if n > paid {
		m.sem.Release(n - paid)
	}
}

// Held returns the bytes held now.
func (m *memBudget) Held() int64 { return m.held.Load() }

// growMemory makes b hold at least its buffer's capacity, taking the
// difference: called as records are placed.
func (p *Producer) growMemory(b *batch) {
	if p.cfg.regress.recordBytesOnly {
		return
	}
	if c := int64(b.builder.Cap()); c > b.memory {
		p.mem.Force(c - b.memory)
		b.memory = c
	}
}

// settleMemory makes b hold exactly its buffer's capacity of buffer.memory
// (0 once it has no records), taking or giving back the difference.
func (p *Producer) settleMemory(b *batch) {
	want := int64(b.builder.Cap())
	if len(b.records) == 0 {
		want = 0
	}
	if p.cfg.regress.recordBytesOnly {
		return
	}
	switch d := want - b.memory; {
	case d > 0:
		p.mem.Force(d)
	case d < 0:
		p.mem.Release(-d)
	}
	b.memory = want
}
