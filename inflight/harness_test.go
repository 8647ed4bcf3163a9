package inflight

import (
	"testing"
)

// harness drives a Limiter in table tests with a few short verbs.
type harness struct {
	t *testing.T
	l *Limiter
}

func newHarness(t *testing.T, cfg Config) *harness {
	t.Helper()
	l, err := New(cfg)
	if err != nil {
		t.Fatalf("New(%+v): %v", cfg, err)
	}
	return &harness{t: t, l: l}
}

// part returns topic/partition led by node (epoch 0).
func (h *harness) part(topic string, partition, node int32) *Partition {
	p := h.l.Partition(topic, partition)
	h.l.SetLeader(p, node, 0)
	return p
}

// send reserves one request to node with the candidates; nil if refused.
func (h *harness) send(node int32, ps ...*Partition) *Request {
	req := new(Request)
	if !h.l.Reserve(h.l.Node(node), ps, req) {
		if len(req.Tickets) != 0 {
			h.t.Fatalf("refused Reserve left %d tickets", len(req.Tickets))
		}
		return nil
	}
	return req
}

// fill sends one-partition requests for p to its leader until refused and
// returns them; afterwards len(result) more batches of p are in flight.
func (h *harness) fill(p *Partition, node int32) []*Request {
	var reqs []*Request
	for i := 0; i < 100000; i++ {
		r := h.send(node, p)
		if r == nil {
			return reqs
		}
		reqs = append(reqs, r)
	}
	h.t.Fatalf("fill(%s-%d) never stopped", p.Topic(), p.ID())
	return nil
}

// reply completes every ticket of reqs with o and finishes them.
func (h *harness) reply(o Outcome, reqs ...*Request) {
	for _, r := range reqs {
		for _, tk := range r.Tickets {
			h.l.Complete(tk, o)
		}
		h.l.Finish(r)
	}
}

// learn sends one batch of p (which must be allowed) and acks it with window
// w (present unless w == absent), opening the gate.
func (h *harness) learn(p *Partition, node int32, w int32) {
	h.t.Helper()
	r := h.send(node, p)
	if r == nil {
		h.t.Fatalf("learn: %s-%d may not send", p.Topic(), p.ID())
	}
	h.reply(ack(w), r)
}

const absent = int32(-1 << 31)

func ack(w int32) Outcome {
	if w == absent {
		return Outcome{Acked: true}
	}
	return Outcome{Acked: true, Window: w, WindowPresent: true}
}

// timeout is a failure without a response.
var timeout = Outcome{}

func (h *harness) wantLimit(p *Partition, want int) {
	h.t.Helper()
	if got := h.l.Limit(p); got != want {
		h.t.Fatalf("Limit(%s-%d) = %d, want %d", p.Topic(), p.ID(), got, want)
	}
}

func (h *harness) wantInFlight(p *Partition, want int) {
	h.t.Helper()
	if got := h.l.InFlight(p); got != want {
		h.t.Fatalf("InFlight(%s-%d) = %d, want %d", p.Topic(), p.ID(), got, want)
	}
}

func (h *harness) wantGated(p *Partition, want bool) {
	h.t.Helper()
	if got := h.l.Gated(p); got != want {
		h.t.Fatalf("Gated(%s-%d) = %v, want %v", p.Topic(), p.ID(), got, want)
	}
}

func (h *harness) wantFill(p *Partition, node int32, want int) []*Request {
	h.t.Helper()
	reqs := h.fill(p, node)
	if got := h.l.InFlight(p); got != want {
		h.t.Fatalf("after fill InFlight(%s-%d) = %d, want %d", p.Topic(), p.ID(), got, want)
	}
	return reqs
}

func (h *harness) wantNode(node int32, want int) {
	h.t.Helper()
	if got := h.l.NodeInFlight(h.l.Node(node)); got != want {
		h.t.Fatalf("NodeInFlight(%d) = %d, want %d", node, got, want)
	}
}
