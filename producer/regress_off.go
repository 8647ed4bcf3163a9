//go:build !longhaul_regress

package producer

import "github.com/longhaul-kafka/longhaul/producer/internal/judge"

// regressions is empty in the default build: no knob can be set, and on
// is the constant false, so the compiler drops the code behind each knob.
type regressions struct{}

func (regressions) on(knob) bool { return false }

// fixedWindow is the per-partition limit a negative control imposes on
// the limiter (0: none); always 0 here.
func (regressions) fixedWindow() int { return 0 }

// judgeMatrix is the error matrix the sender applies: always
// judge.Production here.
func (regressions) judgeMatrix() *judge.Matrix { return &judge.Production }

// passMemory is empty in the default build: a completion's buffer.memory
// is released at once.
type passMemory struct{}

func (passMemory) hold(*Producer, int64) bool { return false }

func (passMemory) release(*Producer) {}
