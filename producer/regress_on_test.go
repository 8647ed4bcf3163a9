//go:build longhaul_regress

package producer

import "github.com/longhaul-kafka/longhaul/producer/internal/judge"

// regressBuild: knobs can be set (see regress.go).
const regressBuild = true

// bugCases are the knob settings a test with a negative control runs:
// without the bug, and with it back.
var bugCases = []bool{false, true}

// set turns k on.
func (r *regressions) set(k knob) { r.bits |= 1 << k }

// setFixedWindow makes the limiter use n as every partition's limit.
func (r *regressions) setFixedWindow(n int) { r.fixed = n }

// setJudge makes the sender apply m, a matrix with a fixed bug's row or
// rule (judge_variants_test.go).
func (r *regressions) setJudge(m *judge.Matrix) { r.judge = m }
