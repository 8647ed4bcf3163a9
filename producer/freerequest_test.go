package producer

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/longhaul-kafka/longhaul/inflight"
)

// TestFreeRequestDropsLargeSlices: a pooled request keeps room for up to
// keepRequestBatches batches and tickets; a request that spanned more
// partitions gives its slices up, so idle memory does not grow with the
// partition count (the control shows small slices are kept).
func TestFreeRequestDropsLargeSlices(t *testing.T) {
	s := &sender{}
	big := &sentRequest{batches: make([]*batch, 1, keepRequestBatches+1), ir: inflight.Request{Tickets: make([]inflight.Ticket, 0, keepRequestBatches+1)}}
	small := &sentRequest{batches: make([]*batch, 1, 8), ir: inflight.Request{Tickets: make([]inflight.Ticket, 0, 8)}}
	s.freeRequest(big)
	s.freeRequest(small)
	assert.Nil(t, big.batches)
	assert.Nil(t, big.ir.Tickets)
	assert.Equal(t, 8, cap(small.batches), "small slices are pooled with the request")
	assert.Equal(t, 8, cap(small.ir.Tickets))
	assert.Empty(t, small.batches)
	assert.Len(t, s.srFree, 2, "both requests go back to the free list")
}
