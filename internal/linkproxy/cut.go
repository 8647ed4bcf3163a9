package linkproxy

import (
	"math/rand/v2"
	"sync"
	"time"
)

// CutOne closes one proxied connection chosen with rng, on both sides, and
// reports whether there was one to cut. rng must not be used concurrently
// elsewhere.
func (p *Proxy) CutOne(rng *rand.Rand) bool {
	p.mu.Lock()
	if len(p.conns) == 0 {
		p.mu.Unlock()
		return false
	}
	// Map order is not random enough to rely on; pick by index.
	i := rng.IntN(len(p.conns))
	var victim *link
	for l := range p.conns {
		if i == 0 {
			victim = l
			break
		}
		i--
	}
	p.mu.Unlock()
	victim.cut()
	p.cuts.Add(1)
	return true
}

// CutRandomly starts cutting one random connection (see [Proxy.CutOne]) at
// exponentially distributed intervals with the given mean, until stop is
// called or the proxy is closed. stop is idempotent and waits for the
// cutting goroutine to exit. rng is owned by that goroutine until stop
// returns. It panics if meanInterval is not positive, and returns
// [ErrClosed] if the proxy is already closed.
func (p *Proxy) CutRandomly(rng *rand.Rand, meanInterval time.Duration) (stop func(), err error) {
	if meanInterval <= 0 {
		panic("linkproxy: CutRandomly needs a positive mean interval")
	}
	p.mu.Lock()
	closed := p.closed
	p.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	quit := make(chan struct{})
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		t := time.NewTimer(time.Duration(rng.ExpFloat64() * float64(meanInterval)))
		defer t.Stop()
		for {
			select {
			case <-quit:
				return
			case <-p.done:
				return
			case <-t.C:
				p.CutOne(rng)
				t.Reset(time.Duration(rng.ExpFloat64() * float64(meanInterval)))
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() { close(quit) })
		<-exited
	}, nil
}
