package producer

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/longhaul-kafka/longhaul/protocol"
)

// Read-back (longhaul.readback.enable) settles a batch whose fate is
// unknown: an attempt of it ended without an answer (a lost response, a
// closed connection) and it then failed, so it may or may not be in the
// log. Its identity (producer id, epoch, base sequence, record count) is
// fixed for its whole life, since a batch that may be in the log is never
// renumbered or split. The batch is not called back at once: it waits for
// the fence, the partition's next batch acknowledged under a higher epoch
// of the same producer id, at offset Y. From then on no attempt of the
// batch can be appended (the leader refuses the old epoch, and a new
// leader rebuilds that state from a log that holds the fence), and every
// attempt appended before it lies below Y, below the high watermark. So
// the batch is in the log exactly when a batch with its identity lies in
// [K, Y), K being the end offset of the last acknowledgement received
// before its first send; before any, the high watermark a ListOffsets
// answered ahead of that send (readback_k.go), 0 when none was answered.
// The producer reads that
// range's batch headers back from the leader on a connection of its own
// and calls the records back with what it found. DESIGN.md ("Read-back")
// has the reasoning and its limits.

// ErrNotWritten is the error of records whose fate was unknown until
// read-back found their batch absent from the log, fenced so that it can
// never be written: they are not in the log and may be produced again
// (after the records of the partition written since). It is wrapped,
// with the failure that made their fate unknown, in a [DeliveryError]
// without FateUnknown.
var ErrNotWritten = errors.New("producer: read back: not in the log, and can no longer be written; safe to produce again")

// ErrWrittenTwice is the error of records that read-back found in the log
// twice: two batches carry their batch's identity (the broker forgot the
// producer's state between attempts, KIP-854 expiry for example, and took
// the retry as new). It is wrapped in a [DeliveryError] without
// FateUnknown whose message names both offsets; each record's Offset is
// its offset in the first copy. Producing them again would write a third
// copy.
var ErrWrittenTwice = errors.New("producer: read back: written twice")

// The reasons read-back leaves a batch's fate unknown. Each is wrapped,
// with the failure that made the fate unknown, in the records'
// [DeliveryError] (FateUnknown set), so errors.Is tells them apart.
var (
	// ErrReadbackNotAuthorized: the broker refused the Fetch with
	// TOPIC_AUTHORIZATION_FAILED; read-back needs READ on the topic.
	ErrReadbackNotAuthorized = errors.New("producer: read back: no READ permission on the topic (TOPIC_AUTHORIZATION_FAILED)")
	// ErrReadbackLogStart: the batch was not found, but the partition's
	// log start offset had moved past where the scan had to begin
	// (retention, DeleteRecords), so it may have been deleted.
	ErrReadbackLogStart = errors.New("producer: read back: the log start offset passed the scan's start; not found proves nothing")
	// ErrReadbackCompacted: the batch was not found, but the topic is
	// compacted (cleanup.policy compact), or its cleanup.policy could not
	// be read: the cleaner may have removed it.
	ErrReadbackCompacted = errors.New("producer: read back: topic may be compacted; not found proves nothing")
	// ErrReadbackNewProducerID: the batch was not found, but the next
	// acknowledged batch carried a new producer id rather than a higher
	// epoch of the batch's (brokers before Kafka 2.5, epoch exhaustion),
	// which fences nothing: a late attempt could still be appended.
	ErrReadbackNewProducerID = errors.New("producer: read back: a new producer id, not a bumped epoch, followed; not found proves nothing")
	// ErrReadbackTopicRecreated: the batch was not found, but its topic
	// was deleted and created again since the batch was first sent, so an
	// attempt may have gone to the deleted log.
	ErrReadbackTopicRecreated = errors.New("producer: read back: the topic was re-created since the batch was sent; not found proves nothing")
	// ErrReadbackBudget: longhaul.readback.max.bytes were fetched, or
	// longhaul.readback.timeout.ms passed, before the range was read.
	ErrReadbackBudget = errors.New("producer: read back: budget spent")
	// ErrReadbackNoFence: no batch of the partition was acknowledged under
	// a bumped epoch within longhaul.readback.timeout.ms (nothing more was
	// produced to it, for example), so absence could not be proven.
	ErrReadbackNoFence = errors.New("producer: read back: no later batch of the partition acknowledged under a bumped epoch in time")
)

// ReadbackOutcome is what read-back found for a batch.
type ReadbackOutcome int8

// The outcomes of [ReadbackInfo].
const (
	ReadbackWritten      ReadbackOutcome = iota + 1 // in the log once: the records' callbacks succeed
	ReadbackNotWritten                              // absent, for good: [ErrNotWritten]
	ReadbackWrittenTwice                            // in the log twice: [ErrWrittenTwice]
	ReadbackUnknown                                 // fate still unknown: Reason says why
)

func (o ReadbackOutcome) String() string {
	switch o {
	case ReadbackWritten:
		return "written"
	case ReadbackNotWritten:
		return "not written"
	case ReadbackWrittenTwice:
		return "written twice"
	case ReadbackUnknown:
		return "unknown"
	}
	return fmt.Sprintf("ReadbackOutcome(%d)", int8(o))
}

// ReadbackInfo describes one batch read-back settled, for [HookReadback].
type ReadbackInfo struct {
	Topic         string
	Partition     int32
	ProducerID    int64
	ProducerEpoch int16
	BaseSequence  int32
	Records       int
	Outcome       ReadbackOutcome
	// Offsets are the base offsets of the copies found, in log order.
	Offsets []int64
	// Reason is why the fate stayed unknown (ReadbackUnknown): one of the
	// ErrReadback* errors, possibly wrapped with detail, or ErrClosed.
	Reason error
	// From and Fence are the range read, [From, Fence); Fence is -1 when
	// no fence came.
	From, Fence int64
	// Bytes is how many record bytes the read fetched.
	Bytes int64
	// Waited is the time from the failure to the outcome.
	Waited time.Duration
}

// HookReadback is called on the sender goroutine for every batch of
// unknown fate that read-back settled or gave up on, before its records'
// callbacks are queued.
type HookReadback interface {
	OnReadback(ReadbackInfo)
}

// ReadbackStats counts records by read-back outcome, in [Stats].
type ReadbackStats struct {
	Written      int64 // found once: acknowledged late, with their offsets
	NotWritten   int64 // found absent: ErrNotWritten
	WrittenTwice int64 // found twice: ErrWrittenTwice
	// Unknown counts the records whose fate stayed unknown, for any
	// reason; the fields below split it by reason (a close is counted in
	// Unknown alone).
	Unknown       int64
	NotAuthorized int64 // ErrReadbackNotAuthorized
	LogStart      int64 // ErrReadbackLogStart
	Compacted     int64 // ErrReadbackCompacted
	NewProducerID int64 // ErrReadbackNewProducerID
	Recreated     int64 // ErrReadbackTopicRecreated
	Budget        int64 // ErrReadbackBudget
	NoFence       int64 // ErrReadbackNoFence
}

// readbackCounters are ReadbackStats as the sender counts them.
type readbackCounters struct {
	written, notWritten, twice, unknown                                    atomic.Int64
	notAuthorized, logStart, compacted, newPID, recreated, budget, noFence atomic.Int64
}

func (c *readbackCounters) snapshot() ReadbackStats {
	return ReadbackStats{
		Written: c.written.Load(), NotWritten: c.notWritten.Load(), WrittenTwice: c.twice.Load(),
		Unknown: c.unknown.Load(), NotAuthorized: c.notAuthorized.Load(), LogStart: c.logStart.Load(),
		Compacted: c.compacted.Load(), NewProducerID: c.newPID.Load(), Recreated: c.recreated.Load(), Budget: c.budget.Load(), NoFence: c.noFence.Load(),
	}
}

// batchIdentity is what a batch carries to be told apart in the log.
type batchIdentity struct {
	pid     int64
	epoch   int16
	seq     int32
	records int32
}

// settleJob is one batch of unknown fate waiting for its fence or its
// read-back; owned by the sender goroutine.
type settleJob struct {
	b        *batch
	cause    error // the failure that made its fate unknown
	id       batchIdentity
	from     int64 // K
	since    time.Time
	deadline time.Time
	fence    int64 // Y; -1 until the fence came
	newPID   bool  // the fence carried a new producer id
	scanning bool  // a read runs (its goroutine posts settled), or waitK
	waitK    bool  // fenced, waiting for the ListOffsets answer that gives K (readback_k.go)
	kWhy     error // why K is 0 before any acknowledgement, nil if it is not
}

// settleLater takes b, which failed with cause and may be in the log, to
// be settled by read-back instead of being called back now; false when
// read-back does not apply (off, transactional, closing, never sent,
// partition gone). A transactional producer does not read back: a record
// of unknown fate makes its transaction abortable, and the abort settles it.
// b has left ps.inflight and ps.retry; it stays in ps.report, so the
// partition's later callbacks wait for it.
func (s *sender) settleLater(b *batch, cause error) bool {
	if !s.cfg.readback || s.txn != nil || s.stopping || b.attempts == 0 || b.part.gone {
		return false
	}
	h, err := protocol.ParseBatchHeader(b.bytes)
	if err != nil {
		return false // not a batch we built; cannot happen
	}
	now := time.Now()
	from, kWhy, _ := b.kFrom()
	j := &settleJob{
		b: b, cause: cause, from: from, kWhy: kWhy, since: now, fence: -1,
		id:       batchIdentity{h.ProducerID, h.ProducerEpoch, h.BaseSequence, h.NumRecords},
		deadline: now.Add(min(s.cfg.readbackTimeout, s.cfg.deliveryTimeout)),
	}
	s.settling = append(s.settling, j)
	if s.cfg.regress.on(readbackNoFence) {
		s.startScan(j, -1) // the bug: reading before anything fences the batch
	}
	return true
}

// fenceAcked looks whether b, acknowledged at baseOffset, fences a batch
// of its partition waiting to be settled, and starts those reads.
func (s *sender) fenceAcked(b *batch, baseOffset int64) {
	if baseOffset < 0 {
		return // a duplicate's answer without an offset: no Y to read up to
	}
	var h protocol.BatchInfo
	parsed := false
	for _, j := range s.settling {
		if j.b.part != b.part || j.fence >= 0 || j.scanning {
			continue
		}
		if !parsed {
			var err error
			if h, err = protocol.ParseBatchHeader(b.bytes); err != nil {
				return
			}
			parsed = true
		}
		switch {
		case h.ProducerID == j.id.pid && h.ProducerEpoch > j.id.epoch:
		case h.ProducerID != j.id.pid:
			j.newPID = true
		default:
			continue // the same epoch fences nothing
		}
		s.startScan(j, baseOffset)
	}
}

// settleDue gives up on the batches whose fence has not come by their
// deadline, and returns the earliest deadline still waiting.
func (s *sender) settleDue(now time.Time) (next time.Time) {
	for i := 0; i < len(s.settling); {
		j := s.settling[i]
		if j.scanning || now.Before(j.deadline) {
			if !j.scanning {
				next = earliest(next, j.deadline)
			}
			i++
			continue
		}
		s.settled(j, scanResult{reason: ErrReadbackNoFence})
	}
	return next
}

// settleAll ends every read-back at Close: their fate stays unknown.
func (s *sender) settleAll() {
	for len(s.settling) > 0 {
		s.settled(s.settling[0], scanResult{reason: ErrClosed})
	}
}

// startScan reads j's range [j.from, fence) in the background; fence -1
// reads to the high watermark (the negative control).
func (s *sender) startScan(j *settleJob, fence int64) {
	j.fence, j.scanning = fence, true
	var ok bool
	if j.from, j.kWhy, ok = j.b.kFrom(); !ok {
		j.waitK = true // kAnswered starts it
		return
	}
	ps := j.b.part
	q := &scanQuery{
		topic: ps.topic.name, topicID: j.b.topicID, partition: ps.id, leaderEpoch: ps.leaderEpoch(),
		addrs: s.controlAddrs(), id: j.id, from: j.from, fence: fence, maxBytes: s.cfg.readbackMaxBytes,
		seqOnly: s.cfg.regress.on(readbackSeqOnly), cfg: s.dialConfig(), timeout: s.cfg.requestTimeout,
	}
	if n := s.nodes[ps.leader()]; ps.leader() >= 0 && n != nil {
		q.addr = n.addr
	}
	ctx, cancel := context.WithDeadline(s.ctx, j.deadline)
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		defer cancel()
		r := q.run(ctx)
		if ctx.Err() != nil && s.ctx.Err() != nil {
			r.reason = ErrClosed
		}
		s.p.post(func() { s.settled(j, r) })
	}()
}

// scanResult is what a read found.
type scanResult struct {
	offsets []int64
	bytes   int64
	reason  error // why absence is not proven (or the read failed)
}

// settled applies r to j's batch and calls its records back.
func (s *sender) settled(j *settleJob, r scanResult) {
	for i, x := range s.settling {
		if x == j {
			s.settling = append(s.settling[:i], s.settling[i+1:]...)
			break
		}
	}
	b := j.b
	ps := b.part
	n := int64(len(b.records))
	info := ReadbackInfo{
		Topic: ps.topic.name, Partition: ps.id, ProducerID: j.id.pid, ProducerEpoch: j.id.epoch,
		BaseSequence: j.id.seq, Records: len(b.records), Offsets: r.offsets, From: j.from, Fence: j.fence,
		Bytes: r.bytes, Waited: time.Since(j.since),
	}
	if len(r.offsets) == 0 && r.reason == nil {
		switch {
		case ps.topic.recreated != b.scanGen || j.fence >= 0 && j.from > j.fence:
			// A K past the fence is another log's: a re-creation not
			// seen (no topic ids) since the batch was sent.
			r.reason = ErrReadbackTopicRecreated
		case j.newPID:
			r.reason = ErrReadbackNewProducerID
		}
	}
	if j.kWhy != nil && j.from == 0 && (errors.Is(r.reason, ErrReadbackLogStart) || errors.Is(r.reason, ErrReadbackBudget)) {
		r.reason = fmt.Errorf("%w (K 0: no acknowledgement before the first send, and %v)", r.reason, j.kWhy)
	}
	c := &s.stats.readback
	var err error
	switch {
	case len(r.offsets) == 1:
		info.Outcome = ReadbackWritten
		c.written.Add(n)
	case len(r.offsets) > 1:
		info.Outcome = ReadbackWrittenTwice
		c.twice.Add(n)
		offs := make([]string, len(r.offsets))
		for i, o := range r.offsets {
			offs[i] = fmt.Sprint(o)
		}
		err = fmt.Errorf("%w, at offsets %s (last error: %w)", ErrWrittenTwice, strings.Join(offs, " and "), j.cause)
	case r.reason == nil:
		info.Outcome = ReadbackNotWritten
		c.notWritten.Add(n)
		err = fmt.Errorf("%w (last error: %w)", ErrNotWritten, j.cause)
	default:
		info.Outcome, info.Reason = ReadbackUnknown, r.reason
		c.unknown.Add(n)
		for _, k := range []struct {
			err error
			c   *atomic.Int64
		}{{ErrReadbackNotAuthorized, &c.notAuthorized}, {ErrReadbackLogStart, &c.logStart}, {ErrReadbackCompacted, &c.compacted},
			{ErrReadbackNewProducerID, &c.newPID}, {ErrReadbackTopicRecreated, &c.recreated}, {ErrReadbackBudget, &c.budget}, {ErrReadbackNoFence, &c.noFence}} {
			if errors.Is(r.reason, k.err) {
				k.c.Add(n)
				break
			}
		}
	}
	s.cfg.hooks.readback(info)
	if info.Outcome == ReadbackWritten || info.Outcome == ReadbackWrittenTwice {
		for i := range b.records {
			b.records[i].rec.Offset = r.offsets[0] + int64(i)
		}
	}
	if info.Outcome == ReadbackWritten {
		s.stats.recordsSent.Add(n)
		s.finish(b, nil)
		return
	}
	s.stats.recordsFailed.Add(n)
	de := &DeliveryError{Topic: ps.topic.name, Partition: ps.id, BaseSequence: j.id.seq, Err: err}
	if info.Outcome == ReadbackUnknown {
		de.FateUnknown = true
		de.Err = fmt.Errorf("%w (read back: %w)", j.cause, r.reason)
	}
	s.finish(b, de)
}

// scanQuery is one read-back, run off the sender goroutine.
type scanQuery struct {
	topic       string
	topicID     [16]byte
	partition   int32
	leaderEpoch int32
	addr        string   // the leader as the sender knew it ("" unknown)
	addrs       []string // brokers to ask for the leader
	id          batchIdentity
	from, fence int64
	maxBytes    int64
	seqOnly     bool
	cfg         protocol.DialConfig
	timeout     time.Duration
}

// readChunk is the most bytes one Fetch asks for.
const readChunk = 4 << 20

// readRetry is the wait before a read is tried again after an error, or
// while the replica's high watermark has not reached the fence.
const readRetry = 50 * time.Millisecond

// run reads [from, fence) and collects the batches with q.id, until ctx
// (the time budget) ends.
func (q *scanQuery) run(ctx context.Context) scanResult {
	var r scanResult
	var conn *protocol.Conn
	defer func() {
		if conn != nil {
			conn.Close()
		}
	}()
	off := q.from
	logStartPast := false
	var lastErr error
	retry := func(err error) {
		lastErr = err
		if conn != nil {
			conn.Close()
			conn = nil
		}
		q.addr = "" // ask who leads now
		sleepCtx(ctx, readRetry)
	}
	for {
		if ctx.Err() != nil {
			if lastErr != nil {
				// The last error as text: its own sentinels (a context's
				// deadline) are not the record's.
				r.reason = fmt.Errorf("%w: time (last error: %v)", ErrReadbackBudget, lastErr)
			} else {
				r.reason = fmt.Errorf("%w: time", ErrReadbackBudget)
			}
			return r
		}
		if conn == nil {
			c, err := q.dialLeader(ctx)
			if err != nil {
				retry(err)
				continue
			}
			conn = c
		}
		rctx, cancel := context.WithTimeout(ctx, q.timeout)
		res, err := protocol.FetchHeaders(rctx, conn, protocol.HeaderFetch{
			Topic: q.topic, TopicID: q.topicID, Partition: q.partition, Offset: off,
			LeaderEpoch: q.leaderEpoch, MaxBytes: int32(min(readChunk, max(q.maxBytes-r.bytes, 1))),
		})
		cancel()
		if err != nil {
			retry(err)
			continue
		}
		switch res.ErrorCode {
		case 0:
		case kerr.TopicAuthorizationFailed.Code:
			r.reason = ErrReadbackNotAuthorized
			return r
		case kerr.OffsetOutOfRange.Code:
			// Below the log start (deleted), or past the replica's end.
			lctx, cancel := context.WithTimeout(ctx, q.timeout)
			start, code, err := protocol.ListOffsets(lctx, conn, q.topic, q.partition, protocol.OffsetEarliest)
			cancel()
			if err == nil && code == 0 && start > off {
				logStartPast, off = true, start
				continue
			}
			retry(kerr.OffsetOutOfRange)
			continue
		default:
			retry(kerr.ErrorForCode(res.ErrorCode)) // not the leader, a leader epoch moved: find it again
			continue
		}
		if res.LogStartOffset > q.from {
			logStartPast = true
		}
		r.bytes += int64(res.Bytes)
		done := false
		for _, h := range res.Batches {
			if q.fence >= 0 && h.BaseOffset >= q.fence {
				done = true
				break
			}
			if h.BaseOffset+int64(h.LastOffsetDelta) < q.from {
				continue
			}
			if q.matches(h) {
				r.offsets = append(r.offsets, h.BaseOffset)
			}
		}
		progressed := res.Next > off
		off = max(off, res.Next)
		switch {
		case q.fence >= 0 && off >= q.fence:
			done = true
		case q.fence < 0 && off >= res.HighWatermark:
			done = true // the negative control's end: whatever is there now
		}
		if done {
			break
		}
		if r.bytes >= q.maxBytes {
			r.reason = fmt.Errorf("%w: %d bytes read (longhaul.readback.max.bytes)", ErrReadbackBudget, r.bytes)
			return r
		}
		if !progressed {
			// Served nothing below the fence: this replica's high
			// watermark is not there yet. Absence is never taken from
			// the end of the data, only from reaching the fence.
			lastErr = errHighWatermarkShort
			sleepCtx(ctx, readRetry)
		}
	}
	if len(r.offsets) == 0 {
		switch {
		case logStartPast:
			r.reason = ErrReadbackLogStart
		default:
			r.reason = q.compacted(ctx, conn)
		}
	}
	return r
}

var errHighWatermarkShort = errors.New("the replica's high watermark had not reached the fence")

// sleepCtx waits d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// matches reports whether h is an attempt of q's batch.
func (q *scanQuery) matches(h protocol.BatchInfo) bool {
	if q.seqOnly {
		return h.BaseSequence == q.id.seq // the bug: another producer's or epoch's batch matches
	}
	return h.ProducerID == q.id.pid && h.ProducerEpoch == q.id.epoch && h.BaseSequence == q.id.seq &&
		h.NumRecords == q.id.records && h.LastOffsetDelta == q.id.records-1
}

// dialLeader connects to the partition's leader: the one the sender named,
// else the one a Metadata answer names (its leader epoch taken too).
func (q *scanQuery) dialLeader(ctx context.Context) (*protocol.Conn, error) {
	if q.addr == "" {
		c, err := dialFirst(ctx, q.addrs, q.cfg, q.timeout)
		if err != nil {
			return nil, err
		}
		mctx, cancel := context.WithTimeout(ctx, q.timeout)
		md, err := protocol.Metadata(mctx, c, []string{q.topic})
		cancel()
		c.Close()
		if err != nil {
			return nil, err
		}
		t, ok := md.Topics[q.topic]
		if !ok || t.ErrorCode != 0 {
			return nil, fmt.Errorf("metadata of %s: %w", q.topic, kerr.ErrorForCode(t.ErrorCode))
		}
		for _, p := range t.Partitions {
			if p.Partition == q.partition && md.Brokers[p.Leader] != "" {
				q.addr, q.leaderEpoch = md.Brokers[p.Leader], p.LeaderEpoch
			}
		}
		if q.addr == "" {
			return nil, fmt.Errorf("no leader known for %s[%d]", q.topic, q.partition)
		}
	}
	dctx, cancel := context.WithTimeout(ctx, q.timeout)
	defer cancel()
	return protocol.Dial(dctx, q.addr, q.cfg)
}

// compacted returns ErrReadbackCompacted, wrapped with detail, unless the
// topic's cleanup.policy is known to be delete only; nil then.
func (q *scanQuery) compacted(ctx context.Context, conn *protocol.Conn) error {
	dctx, cancel := context.WithTimeout(ctx, q.timeout)
	defer cancel()
	policy, found, code, err := protocol.TopicConfigValue(dctx, conn, q.topic, "cleanup.policy")
	switch {
	case err != nil:
		return fmt.Errorf("%w (cleanup.policy unread: %w)", ErrReadbackCompacted, err)
	case code != 0:
		return fmt.Errorf("%w (cleanup.policy unread: %w)", ErrReadbackCompacted, kerr.ErrorForCode(code))
	case found && strings.Contains(policy, "compact"):
		return fmt.Errorf("%w (cleanup.policy %s)", ErrReadbackCompacted, policy)
	}
	return nil
}
