package producer

// Flush waits for the records produced before it, not for the producer to
// go idle: under steady load from other goroutines the producer never goes
// idle. Every accepted record carries the generation current when it was
// accepted; each Flush call starts a new generation and waits until no
// record of its generation or an earlier one is outstanding.

// genCount is how many accepted records of one generation are not yet
// called back.
type genCount struct {
	gen uint64
	n   int64
}

// flushWaiter is a Flush call waiting for generations up to gen.
type flushWaiter struct {
	gen  uint64
	done chan struct{}
}

// accept counts one accepted record in the current generation and
// returns that generation. Called with acc.mu held.
func (a *accumulator) accept() uint64 {
	if k := len(a.gens); k > 0 && a.gens[k-1].gen == a.gen {
		a.gens[k-1].n++
	} else {
		a.gens = append(a.gens, genCount{gen: a.gen, n: 1})
	}
	return a.gen
}

// done counts n records of generation gen as called back and releases
// the Flush calls that no longer wait for anything. Called with acc.mu held.
func (a *accumulator) done(gen uint64, n int64) {
	i := 0
	for i < len(a.gens) && a.gens[i].gen != gen {
		i++
	}
	if i == len(a.gens) || a.gens[i].n < n {
		panic("producer: more callbacks than records")
	}
	a.gens[i].n -= n
	if i != 0 {
		return
	}
	k := 0
	for k < len(a.gens) && a.gens[k].n == 0 {
		k++
	}
	if k == 0 {
		return
	}
	a.gens = append(a.gens[:0], a.gens[k:]...)
	keep := a.flushWaiters[:0]
	for _, w := range a.flushWaiters {
		if len(a.gens) == 0 || a.gens[0].gen > w.gen {
			close(w.done)
			continue
		}
		keep = append(keep, w)
	}
	clear(a.flushWaiters[len(keep):])
	a.flushWaiters = keep
}

// startFlush begins a Flush: a new generation starts, every open batch
// is sealed (records produced before the call do not wait for linger.ms;
// later records get a fresh batch and their own linger), and the returned
// channel is closed once every record of an earlier generation has been
// called back. Records still waiting for their topic's partitions are
// sealed when they are placed (setPartitions). Called with acc.mu held.
func (a *accumulator) startFlush() <-chan struct{} {
	g := a.gen
	a.gen++
	a.flushedGen, a.flushed = g, true
	for _, ps := range a.active.members() {
		a.seal(ps)
	}
	done := make(chan struct{})
	if a.cfg.regress.on(flushWaitsAll) {
		g = ^uint64(0) // wait until nothing at all is outstanding
	}
	if len(a.gens) == 0 || a.gens[0].gen > g {
		close(done)
		return done
	}
	a.flushWaiters = append(a.flushWaiters, flushWaiter{gen: g, done: done})
	return done
}
