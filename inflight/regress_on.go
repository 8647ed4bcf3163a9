//go:build longhaul_regress

package inflight

import "github.com/longhaul-kafka/longhaul/internal/testhooks"

// breaks are the rules a negative control switched off, and the fixed
// window it imposes, in the longhaul_regress build only.
type breaks struct {
	bits   uint16
	window int // setFixedWindow; 0 = off
}

func (b breaks) on(r rule) bool { return b.bits&(1<<r) != 0 }

func (b breaks) fixed() int { return b.window }

const panicFixedWindow = "inflight: fixed window n < 0"

func init() {
	testhooks.FixedWindow = func(l any, n int) { l.(*Limiter).setFixedWindow(n) }
}

// setFixedWindow is for negative controls only, reached from other
// packages through [testhooks.FixedWindow]: it ignores learned windows and
// the first-batch gate and uses n as every partition's limit (draining and
// the node cap still apply); n == 0 restores normal behaviour, n < 0
// panics. It is unsafe above the broker's real window: a retried batch may
// then be appended twice or rejected as out of order.
func (l *Limiter) setFixedWindow(n int) {
	if n < 0 {
		panic(panicFixedWindow)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.brk.window = n
}
