//go:build !longhaul_regress

package producer

import "github.com/longhaul-kafka/longhaul/producer/internal/judge"

// regressBuild: the default build, where no knob can be set (see
// regress.go); negative controls skip.
const regressBuild = false

// bugCases are the knob settings a test with a negative control runs:
// only without the bug here.
var bugCases = []bool{false}

// set and setFixedWindow change nothing here; every test reaching them
// calls needRegress first, which skips it in this build.
func (r *regressions) set(knob) {}

func (r *regressions) setFixedWindow(int) {}

func (r *regressions) setJudge(*judge.Matrix) {}
