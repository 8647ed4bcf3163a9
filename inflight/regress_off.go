//go:build !longhaul_regress

package inflight

// breaks is empty in the default build: no rule can be switched off, and
// there is no fixed window.
type breaks struct{}

func (breaks) on(rule) bool { return false }

// fixed is the limit a negative control imposes on every partition (0:
// none); always 0 here.
func (breaks) fixed() int { return 0 }
