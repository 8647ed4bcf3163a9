//go:build longhaul_regress

package inflight

import (
	"testing"

	"github.com/longhaul-kafka/longhaul/internal/testhooks"
)

// regressBuild: rules can be switched off (see regress.go).
const regressBuild = true

// set switches r off.
func (b *breaks) set(r rule) { b.bits |= 1 << r }

// setFixed sets the fixed window without the lock, before the limiter is
// shared.
func (b *breaks) setFixed(n int) { b.window = n }

// TestFixedWindowHook: the fixed window the producer's negative controls
// set through testhooks ignores learned windows and the gate, and 0 turns
// it off again.
func TestFixedWindowHook(t *testing.T) {
	h := newHarness(t, Config{MaxRequestsPerConn: 100})
	p := h.part("t", 0, 1)
	testhooks.FixedWindow(h.l, 12)
	h.wantLimit(p, 12)
	reqs := h.wantFill(p, 1, 12)
	h.reply(ack(3), reqs...)
	testhooks.FixedWindow(h.l, 0)
	h.wantLimit(p, 3)
}

// TestFixedWindowNegativePanics: a negative fixed window is a programmer
// error.
func TestFixedWindowNegativePanics(t *testing.T) {
	h := newHarness(t, Config{MaxRequestsPerConn: 10})
	defer func() {
		if s, _ := recover().(string); s != panicFixedWindow {
			t.Fatalf("panic %q, want %q", s, panicFixedWindow)
		}
	}()
	testhooks.FixedWindow(h.l, -1)
}
