package broker

import "time"

// Fault hooks. Each is node-scoped or partition-scoped; counts mean "the
// next n", added to any count still pending. Unknown nodes or partitions
// are ignored, and n <= 0 clears the hook.

// DropProduceResponses makes node drop its next n produce responses
// (acks != 0): the appends happen, the responses are never written, and
// the connection stays open, so the client must time out or reconnect.
// A later response on the same connection is still written.
func (c *Cluster) DropProduceResponses(node int32, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if nd, err := c.node(node); err == nil {
		nd.dropProduce = addCount(nd.dropProduce, n)
	}
}

// CloseAfterRequests makes node close a connection after reading the nth
// next request it receives (on any of its connections), before answering
// it: a produce is appended first, its response is never written.
// Responses to earlier requests on that connection are still written at
// their due time; the connection then closes.
func (c *Cluster) CloseAfterRequests(node int32, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if nd, err := c.node(node); err == nil {
		if n <= 0 {
			nd.closeAfter = 0
			return
		}
		nd.closeAfter = n
	}
}

// InjectError makes the next n produce responses for the partition answer
// code, without appending (checked before leadership and validation, on
// whichever node is asked). A code of 0 answers success without appending,
// which is rarely what a test wants.
func (c *Cluster) InjectError(topic string, partition int32, code int16, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.partition(topic, partition)
	if p == nil {
		return
	}
	if n <= 0 {
		p.injected = nil
		return
	}
	p.injected = append(p.injected, injectedErr{code: code, n: n})
}

// Stall makes node stop answering anything for d from now: requests read
// meanwhile are handled, and responses written, once the stall ends
// (responses still respect their RTT). Connections stay open.
func (c *Cluster) Stall(node int32, d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if nd, err := c.node(node); err == nil {
		nd.stallUntil = time.Now().Add(d)
	}
}

// DropConnections closes every current connection of node. Responses not
// yet written are lost (appends that happened stay). The listener stays
// up, so clients can reconnect at once.
func (c *Cluster) DropConnections(node int32) {
	c.mu.Lock()
	nd, err := c.node(node)
	if err != nil {
		c.mu.Unlock()
		return
	}
	conns := nd.connList()
	c.mu.Unlock()
	for _, cc := range conns {
		cc.close()
	}
}

func addCount(cur, n int) int {
	if n <= 0 {
		return 0
	}
	return cur + n
}
