package inflight

import (
	"errors"
	"testing"
)

// TestKIP1269TestPlan has one case per item of the KIP-1269 test plan.
func TestKIP1269TestPlan(t *testing.T) {
	cases := []struct {
		name string
		cfg  Config
		run  func(h *harness)
	}{
		{
			name: "default and minimum value",
			cfg:  Config{MaxRequestsPerConn: 1},
			run: func(h *harness) {
				p := h.part("t", 0, 1)
				h.wantLimit(p, DefaultWindow)
				h.wantGated(p, true)
				reqs := h.wantFill(p, 1, 1) // gate: one batch until acked
				h.reply(ack(absent), reqs...)
				h.wantLimit(p, 5)
				h.wantGated(p, false)
				// MaxRequestsPerConn = 1 is the minimum and is accepted.
				h.wantFill(p, 1, 1)
				for _, bad := range []Config{{MaxRequestsPerConn: 0}, {MaxRequestsPerConn: -3}, {MaxRequestsPerConn: 1, MaxWindow: -1}} {
					_, err := New(bad)
					var ce *ConfigError
					if !errors.Is(err, ErrInvalidConfig) || !errors.As(err, &ce) {
						h.t.Fatalf("New(%+v) = %v, want a *ConfigError", bad, err)
					}
				}
				_, err := New(Config{})
				var ce *ConfigError
				if !errors.As(err, &ce) || ce.Field != "max.in.flight.requests.per.connection" {
					h.t.Fatalf("New(zero Config) = %v, want the property named", err)
				}
			},
		},
		{
			name: "learns the window from a response and aligns with the leader",
			cfg:  Config{MaxRequestsPerConn: 100},
			run: func(h *harness) {
				p := h.part("t", 0, 1)
				q := h.part("t", 1, 2)
				h.learn(p, 1, 20)
				h.learn(q, 2, 7)
				h.wantLimit(p, 20)
				h.wantLimit(q, 7)
				reqs := h.wantFill(p, 1, 20)
				h.wantFill(q, 2, 7)
				// Every current response sets the limit, also downwards.
				h.reply(ack(6), reqs[0])
				h.wantLimit(p, 6)
				h.wantLimit(q, 7)
				h.reply(ack(20), reqs[1:]...)
				h.wantLimit(p, 20)
			},
		},
		{
			name: "leader change resets to 5 and rediscovers from the new leader",
			cfg:  Config{MaxRequestsPerConn: 100},
			run: func(h *harness) {
				p := h.part("t", 0, 1)
				h.learn(p, 1, 20)
				old := h.wantFill(p, 1, 20)
				if !h.l.SetLeader(p, 2, 1) {
					h.t.Fatal("SetLeader to a new leader reported no change")
				}
				h.wantLimit(p, 5)
				h.wantGated(p, true)
				// Nothing new while the old leader's batches are in flight
				// (gate: 1), and their acks change nothing.
				h.wantFill(p, 2, 20)
				h.reply(ack(20), old...)
				h.wantLimit(p, 5)
				h.wantGated(p, true)
				// First response of the new leader sets the limit.
				first := h.wantFill(p, 2, 1)
				h.reply(ack(8), first...)
				h.wantLimit(p, 8)
				h.wantFill(p, 2, 8)
			},
		},
		{
			name: "leader epoch change alone resets to 5",
			cfg:  Config{MaxRequestsPerConn: 100},
			run: func(h *harness) {
				p := h.part("t", 0, 1)
				h.learn(p, 1, 20)
				if h.l.SetLeader(p, 1, 0) {
					h.t.Fatal("SetLeader with the same leader and epoch reported a change")
				}
				h.wantLimit(p, 20)
				if !h.l.SetLeader(p, 1, 1) {
					h.t.Fatal("SetLeader with a new epoch reported no change")
				}
				h.wantLimit(p, 5)
				h.wantGated(p, true)
				h.wantFill(p, 1, 1)
			},
		},
		{
			name: "no error for max.in.flight above 5 with idempotence",
			cfg:  Config{MaxRequestsPerConn: 100},
			run: func(h *harness) {
				ps := make([]*Partition, 101)
				for i := range ps {
					ps[i] = h.part("t", int32(i), 1)
				}
				for i := 0; i < 100; i++ {
					if h.send(1, ps[i]) == nil {
						h.t.Fatalf("request %d refused below the cap of 100", i)
					}
				}
				h.wantNode(1, 100)
				if h.send(1, ps[100]) != nil {
					h.t.Fatal("request 101 admitted above the cap of 100")
				}
			},
		},
		{
			name: "two topics on one broker with windows 5 and 20 are independent",
			cfg:  Config{MaxRequestsPerConn: 100},
			run: func(h *harness) {
				a := h.part("five", 0, 1)
				b := h.part("twenty", 0, 1)
				h.learn(a, 1, 5)
				h.learn(b, 1, 20)
				var reqs []*Request
				for r := h.send(1, a, b); r != nil; r = h.send(1, a, b) {
					reqs = append(reqs, r)
				}
				h.wantInFlight(a, 5)
				h.wantInFlight(b, 20)
				// Each response carries its own topic's window.
				for _, r := range reqs {
					for _, tk := range r.Tickets {
						w := int32(5)
						if tk.Partition == b {
							w = 20
						}
						h.complete(tk, ack(w))
					}
					h.l.Finish(r)
				}
				h.wantLimit(a, 5)
				h.wantLimit(b, 20)
				h.wantFill(a, 1, 5)
				h.wantFill(b, 1, 20)
			},
		},
		{
			name: "two topics with windows 5 and 20 and max.in.flight=1",
			cfg:  Config{MaxRequestsPerConn: 1},
			run: func(h *harness) {
				a := h.part("five", 0, 1)
				b := h.part("twenty", 0, 1)
				h.learn(a, 1, 5)
				h.learn(b, 1, 20)
				r := h.send(1, a, b)
				if r == nil || len(r.Tickets) != 2 {
					h.t.Fatalf("one request should carry both partitions: %+v", r)
				}
				if h.send(1, a) != nil || h.send(1, b) != nil {
					h.t.Fatal("second request admitted with max.in.flight=1")
				}
				h.wantLimit(a, 5)
				h.wantLimit(b, 20)
			},
		},
		{
			name: "max.in.flight=1 with window 20 sends at most 1 per partition",
			cfg:  Config{MaxRequestsPerConn: 1},
			run: func(h *harness) {
				p := h.part("t", 0, 1)
				h.learn(p, 1, 20)
				h.wantLimit(p, 20)
				h.wantFill(p, 1, 1)
			},
		},
		{
			name: "max.in.flight=20 with window 5 sends at most 5 per partition",
			cfg:  Config{MaxRequestsPerConn: 20},
			run: func(h *harness) {
				p := h.part("t", 0, 1)
				h.learn(p, 1, 5)
				h.wantFill(p, 1, 5)
				h.wantNode(1, 5)
			},
		},
		{
			name: "old broker without the field means 5",
			cfg:  Config{MaxRequestsPerConn: 10},
			run: func(h *harness) {
				p := h.part("t", 0, 1)
				h.learn(p, 1, absent)
				h.wantLimit(p, 5)
				reqs := h.wantFill(p, 1, 5)
				h.reply(ack(absent), reqs...)
				h.wantLimit(p, 5)
				h.wantFill(p, 1, 5)
			},
		},
		{
			name: "leader moves from a new broker to an old one: back to 5",
			cfg:  Config{MaxRequestsPerConn: 100},
			run: func(h *harness) {
				p := h.part("t", 0, 1)
				h.learn(p, 1, 20)
				stranded := h.wantFill(p, 1, 20)
				h.l.SetLeader(p, 2, 1)
				h.wantLimit(p, 5)
				// Late acks from the new broker must not raise the limit.
				h.reply(ack(20), stranded...)
				h.wantLimit(p, 5)
				first := h.wantFill(p, 2, 1)
				h.reply(ack(absent), first...)
				h.wantLimit(p, 5)
				reqs := h.wantFill(p, 2, 5)
				h.reply(ack(absent), reqs...)
				h.wantLimit(p, 5)
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.run(newHarness(t, c.cfg)) })
	}
}
