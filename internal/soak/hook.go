package soak

import (
	"context"
	"log/slog"
	"time"
)

// connLostMsg is the message of the producer's log record for a
// connection it gave up (producer/conns.go, connFailed). If the producer
// renames it, the hook sees nothing and the window check reports the
// excess of abandoned connections as violations: it fails loudly, never
// silently passes.
const connLostMsg = "broker connection lost; retrying its batches"

// lossHook is a slog.Handler in front of a producer's logger: it passes
// records on to inner at the levels inner enables, and reports each
// connection loss to onLoss with the node id, from the logging goroutine
// (the producer's sender, holding none of the producer's locks).
type lossHook struct {
	inner  slog.Handler
	onLoss func(node int32, at time.Time)
}

// Enabled implements slog.Handler: connection losses are logged at Info.
func (h *lossHook) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelInfo || h.inner.Enabled(ctx, l)
}

// Handle implements slog.Handler.
func (h *lossHook) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == connLostMsg {
		node := int32(-1)
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "node" {
				node = int32(a.Value.Int64())
				return false
			}
			return true
		})
		at := r.Time
		if at.IsZero() {
			at = time.Now()
		}
		h.onLoss(node, at)
	}
	if h.inner.Enabled(ctx, r.Level) {
		return h.inner.Handle(ctx, r)
	}
	return nil
}

// WithAttrs implements slog.Handler.
func (h *lossHook) WithAttrs(as []slog.Attr) slog.Handler {
	return &lossHook{inner: h.inner.WithAttrs(as), onLoss: h.onLoss}
}

// WithGroup implements slog.Handler.
func (h *lossHook) WithGroup(name string) slog.Handler {
	return &lossHook{inner: h.inner.WithGroup(name), onLoss: h.onLoss}
}
