package inflight

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRules covers the rules beyond the KIP test plan: the first-batch gate,
// draining, stale completions, resets, caps and odd broker values.
func TestRules(t *testing.T) {
	cases := []struct {
		name string
		cfg  Config
		run  func(h *harness)
	}{
		{
			name: "values 1 to 4 are honoured",
			cfg:  Config{MaxRequestsPerConn: 100},
			run: func(h *harness) {
				p := h.part("t", 0, 1)
				h.learn(p, 1, 3)
				h.wantLimit(p, 3)
				reqs := h.wantFill(p, 1, 3)
				h.reply(ack(1), reqs...)
				h.wantLimit(p, 1)
				h.wantFill(p, 1, 1)
			},
		},
		{
			name: "MaxWindow caps the learned window",
			cfg:  Config{MaxRequestsPerConn: 100, MaxWindow: 10},
			run: func(h *harness) {
				p := h.part("t", 0, 1)
				h.learn(p, 1, 20)
				h.wantLimit(p, 10)
				reqs := h.wantFill(p, 1, 10)
				h.reply(ack(3), reqs...)
				h.wantLimit(p, 3)
			},
		},
		{
			name: "gate: one batch until acked, a failure keeps it armed",
			cfg:  Config{MaxRequestsPerConn: 100},
			run: func(h *harness) {
				p := h.part("t", 0, 1)
				first := h.wantFill(p, 1, 1)
				h.reply(Outcome{Window: 20, WindowPresent: true}, first...) // NOT_LEADER etc. with the field
				h.wantLimit(p, 20)                                          // a current response still teaches the window
				h.wantGated(p, true)
				retry := h.wantFill(p, 1, 1)
				h.reply(ack(20), retry...)
				h.wantGated(p, false)
				h.wantFill(p, 1, 20)
			},
		},
		{
			name: "draining: nothing new until in-flight is 0, then the gate re-arms",
			cfg:  Config{MaxRequestsPerConn: 100},
			run: func(h *harness) {
				p := h.part("t", 0, 1)
				h.learn(p, 1, 20)
				reqs := h.wantFill(p, 1, 20)
				h.reply(timeout, reqs[0])
				if !h.l.Draining(p) || h.l.MayReserve(p, h.pos(p)) {
					h.t.Fatal("a failure must start draining and stop new batches")
				}
				h.wantLimit(p, 20) // no response: nothing learned
				h.wantFill(p, 1, 19)
				h.reply(ack(20), reqs[1:19]...)
				if !h.l.Draining(p) || h.send(1, p) != nil {
					h.t.Fatal("still one batch in flight: must keep draining")
				}
				h.reply(ack(20), reqs[19])
				if h.l.Draining(p) {
					h.t.Fatal("drained but still draining")
				}
				h.wantGated(p, true)
				h.wantLimit(p, 20)
				retry := h.wantFill(p, 1, 1)
				h.reply(ack(20), retry...)
				h.wantFill(p, 1, 20)
			},
		},
		{
			name: "new connection resets the partitions it leads, lazily",
			cfg:  Config{MaxRequestsPerConn: 3},
			run: func(h *harness) {
				p := h.part("t", 0, 1)
				q := h.part("t", 1, 2)
				h.learn(p, 1, 20)
				h.learn(q, 2, 20)
				old := h.wantFill(p, 1, 3) // node cap 3
				h.wantNode(1, 3)
				h.l.NewConnection(1)
				h.wantNode(1, 0) // old connection's requests no longer count
				h.wantLimit(p, 5)
				h.wantGated(p, true)
				h.wantLimit(q, 20) // led by another node
				h.reply(ack(20), old...)
				h.wantLimit(p, 5) // stale acks teach nothing
				h.wantGated(p, true)
				h.wantNode(1, 0)
				first := h.wantFill(p, 1, 1)
				h.wantNode(1, 1)
				h.reply(ack(9), first...)
				h.wantLimit(p, 9)
				h.wantNode(1, 0)
			},
		},
		{
			name: "ResetAll resets every partition",
			cfg:  Config{MaxRequestsPerConn: 100},
			run: func(h *harness) {
				p := h.part("t", 0, 1)
				q := h.part("u", 0, 2)
				h.learn(p, 1, 20)
				h.learn(q, 2, 30)
				h.l.ResetAll()
				for _, x := range []*Partition{p, q} {
					h.wantLimit(x, 5)
					h.wantGated(x, true)
				}
				h.wantFill(p, 1, 1)
			},
		},
		{
			name: "invalid window is 5 and reported once per value, lock released",
			cfg:  Config{MaxRequestsPerConn: 100},
			run: func(h *harness) {
				var got []int32
				h.l.onInvalid = func(topic string, partition int32, v int32) {
					if topic != "t" || partition != 0 {
						h.t.Errorf("callback for %s-%d", topic, partition)
					}
					// Calls back into the Limiter: deadlocks if the lock is held.
					_ = h.l.Limit(h.l.Partition(topic, partition))
					got = append(got, v)
				}
				p := h.part("t", 0, 1)
				h.learn(p, 1, 20)
				for _, v := range []int32{0, 0, -7, -7, 0} {
					r := h.send(1, p)
					h.reply(ack(v), r)
					h.wantLimit(p, 5)
				}
				if want := "[0 -7 0]"; fmt.Sprint(got) != want {
					h.t.Fatalf("callbacks %v, want %s", got, want)
				}
			},
		},
		{
			name: "no leader: nothing may send",
			cfg:  Config{MaxRequestsPerConn: 100},
			run: func(h *harness) {
				p := h.l.Partition("t", 0)
				if h.l.MayReserve(p, h.pos(p)) || h.send(1, p) != nil {
					h.t.Fatal("partition without leader admitted")
				}
				h.part("t", 0, 1)
				h.l.SetLeader(p, -1, 3)
				if h.l.MayReserve(p, h.pos(p)) || h.send(1, p) != nil {
					h.t.Fatal("partition with leader -1 admitted")
				}
			},
		},
		{
			name: "Reset re-arms one partition only",
			cfg:  Config{MaxRequestsPerConn: 100},
			run: func(h *harness) {
				a := h.part("t", 0, 1)
				b := h.part("t", 1, 1)
				h.learn(a, 1, 20)
				h.learn(b, 1, 20)
				h.l.Reset(a)
				h.wantLimit(a, 5)
				h.wantGated(a, true)
				h.wantFill(a, 1, 1)
				h.wantLimit(b, 20)
				h.wantGated(b, false)
			},
		},
		{
			name: "reserve is all-or-nothing per request and skips other leaders",
			cfg:  Config{MaxRequestsPerConn: 1},
			run: func(h *harness) {
				a := h.part("t", 0, 1)
				b := h.part("t", 1, 1)
				c := h.part("t", 2, 2)
				r := h.send(1, a, a, c, b, a)
				if r == nil || len(r.Tickets) != 2 || r.Tickets[0].Partition != a || r.Tickets[1].Partition != b {
					h.t.Fatalf("want tickets for a and b once each, in order: %+v", r)
				}
				h.wantInFlight(c, 0)
				// Node at cap: nothing admitted, nothing held.
				d := h.part("t", 3, 1)
				if h.send(1, d) != nil {
					h.t.Fatal("admitted above the node cap")
				}
				h.wantInFlight(d, 0)
				h.wantNode(1, 1)
				h.reply(ack(20), r)
				// All candidates refused: false and no node slot taken.
				if h.send(1) != nil || h.send(1, c) != nil {
					h.t.Fatal("empty request admitted")
				}
				h.wantNode(1, 0)
			},
		},
		{
			name: "a Request is reusable without allocating",
			cfg:  Config{MaxRequestsPerConn: 1},
			run: func(h *harness) {
				cands := []Candidate{{Partition: h.part("t", 0, 1)}, {Partition: h.part("t", 1, 1)}}
				n := h.l.Node(1)
				var req Request
				cycle := func() {
					if !h.l.Reserve(n, cands, &req) {
						h.t.Fatal("refused")
					}
					for i := range cands {
						cands[i].Pos++
					}
					for _, tk := range req.Tickets {
						h.l.Complete(tk, ack(20))
					}
					h.l.Finish(&req)
				}
				cycle()
				if a := testing.AllocsPerRun(100, cycle); a != 0 {
					h.t.Fatalf("%v allocs per reserve cycle, want 0", a)
				}
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.run(newHarness(t, c.cfg)) })
	}
}

// TestMisusePanics checks that programmer errors panic with "inflight: ".
func TestMisusePanics(t *testing.T) {
	cases := []struct {
		name string
		do   func(h *harness)
		want string
	}{
		{"double Complete", func(h *harness) {
			r := h.send(1, h.part("t", 0, 1))
			h.l.Complete(r.Tickets[0], ack(5))
			h.l.Complete(r.Tickets[0], ack(5))
		}, panicDoubleComplete},
		{"zero Ticket", func(h *harness) { h.l.Complete(Ticket{}, ack(5)) }, panicZeroTicket},
		{"Finish without Reserve", func(h *harness) { h.l.Finish(new(Request)) }, panicNoReservation},
		{"Finish twice", func(h *harness) {
			r := h.send(1, h.part("t", 0, 1))
			h.l.Finish(r)
			h.l.Finish(r)
		}, panicNoReservation},
		{"Finish of a refused Reserve", func(h *harness) {
			var r Request
			h.l.Reserve(h.l.Node(1), nil, &r)
			h.l.Finish(&r)
		}, panicNoReservation},
		{"Reserve into a held request", func(h *harness) {
			p := h.part("t", 0, 1)
			r := h.send(1, p)
			h.l.Reserve(h.l.Node(1), []Candidate{{Partition: p, Pos: 1}}, r)
		}, panicHeld},
		{"partition of another limiter", func(h *harness) {
			other, _ := New(Config{MaxRequestsPerConn: 1})
			h.l.SetLeader(other.Partition("t", 0), 1, 0)
		}, panicForeign},
		{"node of another limiter", func(h *harness) {
			other, _ := New(Config{MaxRequestsPerConn: 1})
			h.l.Reserve(other.Node(1), nil, new(Request))
		}, panicForeign},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, Config{MaxRequestsPerConn: 10})
			defer func() {
				r := recover()
				if s, _ := r.(string); s != c.want {
					t.Fatalf("panic %v, want %q", r, c.want)
				}
				// The Limiter stays usable: the lock was released.
				h.l.ResetAll()
			}()
			c.do(h)
		})
	}
}

// TestNodeWindowCap: a Kafka 0.11 broker (Produce v3) retains one batch per
// producer and partition, so partitions it leads get a limit of 1 even
// after learning a larger window, and the cap goes with the node.
func TestNodeWindowCap(t *testing.T) {
	l, err := New(Config{MaxRequestsPerConn: 10})
	require.NoError(t, err)
	p := l.Partition("t", 0)
	l.SetLeader(p, 1, 0)
	l.SetNodeWindowCap(1, 1)
	require.Equal(t, 1, l.Limit(p))
	n := l.Node(1)
	var r1, r2 Request
	require.True(t, l.Reserve(n, []Candidate{{Partition: p, Pos: 0}}, &r1))
	l.Complete(r1.Tickets[0], Outcome{Acked: true, Window: 20, WindowPresent: true})
	l.Finish(&r1)
	require.Equal(t, 1, l.Limit(p), "a learned window never lifts the node's cap")
	require.True(t, l.Reserve(n, []Candidate{{Partition: p, Pos: 1}}, &r1))
	require.False(t, l.Reserve(n, []Candidate{{Partition: p, Pos: 2}}, &r2), "one batch in flight at most")
	l.Complete(r1.Tickets[0], Outcome{Acked: true, Window: 20, WindowPresent: true})
	l.Finish(&r1)
	l.SetNodeWindowCap(1, 0)
	require.Equal(t, 20, l.Limit(p), "without the cap the learned window applies")
	require.PanicsWithValue(t, panicNodeCap, func() { l.SetNodeWindowCap(1, -1) })
}
