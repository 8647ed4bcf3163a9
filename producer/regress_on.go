//go:build longhaul_regress

package producer

import "github.com/longhaul-kafka/longhaul/internal/testhooks"

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
}

func (r regressions) on(k knob) bool { return r.bits&(1<<k) != 0 }

func (r regressions) fixedWindow() int { return r.fixed }
