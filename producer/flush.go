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

// acceptLocked counts one accepted record in the current generation and
// returns that generation. Called with acc.mu held.
func (p *Producer) acceptLocked() uint64 {
	if k := len(p.acc.gens); k > 0 && p.acc.gens[k-1].gen == p.acc.gen {
		p.acc.gens[k-1].n++
	} else {
		p.acc.gens = append(p.acc.gens, genCount{gen: p.acc.gen, n: 1})
	}
	return p.acc.gen
}

// doneLocked counts n records of generation gen as called back and releases
// the Flush calls that no longer wait for anything. Called with acc.mu held.
func (p *Producer) doneLocked(gen uint64, n int64) {
	i := 0
	for i < len(p.acc.gens) && p.acc.gens[i].gen != gen {
		i++
	}
	if i == len(p.acc.gens) || p.acc.gens[i].n < n {
		panic("producer: more callbacks than records")
	}
	p.acc.gens[i].n -= n
	if i != 0 {
		return
	}
	k := 0
	for k < len(p.acc.gens) && p.acc.gens[k].n == 0 {
		k++
	}
	if k == 0 {
		return
	}
	p.acc.gens = append(p.acc.gens[:0], p.acc.gens[k:]...)
	keep := p.acc.flushWaiters[:0]
	for _, w := range p.acc.flushWaiters {
		if len(p.acc.gens) == 0 || p.acc.gens[0].gen > w.gen {
			close(w.done)
			continue
		}
		keep = append(keep, w)
	}
	clear(p.acc.flushWaiters[len(keep):])
	p.acc.flushWaiters = keep
}

// startFlushLocked begins a Flush: a new generation starts, every open batch
// is sealed (records produced before the call do not wait for linger.ms;
// later records get a fresh batch and their own linger), and the returned
// channel is closed once every record of an earlier generation has been
// called back. Records still waiting for their topic's partitions are
// sealed when they are placed (setPartitionsLocked). Called with acc.mu held.
func (p *Producer) startFlushLocked() <-chan struct{} {
	g := p.acc.gen
	p.acc.gen++
	p.acc.flushedGen, p.acc.flushed = g, true
	for _, ps := range p.acc.active {
		p.sealLocked(ps)
	}
	done := make(chan struct{})
	if p.cfg.regress.on(flushWaitsAll) {
		g = ^uint64(0) // wait until nothing at all is outstanding
	}
	if len(p.acc.gens) == 0 || p.acc.gens[0].gen > g {
		close(done)
		return done
	}
	p.acc.flushWaiters = append(p.acc.flushWaiters, flushWaiter{gen: g, done: done})
	return done
}
