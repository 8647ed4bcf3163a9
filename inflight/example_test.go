package inflight_test

import (
	"fmt"

	"github.com/longhaul-kafka/longhaul/inflight"
)

// Example shows a sender's loop for one node: reserve a request, send it,
// report each partition's outcome, release the request. The first batch of a
// partition goes alone (the first-batch gate); its response teaches the
// window, and then that many batches may be in flight.
func Example() {
	l, err := inflight.New(inflight.Config{MaxRequestsPerConn: 50})
	if err != nil {
		panic(err)
	}
	node := l.Node(1)
	p := l.Partition("orders", 0)
	l.SetLeader(p, 1, 7) // from metadata: leader node 1, leader epoch 7

	// Each batch has a position in its partition's send order: 0, 1, 2, ...
	// for new batches; a retried batch keeps its own.
	var pos uint64
	var req inflight.Request
	if l.Reserve(node, []inflight.Candidate{{Partition: p, Pos: pos}}, &req) {
		pos++
		// ... write the ProduceRequest with one batch per ticket ...
		for _, t := range req.Tickets {
			// The v14 response acked the batch and announced 20.
			l.Complete(t, inflight.Outcome{Acked: true, Window: 20, WindowPresent: true})
		}
		l.Finish(&req)
	}
	fmt.Println("limit:", l.Limit(p), "gated:", l.Gated(p))

	// Now up to 20 batches of p may be in flight, one per request.
	reqs := make([]inflight.Request, 30)
	sent := 0
	for i := range reqs {
		if l.Reserve(node, []inflight.Candidate{{Partition: p, Pos: pos}}, &reqs[i]) {
			pos++
			sent++
		}
	}
	fmt.Println("in flight:", l.InFlight(p), "requests:", l.NodeInFlight(node), "sent:", sent)

	// A new leader epoch: back to 5 and the gate, until the new leader answers.
	l.SetLeader(p, 2, 8)
	fmt.Println("after leader change: limit:", l.Limit(p), "gated:", l.Gated(p))
	// Output:
	// limit: 20 gated: false
	// in flight: 20 requests: 20 sent: 20
	// after leader change: limit: 5 gated: true
}
