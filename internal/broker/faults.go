package broker

import (
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

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
// which is rarely what a test wants. n <= 0 clears every injected and
// scripted answer of the partition.
func (c *Cluster) InjectError(topic string, partition int32, code int16, n int) {
	c.inject(topic, partition, n, Answer{Code: code, Mode: Refuse})
}

// InjectErrorAfterAppend makes the next n produce requests for the
// partition be handled normally (leadership, validation, dedup, append)
// and then, if the batch was appended or recognised as a duplicate, answer
// code instead of success, with base offset -1. It models Kafka appending
// an acks=all batch and then answering NOT_LEADER_OR_FOLLOWER (leadership
// lost while waiting for the ISR), REQUEST_TIMED_OUT or
// NOT_ENOUGH_REPLICAS_AFTER_APPEND: the batch is in the log, the client is
// told it failed. A batch the normal path rejects keeps its own answer.
// n <= 0 clears every injected and scripted answer of the partition.
func (c *Cluster) InjectErrorAfterAppend(topic string, partition int32, code int16, n int) {
	c.inject(topic, partition, n, Answer{Code: code, Mode: AppendThenFail})
}

// AnswerMode says what a scripted [Answer] does with the batch.
type AnswerMode uint8

const (
	// Refuse answers Code without appending, before leadership and
	// validation are checked (what [Cluster.InjectError] does).
	Refuse AnswerMode = iota
	// AppendThenFail handles the batch normally and, if it was appended or
	// is a duplicate, answers Code instead of success (what
	// [Cluster.InjectErrorAfterAppend] does).
	AppendThenFail
	// Normal handles the batch normally; Code is ignored. It is the
	// "ok" slot of a script.
	Normal
)

// Answer is one scripted answer to one produce batch of a partition.
type Answer struct {
	Code int16
	Mode AnswerMode
	// Hint, if set on a Refuse answer of NOT_LEADER_OR_FOLLOWER, is the
	// KIP-951 CurrentLeader it carries (Produce v10+) instead of the
	// partition's real leader and epoch: a node the cluster does not
	// have, or a stale epoch. The answer's NodeEndpoints name the hinted
	// node only if the cluster has it.
	Hint *LeaderHint
}

// LeaderHint is a KIP-951 CurrentLeader: a leader id and its epoch.
type LeaderHint struct {
	Leader, Epoch int32
}

// ScriptAnswers queues one answer per batch for the partition's next
// produce requests, in order, after any answers still pending: the first
// batch that reaches the partition gets answers[0], the next answers[1],
// and so on; later batches are handled normally. A burst such as
// REQUEST_TIMED_OUT, NOT_ENOUGH_REPLICAS, ok is
// ScriptAnswers(t, p, Answer{Code: 7}, Answer{Code: 19}, Answer{Mode: Normal}).
// Answers apply on whichever node is asked. An unknown partition is
// ignored.
func (c *Cluster) ScriptAnswers(topic string, partition int32, answers ...Answer) {
	for _, a := range answers {
		c.inject(topic, partition, 1, a)
	}
}

func (c *Cluster) inject(topic string, partition int32, n int, a Answer) {
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
	p.injected = append(p.injected, injectedErr{code: a.Code, mode: a.Mode, n: n, hint: a.Hint})
}

// PendingAnswers returns how many injected or scripted answers the
// partition has not used yet (0 for an unknown partition).
func (c *Cluster) PendingAnswers(topic string, partition int32) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.partition(topic, partition)
	if p == nil {
		return 0
	}
	n := 0
	for _, inj := range p.injected {
		n += inj.n
	}
	return n
}

// RewriteMetadata installs fn to rewrite every Metadata response of every
// node just before it is sent, so a test can send structurally valid but
// semantically bad metadata (partition -1, duplicate partition ids, a
// shrinking partition count, a leader missing from the broker list, a
// negative leader epoch). fn runs with the cluster lock held: it must not
// call Cluster methods and must not block. nil removes the hook.
func (c *Cluster) RewriteMetadata(fn func(*kmsg.MetadataResponse)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.metaRewrite = fn
}

// Stall makes node stop answering anything for d from now: requests read
// meanwhile are handled, and responses written, once the stall ends
// (responses still respect their RTT). Connections stay open.
func (c *Cluster) Stall(node int32, d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if nd, err := c.node(node); err == nil {
		nd.stallUntil = time.Now().Add(d)
		nd.quiet(nd.stallUntil)
	}
}

// SetProduceThrottle makes node report d as ThrottleMillis in every
// ProduceResponse from now on, as a broker enforcing a quota does; 0 stops.
// Only the field is set: nothing is delayed or muted.
func (c *Cluster) SetProduceThrottle(node int32, d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if nd, err := c.node(node); err == nil {
		nd.throttle = d
	}
}

// SetProduceQuota makes node enforce a produce byte-rate quota of rate
// bytes a second, as Kafka's producer_byte_rate does: a produce request
// that takes the node's bytes past what the rate allows (plus a tenth of a
// second's worth of burst) is answered with the time the excess takes to
// drain at the rate, in whole milliseconds, as ThrottleMillis. From Produce
// v6 (KIP-219) the node answers at once and then reads nothing more from
// that connection until the throttle has passed since the answer was
// written: requests written meanwhile wait, and are counted by
// [Cluster.MutedSends]. Below v6 it holds the answer for the throttle
// instead. The budget is the node's, whoever produces. rate <= 0 stops
// throttling (a mute already begun runs out).
func (c *Cluster) SetProduceQuota(node int32, rate int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if nd, err := c.node(node); err == nil {
		nd.quota, nd.quotaLevel, nd.quotaAt = max(rate, 0), 0, time.Time{}
	}
}

// MutedSends returns how many requests reached a connection while it was
// muted for a throttle (SetProduceQuota) whose answer had already been
// written to it, when nothing else had kept the node from reading it
// then, and the first few of them, described: requests a client sent
// though it had been told to wait (KIP-219). A request the client wrote
// before the throttled answer reached it waits as well, but is not
// counted.
func (c *Cluster) MutedSends() (int64, []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mutedSends, append([]string(nil), c.mutedFirst...)
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

// RewriteFetch installs fn to rewrite every Fetch response just before
// node sends it (after any wait for data), so a test can answer what the
// embedded broker never does itself: TOPIC_AUTHORIZATION_FAILED, a log
// start offset past what was asked, a truncated answer. fn runs with the
// cluster lock held: it must not call Cluster methods and must not block.
// nil removes the hook.
func (c *Cluster) RewriteFetch(fn func(node int32, resp *kmsg.FetchResponse)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.fetchRewrite = fn
}

// RewriteListOffsets installs fn to rewrite every ListOffsets response
// just before node sends it, as [Cluster.RewriteFetch] does for Fetch (an
// error code Kafka can answer, TOPIC_AUTHORIZATION_FAILED for one). fn runs
// with the cluster lock held: it must not call Cluster methods and must
// not block. nil removes the hook.
func (c *Cluster) RewriteListOffsets(fn func(node int32, resp *kmsg.ListOffsetsResponse)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.listRewrite = fn
}

// DeleteRecords moves the partition's log start offset up to before
// (KIP-107's DeleteRecords, or retention), at most to the log end, never
// down, and returns it; -1 for an unknown partition. Fetch and ListOffsets
// then serve nothing below it; [Cluster.Records] still lists every record,
// the truth a test checks against. Simplification: the producers' state
// is kept (Kafka drops a producer's state once its last batch is below
// the log start).
func (c *Cluster) DeleteRecords(topic string, partition int32, before int64) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.partition(topic, partition)
	if p == nil {
		return -1
	}
	p.logStart = max(p.logStart, min(before, p.next))
	return p.logStart
}
