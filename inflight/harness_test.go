package inflight

import (
	"slices"
	"testing"
)

// harness drives a Limiter in table tests with a few short verbs. It picks
// positions as the producer does: a partition's lowest failed position first
// (a retry keeps its position), else the next new one.
type harness struct {
	t     *testing.T
	l     *Limiter
	next  map[*Partition]uint64   // next new position
	retry map[*Partition][]uint64 // failed positions, ascending
}

func newHarness(t *testing.T, cfg Config) *harness {
	t.Helper()
	l, err := New(cfg)
	if err != nil {
		t.Fatalf("New(%+v): %v", cfg, err)
	}
	return &harness{t: t, l: l, next: map[*Partition]uint64{}, retry: map[*Partition][]uint64{}}
}

// pos is the position p's next batch would have.
func (h *harness) pos(p *Partition) uint64 {
	if r := h.retry[p]; len(r) > 0 {
		return r[0]
	}
	return h.next[p]
}

// part returns topic/partition led by node (epoch 0).
func (h *harness) part(topic string, partition, node int32) *Partition {
	p := h.l.Partition(topic, partition)
	h.l.SetLeader(p, node, 0)
	return p
}

// send reserves one request to node with the candidates, each at its next
// position; nil if refused.
func (h *harness) send(node int32, ps ...*Partition) *Request {
	cands := make([]Candidate, len(ps))
	for i, p := range ps {
		cands[i] = Candidate{Partition: p, Pos: h.pos(p)}
	}
	return h.sendCands(node, cands...)
}

// sendAt reserves one request to node with p's batch at position pos; nil
// if refused.
func (h *harness) sendAt(node int32, p *Partition, pos uint64) *Request {
	return h.sendCands(node, Candidate{Partition: p, Pos: pos})
}

func (h *harness) sendCands(node int32, cands ...Candidate) *Request {
	req := new(Request)
	if !h.l.Reserve(h.l.Node(node), cands, req) {
		if len(req.Tickets) != 0 {
			h.t.Fatalf("refused Reserve left %d tickets", len(req.Tickets))
		}
		return nil
	}
	for _, tk := range req.Tickets {
		p, pos := tk.Partition, tk.Pos()
		if i, found := slices.BinarySearch(h.retry[p], pos); found {
			h.retry[p] = slices.Delete(h.retry[p], i, i+1)
		}
		h.next[p] = max(h.next[p], pos+1)
	}
	return req
}

// complete completes one ticket; a failure queues its position for retry.
func (h *harness) complete(tk Ticket, o Outcome) {
	h.l.Complete(tk, o)
	if !o.Acked {
		p := tk.Partition
		i, _ := slices.BinarySearch(h.retry[p], tk.Pos())
		h.retry[p] = slices.Insert(h.retry[p], i, tk.Pos())
	}
}

// abandon gives up p's position pos: Abandon, and no retry.
func (h *harness) abandon(p *Partition, pos uint64) {
	h.l.Abandon(p, pos)
	if i, found := slices.BinarySearch(h.retry[p], pos); found {
		h.retry[p] = slices.Delete(h.retry[p], i, i+1)
	}
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
			h.complete(tk, o)
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

// wantAnchor checks p's oldest unacknowledged position; ok false means none.
func (h *harness) wantAnchor(p *Partition, want uint64, ok bool) {
	h.t.Helper()
	got, gotOK := h.l.Anchor(p)
	if gotOK != ok || ok && got != want {
		h.t.Fatalf("Anchor(%s-%d) = %d, %v; want %d, %v", p.Topic(), p.ID(), got, gotOK, want, ok)
	}
}
