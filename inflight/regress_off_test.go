//go:build !longhaul_regress

package inflight

// regressBuild: the default build, where no rule can be switched off (see
// regress.go); the model's negative controls skip.
const regressBuild = false

func (b *breaks) set(rule) { panic("inflight: a rule switched off outside the longhaul_regress build") }

func (b *breaks) setFixed(int) { panic("inflight: a fixed window outside the longhaul_regress build") }
