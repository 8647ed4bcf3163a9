// Package linkproxy is a loopback TCP proxy that makes a fast local link
// look like a long one: it adds a fixed one-way delay in each direction and
// cuts connections on demand or at random.
//
// # Entry points
//
// [New] starts a proxy that listens on one address and
// forwards every accepted connection to a target address, dialled when the
// connection is accepted (so the target may start after the proxy).
// [Proxy.SetDelay] changes the one-way delay, [Proxy.CutAll] and
// [Proxy.CutRandomly] close proxied connections, [Proxy.DropRequests]
// and [Proxy.DropResponses] swallow chosen Kafka requests or their
// responses and cut the connection that carried them (the proxy follows
// Kafka's size-prefixed framing in each direction for this), and
// [Proxy.Close] stops everything.
//
// # Delay model
//
// Each direction of a connection has a reader and a writer
// goroutine. A chunk of bytes read at time T is written no earlier than
// T+delay, and chunks are written in the order they were read. Chunks are not
// serialised behind each other's delay, so a pipelined stream keeps its
// throughput: a 50 ms round trip costs 50 ms of latency, not bandwidth. Up to
// [MaxQueuedChunks] chunks (each at most [ChunkSize] bytes) wait per
// direction; beyond that the reader stops reading and TCP flow control pushes
// back on the sender, like a full link.
//
// A chunk's writer sleeps until the release time on a Linux timerfd read
// through the runtime's poller, so it wakes on time to within scheduling
// noise; the runtime timer, used elsewhere or after
// [Proxy.SetPreciseTimers](false), wakes in whole milliseconds on Linux
// and made every chunk about 0.5 ms late. [Stats].Late sums the lateness
// that remains.
//
// # Concurrency
//
// Every method of [Proxy] is safe for concurrent use.
// Only loopback (or other local test) addresses should be used: the proxy
// is a test tool and has no limits on the number of connections.
package linkproxy
