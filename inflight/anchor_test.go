package inflight

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestAnchor covers the window counted from the oldest unacknowledged
// position, by named cases. In each, the in-flight count alone would admit
// the refused batch; only the anchor refuses it.
func TestAnchor(t *testing.T) {
	cases := []struct {
		name string
		run  func(t *testing.T, h *harness)
	}{
		{
			name: "lost early response: later acks keep the anchor until it is acked",
			run: func(t *testing.T, h *harness) {
				p := h.part("t", 0, 1)
				h.learn(p, 1, 5) // position 0
				h.wantAnchor(p, 0, false)
				reqs := h.wantFill(p, 1, 5) // positions 1..5
				h.wantAnchor(p, 1, true)
				h.reply(ack(5), reqs[1:]...) // 2..5 acked, 1's response is late
				h.wantInFlight(p, 1)
				h.wantAnchor(p, 1, true)
				require.False(t, h.l.InWindow(p, 6), "6 is 5 positions after the anchor 1")
				require.True(t, h.l.InWindow(p, 5))
				require.False(t, h.l.MayReserve(p, 6))
				require.Nil(t, h.sendAt(1, p, 6), "1 in flight of 5, but 6 is outside the window from 1")
				h.reply(ack(5), reqs[0])
				h.wantAnchor(p, 0, false)
				h.wantFill(p, 1, 5) // 6..10
				h.wantAnchor(p, 6, true)
			},
		},
		{
			name: "a failed ticket keeps its position; its retry's ack frees the window",
			run: func(t *testing.T, h *harness) {
				p := h.part("t", 0, 1)
				h.learn(p, 1, 5)
				reqs := h.wantFill(p, 1, 5)
				h.reply(ack(5), reqs[1:]...)
				h.reply(timeout, reqs[0]) // position 1 failed: drained, gate re-armed
				h.wantAnchor(p, 1, true)
				require.False(t, h.l.MayReserve(p, 6))
				require.Nil(t, h.sendAt(1, p, 6))
				retry := h.send(1, p)
				require.NotNil(t, retry)
				require.Equal(t, uint64(1), retry.Tickets[0].Pos(), "the retry goes at its own position")
				h.reply(ack(5), retry)
				h.wantAnchor(p, 0, false)
				h.wantFill(p, 1, 5)
			},
		},
		{
			name: "abandon releases: the anchor moves to the next unacknowledged position",
			run: func(t *testing.T, h *harness) {
				p := h.part("t", 0, 1)
				h.learn(p, 1, 5)
				reqs := h.wantFill(p, 1, 5) // 1..5
				h.reply(timeout, reqs[0], reqs[2])
				h.reply(ack(5), reqs[1], reqs[3], reqs[4])
				h.wantAnchor(p, 1, true)
				require.False(t, h.l.InWindow(p, 6))
				h.abandon(p, 1)
				h.wantAnchor(p, 3, true) // 2 was acked
				require.True(t, h.l.InWindow(p, 6))
				require.False(t, h.l.InWindow(p, 8))
				h.abandon(p, 3)
				h.wantAnchor(p, 0, false)
				r := h.send(1, p) // the gate: one new batch, position 6
				require.NotNil(t, r)
				require.Equal(t, uint64(6), r.Tickets[0].Pos())
				// Abandoning a position acked, abandoned or never reserved
				// does nothing.
				for _, pos := range []uint64{2, 3, 100} {
					h.l.Abandon(p, pos)
					h.wantAnchor(p, 6, true)
				}
				// Abandoning one in flight releases it; its ticket still
				// counts until completed, and the failure does not bring
				// the position back.
				h.l.Abandon(p, 6)
				h.wantAnchor(p, 0, false)
				h.wantInFlight(p, 1)
				h.l.Complete(r.Tickets[0], timeout)
				h.l.Finish(r)
				h.wantInFlight(p, 0)
				h.wantAnchor(p, 0, false)
				require.False(t, h.l.MayReserve(p, 6), "an abandoned position may not be sent again")
			},
		},
		{
			name: "positions survive leader changes, new connections and resets",
			run: func(t *testing.T, h *harness) {
				p := h.part("t", 0, 1)
				h.learn(p, 1, 20)
				reqs := h.wantFill(p, 1, 20) // 1..20
				h.reply(timeout, reqs[0])
				h.reply(ack(20), reqs[1:]...)
				h.wantAnchor(p, 1, true)
				h.l.SetLeader(p, 2, 1)
				h.wantAnchor(p, 1, true)
				h.l.NewConnection(2)
				h.wantAnchor(p, 1, true)
				h.l.ResetAll() // an epoch bump: sequences renumbered, positions kept
				h.wantAnchor(p, 1, true)
				h.l.Reset(p)
				h.wantAnchor(p, 1, true)
				h.wantLimit(p, 5)
				require.False(t, h.l.InWindow(p, 21), "limit 5 after the reset counts from the anchor 1")
				require.Nil(t, h.sendAt(2, p, 21))
				retry := h.send(2, p)
				require.NotNil(t, retry)
				require.Equal(t, uint64(1), retry.Tickets[0].Pos())
				h.reply(ack(20), retry)
				h.wantAnchor(p, 0, false)
				h.wantFill(p, 2, 20) // 21..40
			},
		},
		{
			name: "a stale ticket's ack releases its position but teaches nothing",
			run: func(t *testing.T, h *harness) {
				p := h.part("t", 0, 1)
				h.learn(p, 1, 20)
				reqs := h.wantFill(p, 1, 20)
				h.l.SetLeader(p, 2, 1)
				h.reply(ack(20), reqs...)
				h.wantAnchor(p, 0, false)
				h.wantLimit(p, 5)
				h.wantGated(p, true)
			},
		},
		{
			name: "misuse: a position in flight or released cannot be reserved",
			run: func(t *testing.T, h *harness) {
				p := h.part("t", 0, 1)
				h.learn(p, 1, 5)
				r := h.sendAt(1, p, 1)
				require.False(t, h.l.MayReserve(p, 1), "in flight")
				require.PanicsWithValue(t, panicFlyingPos, func() { h.sendAt(1, p, 1) })
				require.False(t, h.l.MayReserve(p, 0), "acknowledged")
				require.PanicsWithValue(t, panicReleasedPos, func() { h.sendAt(1, p, 0) })
				h.reply(ack(5), r)
				require.PanicsWithValue(t, panicReleasedPos, func() { h.sendAt(1, p, 1) })
			},
		},
		{
			name: "window MaxInt32: memory follows the batches outstanding, not the window",
			run: func(t *testing.T, h *harness) {
				p := h.part("t", 0, 1)
				h.learn(p, 1, math.MaxInt32)
				h.wantLimit(p, math.MaxInt32)
				late := h.send(1, p) // position 1; its response is late throughout
				require.NotNil(t, late)
				n := h.l.Node(1)
				cands := []Candidate{{Partition: p, Pos: 2}}
				var req Request
				cycle := func() {
					require.True(t, h.l.Reserve(n, cands, &req))
					cands[0].Pos++
					h.l.Complete(req.Tickets[0], ack(math.MaxInt32))
					h.l.Finish(&req)
				}
				cycle()
				require.Zero(t, testing.AllocsPerRun(10000, cycle), "allocations per reserve cycle behind a late response")
				h.wantAnchor(p, 1, true)
				require.LessOrEqual(t, cap(p.ents), 4, "acked positions behind the anchor must not be kept")
				// 1000 outstanding: the list holds 1000, whatever the window.
				for range 1000 {
					require.NotNil(t, h.sendAt(1, p, cands[0].Pos))
					cands[0].Pos++
				}
				require.Equal(t, 1001, len(p.ents)-p.head)
				require.Less(t, cap(p.ents), 4096)
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.run(t, newHarness(t, Config{MaxRequestsPerConn: 10000}))
		})
	}
}
