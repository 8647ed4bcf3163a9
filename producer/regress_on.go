//go:build longhaul_regress

package producer

import (
	"github.com/longhaul-kafka/longhaul/internal/testhooks"
	"github.com/longhaul-kafka/longhaul/producer/internal/judge"
)

func init() {
	testhooks.NoSessionRenewal = Opt(optFunc(func(c *config) error {
		c.regress.bits |= 1 << noSessionRenewal
		return nil
	}))
}

// regressions are the knobs a negative control turned on (knob), in the
// longhaul_regress build only.
type regressions struct {
	bits uint64
	// fixed, when positive, makes the limiter ignore learned windows and
	// the first-batch gate and use it as every partition's limit
	// (testhooks.FixedWindow): unsafe above the broker's real window.
	fixed int
	// judge, when set, is an error matrix with the row or rule a fixed
	// bug broke.
	judge *judge.Matrix
}

func (r regressions) on(k knob) bool { return r.bits&(1<<k) != 0 }

func (r regressions) fixedWindow() int { return r.fixed }

// judgeMatrix is the error matrix the sender applies: a negative control's
// variant (setJudge), else judge.Production.
func (r regressions) judgeMatrix() *judge.Matrix {
	if r.judge != nil {
		return r.judge
	}
	return &judge.Production
}

// passMemory is the buffer.memory of completions that the negative control
// releasePerPass leaves to the end of the callback goroutine's pass.
type passMemory struct{ n int64 }

// hold keeps n for the end of the pass under releasePerPass.
func (m *passMemory) hold(p *Producer, n int64) bool {
	if !p.cfg.regress.on(releasePerPass) {
		return false
	}
	m.n += n
	return true
}

// release gives back what hold kept.
func (m *passMemory) release(p *Producer) {
	if m.n > 0 {
		p.mem.Release(m.n)
		m.n = 0
	}
}
