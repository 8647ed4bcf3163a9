package producer

import (
	"errors"
	"fmt"
	"time"

	"github.com/longhaul-kafka/longhaul/inflight"
)

// Hook is a value given to the [Hooks] option. The producer checks which of
// the Hook* interfaces of this package it implements (any subset, none
// required) and calls those methods when the event happens, as franz-go's
// kgo does with its hooks. A hook that implements none of them is rejected
// by [New] with a [ConfigError] naming "hooks", since it would never be
// called.
//
// Contract: every method except [HookRecordDone.OnRecordDone] and
// [HookRecordProduced.OnRecordProduced] runs on the producer's one sender
// goroutine, the goroutine that writes requests and
// applies responses for every partition. It must return quickly and never
// block: while it runs, no partition sends or learns anything. A hook that
// needs to do slow work (network, disk) copies what it needs and hands it to
// its own goroutine. A hook must not wait for the Producer: Flush,
// ProduceSync and Close would wait for the sender the hook is holding, so
// called from a hook they return [ErrInCallback] at once, and Produce does
// not wait for buffer.memory there (a full one fails the record with
// [ErrBufferFull], as TryProduce does). It may call TryProduce, Stats and
// InFlightLimit. Calls on the sender goroutine are
// made one at a time, so a hook used by one producer needs no lock for the
// state it keeps between them; values it shares with other goroutines (a
// metrics scrape) need their own.
//
// Values passed to a hook belong to it only during the call, except the
// *Record of OnRecordDone, which follows the rules of a callback.
type Hook any

// Hooks registers hooks; each value implements any of the Hook* interfaces
// of this package (see [Hook] for when and where they run). Hooks are
// called in the order given; repeated Hooks options add to the list.
func Hooks(hs ...Hook) Opt {
	return optFunc(func(c *config) error {
		for _, h := range hs {
			if !c.hooks.add(h) {
				return &ConfigError{Property: "hooks", Reason: "a hook implements none of the Hook* interfaces"}
			}
		}
		return nil
	})
}

// BatchInfo describes one batch of one partition for [HookBatchSent],
// [HookBatchAcked] and [HookBatchRejected].
type BatchInfo struct {
	Topic     string
	Partition int32
	// Node is the broker the attempt went to.
	Node int32
	// Records is the number of records in the batch.
	Records int
	// Bytes is the size of the RecordBatch on the wire, after compression.
	Bytes int
	// Attempt counts the batch's sends: 1 for the first, more for retries.
	Attempt int
	// BaseSequence is the idempotent sequence number of the first record.
	BaseSequence int32
	// Age is the time since the batch's first record was produced: for
	// [HookBatchSent] how long it waited (linger, window, retries); for
	// [HookBatchAcked] the produce-to-acknowledgement latency of its oldest
	// record.
	Age time.Duration
	// Window is the partition's in-flight limit (the learned KIP-1269
	// window, or 5) when the batch was sent, or, in [HookBatchAcked], once
	// this acknowledgement's window was applied.
	Window int
}

// HookBatchSent is called for every produce attempt of a batch, retries
// included, once its ProduceRequest has been handed to the broker
// connection (queued to be written; the broker has not answered). Each call
// is followed by exactly one [HookBatchAcked] or [HookBatchRejected] call
// for the same attempt, including for attempts still in flight at Close.
type HookBatchSent interface {
	OnBatchSent(b BatchInfo)
}

// HookBatchAcked is called when a broker acknowledged a batch (success, or
// DUPLICATE_SEQUENCE_NUMBER for a retry it had already written), before the
// records' callbacks are queued. baseOffset is the first record's offset,
// -1 for a duplicate.
type HookBatchAcked interface {
	OnBatchAcked(b BatchInfo, baseOffset int64)
}

// HookBatchRejected is called when a produce attempt of a batch ended
// without an acknowledgement: err wraps the broker's error code (a kerr
// error; use errors.As with *kerr.Error for the code) or the connection's
// error. retrying reports whether the batch will be sent again; when it is
// false the batch's records fail (their callbacks get a [DeliveryError]).
// At Close, err wraps [ErrClosed] and retrying is false.
type HookBatchRejected interface {
	OnBatchRejected(b BatchInfo, err error, retrying bool)
}

// HookRecordDone is called once for every record Produce accepted, and
// for every record a [HookRecordProduced] was called for (also when
// Produce then refused it), with the error its callback gets (nil on
// success), just before that callback, on the callback goroutine (not the
// sender's). Like a callback it must not block.
type HookRecordDone interface {
	OnRecordDone(r *Record, err error)
}

// HookRecordProduced is called by Produce, TryProduce and ProduceSync for
// every non-nil record, on the caller's goroutine, before the record is
// checked, sized and encoded: it may add to r.Headers (a tracing plugin
// injects its trace context there) and set r.Context, and what it adds
// counts toward the record's size and is written. Each record it is
// called for gets exactly one [HookRecordDone] call, also one Produce
// then refuses (too large, buffer full, closed), so the two bracket the
// record. Called from many goroutines at once, it must be safe for
// concurrent use and must not block.
type HookRecordProduced interface {
	OnRecordProduced(r *Record)
}

// WindowCause says why a partition's in-flight limit changed, for
// [HookWindowChanged].
type WindowCause uint8

const (
	// WindowLearned: a ProduceResponse announced the broker's window
	// (KIP-1269), or answered without it (an old broker: 5).
	WindowLearned WindowCause = iota + 1
	// WindowLeaderChange: the partition moved to another leader; the
	// limit starts again at 5.
	WindowLeaderChange
	// WindowReconnect: a new connection to the partition's leader; the
	// limit starts again at 5 (the broker may have restarted), or 1 on
	// Kafka 0.11. A connection that at once replaces one closed to renew
	// its SASL session (KIP-368) is not new: the limit carries over.
	WindowReconnect
	// WindowIdle: no acknowledgement for longhaul.idle.rearm.ms; the
	// limit starts again at 5 (the broker may have expired our state).
	WindowIdle
	// WindowBump: the producer epoch was bumped or a new producer id
	// taken; every partition starts again at 5.
	WindowBump
)

// String returns the cause's name: "learned", "leader change",
// "reconnect", "idle" or "bump".
func (c WindowCause) String() string {
	switch c {
	case WindowLearned:
		return "learned"
	case WindowLeaderChange:
		return "leader change"
	case WindowReconnect:
		return "reconnect"
	case WindowIdle:
		return "idle"
	case WindowBump:
		return "bump"
	}
	return "unknown"
}

// HookWindowChanged is called when a partition's in-flight limit (the
// value [Producer.InFlightLimit] returns) changes, with the old and new
// values and why. Every partition starts at 5 (or max.window if lower)
// without a call; a call is made only when the value differs from the last
// one reported for the partition.
type HookWindowChanged interface {
	OnWindowChanged(topic string, partition int32, old, new int, why WindowCause)
}

// HookProducerID is called when InitProducerId gave the producer an
// identity: the first one (oldID -1, oldEpoch -1), an epoch bump (same id,
// epoch one higher, after a sequence gap) or a new id (brokers before Kafka
// 2.5, a refused bump, or an exhausted epoch).
type HookProducerID interface {
	OnProducerID(oldID int64, oldEpoch int16, id int64, epoch int16)
}

// HookBrokerConnect is called after each attempt to connect to a broker
// for produce requests: err is nil when the connection is ready
// (handshake, authentication and version checks done), else why it failed.
type HookBrokerConnect interface {
	OnBrokerConnect(node int32, addr string, err error)
}

// HookBrokerDisconnect is called once for every connection reported by
// [HookBrokerConnect] without an error, when the producer gives it up:
// cause is the I/O error, the request timeout, the broker closing an idle
// connection, [ErrSessionRenewal] when the producer closed a drained
// connection to renew its SASL session (nothing was in flight on it), or
// [ErrClosed] at Close. Batches in flight on it are retried (their fate is
// unknown) or, at Close, failed.
type HookBrokerDisconnect interface {
	OnBrokerDisconnect(node int32, addr string, cause error)
}

// HookThrottle is called for every ProduceResponse carrying a throttle
// time (a broker quota, ThrottleMillis > 0). Brokers since Kafka 2.0
// (Produce v6+, KIP-219) answer first and then read nothing from the
// connection for that long, so the producer sends nothing more on that
// connection until the throttle has passed, and the requests already on
// it do not count that time against request.timeout.ms ([Stats.Throttles],
// [Stats.ThrottledTime]). Older brokers delay the answer themselves.
type HookThrottle interface {
	OnThrottle(node int32, throttle time.Duration)
}

// RequestInfo describes one completed request to a broker, for
// [HookRequestDone].
type RequestInfo struct {
	// Node is the broker the request went to: -1 when its address is not
	// one metadata has named a broker id for (a bootstrap server's, before
	// the first Metadata answer).
	Node int32
	// Addr is the address of the request's connection.
	Addr string
	// API is the request's Kafka API key (kmsg.Key): 0 Produce, 3
	// Metadata, 22 InitProducerId, read-back's (1 Fetch, 2 ListOffsets,
	// 32 DescribeConfigs, and 3 Metadata to find the leader), the
	// transactional requests' (10 FindCoordinator, 24 AddPartitionsToTxn,
	// 25 AddOffsetsToTxn, 26 EndTxn, 28 TxnOffsetCommit) and the client
	// metrics push's (71 GetTelemetrySubscriptions, 72 PushTelemetry).
	API int16
	// Latency is the time from handing the request to the connection to
	// its completion: the time on the wire and in the broker (throttles
	// included), not the time its batches waited in the producer before.
	Latency time.Duration
	// InFlight is how many produce requests to Node are still in flight
	// once this one completed (0 when Node is -1).
	InFlight int
	// Err is nil when the broker answered (whatever the answer's error
	// codes), else the connection's error (I/O, the request timeout); the
	// batches' fates are reported by [HookBatchAcked] and
	// [HookBatchRejected].
	Err error
}

// HookRequestDone is called once for every request the producer sends that
// completes (answered, or failed with its connection) before Close, on any
// of its connections: produce requests, after their batches'
// [HookBatchAcked] and [HookBatchRejected] calls, and every other request
// (metadata, producer ids, transactions, read-back, client metrics push;
// see [RequestInfo].API). The requests that open a connection (ApiVersions,
// SASL) are not reported, nor requests still in flight when Close stops
// the sender. With [HookBatchSent]'s BatchInfo.Age (the time a batch waited
// in the producer) and [HookBatchRejected]'s retrying, it tells queue
// time, request time and retries apart. [NodeStats] sums the produce
// requests' latencies per node.
type HookRequestDone interface {
	OnRequestDone(r RequestInfo)
}

// hookSet is the registered hooks, split per interface once so an event
// with no hook costs a length check.
type hookSet struct {
	sent       []HookBatchSent
	acked      []HookBatchAcked
	rejected   []HookBatchRejected
	done       []HookRecordDone
	produced   []HookRecordProduced
	window     []HookWindowChanged
	ids        []HookProducerID
	connect    []HookBrokerConnect
	disconnect []HookBrokerDisconnect
	throttle   []HookThrottle
	requests   []HookRequestDone
	readbacks  []HookReadback

	// tel is the client metrics push (telemetry.go), nil with
	// enable.metrics.push=false. It is handed the batch, request and
	// throttle figures only while a subscription asks for metrics
	// (metrics), so a cluster that asks for none costs no work per batch;
	// its two running totals (retries, connections) count from the start,
	// as a cumulative sum must, at events that are rare.
	tel *telemetry
}

// metrics returns the client metrics push while a subscription asks for
// metrics, else nil.
func (hs *hookSet) metrics() *telemetry {
	if hs.tel != nil && hs.tel.active.Load() {
		return hs.tel
	}
	return nil
}

// add sorts h into the lists of the interfaces it implements; false if
// none.
func (hs *hookSet) add(h Hook) bool {
	found := addHook(h, &hs.sent)
	found = addHook(h, &hs.acked) || found
	found = addHook(h, &hs.rejected) || found
	found = addHook(h, &hs.done) || found
	found = addHook(h, &hs.produced) || found
	found = addHook(h, &hs.window) || found
	found = addHook(h, &hs.ids) || found
	found = addHook(h, &hs.connect) || found
	found = addHook(h, &hs.disconnect) || found
	found = addHook(h, &hs.throttle) || found
	found = addHook(h, &hs.requests) || found
	found = addHook(h, &hs.readbacks) || found
	return found
}

// addHook appends h to list if h implements T, and reports whether it does.
func addHook[T any](h Hook, list *[]T) bool {
	x, ok := h.(T)
	if ok {
		*list = append(*list, x)
	}
	return ok
}

// The dispatch methods below are what the core calls, one line per call
// site; each returns at once when no hook wants the event.

// batchInfo describes b's current attempt to node.
func (s *sender) batchInfo(b *batch, node int32, now time.Time) BatchInfo {
	ps := b.part
	return BatchInfo{
		Topic: ps.topic.name, Partition: ps.id, Node: node,
		Records: len(b.records), Bytes: len(b.bytes), Attempt: b.attempts,
		BaseSequence: b.seq, Age: now.Sub(b.created), Window: s.p.limiter.Limit(ps.admission),
	}
}

// requestSent reports every batch of sr (sender.go, sendToNode).
func (hs *hookSet) requestSent(s *sender, sr *sentRequest) {
	tel := hs.metrics()
	if len(hs.sent) == 0 && tel == nil {
		return
	}
	now := time.Now()
	if tel != nil {
		tel.requestSent(sr.batches, now)
	}
	if len(hs.sent) == 0 {
		return
	}
	for _, b := range sr.batches {
		info := s.batchInfo(b, sr.node.id, now)
		for _, h := range hs.sent {
			h.OnBatchSent(info)
		}
	}
}

// batchAcked reports b's acknowledgement (response.go, handleProduce),
// after the limiter applied its window and before b's callbacks are
// queued (b may be recycled after them).
func (hs *hookSet) batchAcked(s *sender, node int32, b *batch, baseOffset int64) {
	if len(hs.acked) == 0 {
		return
	}
	info := s.batchInfo(b, node, time.Now())
	for _, h := range hs.acked {
		h.OnBatchAcked(info, baseOffset)
	}
}

// batchRejected reports an attempt of b that was not acknowledged
// (response.go, batchRejected; shutdown.go), before b's fate is
// applied. node is where the attempt went; -1 takes the partition's leader.
func (hs *hookSet) batchRejected(s *sender, node int32, b *batch, err error, retrying bool) {
	retrying = retrying && !s.stopping // Close: the batch fails, whatever the attempt's error said
	if retrying && hs.tel != nil {
		hs.tel.retries.Add(int64(len(b.records)))
	}
	if len(hs.rejected) == 0 {
		return
	}
	if node < 0 {
		node = b.part.leader()
	}
	if s.stopping {
		if !errors.Is(err, ErrClosed) {
			err = fmt.Errorf("%w (%w)", ErrClosed, err)
		}
	}
	info := s.batchInfo(b, node, time.Now())
	for _, h := range hs.rejected {
		h.OnBatchRejected(info, err, retrying)
	}
}

// recordDone reports a record's outcome (callbacks.go, completion.run).
func (hs *hookSet) recordDone(r *Record, err error) {
	for _, h := range hs.done {
		h.OnRecordDone(r, err)
	}
}

// recordProduced reports r before Produce checks it (producer.go,
// produce), and whether any hook saw it.
func (hs *hookSet) recordProduced(r *Record) bool {
	for _, h := range hs.produced {
		h.OnRecordProduced(r)
	}
	return len(hs.produced) > 0
}

// limitChange is one change of a partition's limit, as the limiter
// reported it (limitChanged).
type limitChange struct {
	topic     string
	partition int32
	old, new  int
	why       WindowCause
}

// limitChanged is the limiter's OnLimitChange while a window hook is set
// (newProducer): the limiter tells of every change, on the sender
// goroutine, which made the call that changed it. While the sender holds
// acc.mu (applyMetadata) the report waits until the lock is released
// (releaseWindows): a hook may call TryProduce, Stats or InFlightLimit.
func (s *sender) limitChanged(topic string, partition int32, old, new int, why inflight.Cause) {
	c := limitChange{topic, partition, old, new, windowCause(why)}
	if why == inflight.CauseReset {
		c.why = s.resetWhy
	}
	if s.holdWindows {
		s.heldWindows = append(s.heldWindows, c)
		return
	}
	s.cfg.hooks.windowChanged(c)
}

// releaseWindows reports the limit changes held while acc.mu was held.
func (s *sender) releaseWindows() {
	s.holdWindows = false
	for i, c := range s.heldWindows {
		s.cfg.hooks.windowChanged(c)
		s.heldWindows[i] = limitChange{}
	}
	s.heldWindows = s.heldWindows[:0]
}

// windowCause names the limiter's cause as the hook does: the producer
// resets every partition (Limiter.ResetAll) for a new producer id or epoch
// only; a partition alone (Limiter.Reset) for idleness, unless the sender
// says otherwise (sender.resetWhy: a transactional epoch bump).
func windowCause(c inflight.Cause) WindowCause {
	switch c {
	case inflight.CauseLearned:
		return WindowLearned
	case inflight.CauseLeader:
		return WindowLeaderChange
	case inflight.CauseConnection:
		return WindowReconnect
	case inflight.CauseReset:
		return WindowIdle
	default:
		return WindowBump
	}
}

// windowChanged calls every window hook with c.
func (hs *hookSet) windowChanged(c limitChange) {
	for _, h := range hs.window {
		h.OnWindowChanged(c.topic, c.partition, c.old, c.new, c.why)
	}
}

// producerID reports a new identity (control.go, initDone), called before
// the sender stores it.
func (hs *hookSet) producerID(oldID int64, oldEpoch int16, id int64, epoch int16) {
	for _, h := range hs.ids {
		h.OnProducerID(oldID, oldEpoch, id, epoch)
	}
}

// connected reports a connection attempt (conns.go, dialed).
func (hs *hookSet) connected(n *nodeState, err error) {
	if err == nil && hs.tel != nil {
		hs.tel.connections.Add(1)
	}
	for _, h := range hs.connect {
		h.OnBrokerConnect(n.id, n.addr, err)
	}
}

// disconnected reports a connection given up (conns.go, connFailed;
// shutdown.go).
func (hs *hookSet) disconnected(n *nodeState, cause error) {
	for _, h := range hs.disconnect {
		h.OnBrokerDisconnect(n.id, n.addr, cause)
	}
}

// throttled reports a ProduceResponse's throttle (response.go,
// handleProduce).
func (hs *hookSet) throttled(node int32, throttle time.Duration) {
	if throttle <= 0 {
		return
	}
	if tel := hs.metrics(); tel != nil {
		tel.throttled(throttle)
	}
	for _, h := range hs.throttle {
		h.OnThrottle(node, throttle)
	}
}

// requestDone reports a completed produce request to n (response.go,
// handleProduce), after its slot was freed.
func (hs *hookSet) requestDone(s *sender, n *nodeState, latency time.Duration, err error) {
	if tel := hs.metrics(); tel != nil {
		tel.requestDone(n.id, latency, err)
	}
	if len(hs.requests) == 0 {
		return
	}
	r := RequestInfo{Node: n.id, Addr: n.addr, API: 0, Latency: latency, InFlight: s.p.limiter.NodeInFlight(n.admission), Err: err}
	for _, h := range hs.requests {
		h.OnRequestDone(r)
	}
}

// requestObserver is the connections' protocol.DialConfig.OnRequestDone
// while a request hook is registered, else nil: it brings every request
// but the produce requests (Conn.Produce, which handleProduce reports) to
// the sender goroutine, where hooks run. These requests are few (metadata,
// producer ids, transactions, read-back, client metrics push), and a
// producer without the hook costs nothing per request.
func (hs *hookSet) requestObserver(s *sender) func(addr string, key int16, latency time.Duration, err error) {
	if len(hs.requests) == 0 {
		return nil
	}
	return func(addr string, key int16, latency time.Duration, err error) {
		s.p.post(func() { hs.otherRequestDone(s, addr, key, latency, err) })
	}
}

// otherRequestDone reports a completed request that is not a produce
// request (requestObserver), on the sender goroutine.
func (hs *hookSet) otherRequestDone(s *sender, addr string, key int16, latency time.Duration, err error) {
	r := RequestInfo{Node: -1, Addr: addr, API: key, Latency: latency, Err: err}
	for _, n := range s.byID {
		if n.addr == addr {
			r.Node, r.InFlight = n.id, s.p.limiter.NodeInFlight(n.admission)
			break
		}
	}
	for _, h := range hs.requests {
		h.OnRequestDone(r)
	}
}

// readback reports a batch read-back settled (readback.go, settled).
func (hs *hookSet) readback(info ReadbackInfo) {
	for _, h := range hs.readbacks {
		h.OnReadback(info)
	}
}
