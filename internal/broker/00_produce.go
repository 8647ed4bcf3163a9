package broker

import (
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/longhaul-kafka/longhaul/protocol"
)

// Produce: v3-14
//
// Behavior:
// * v14 (KIP-1269) has v13's body; every v14 partition response carries
//   ProducerStateBatchesToRetain (tag 1) = the topic's window. An old-mode
//   node answers v14 with UNSUPPORTED_VERSION on every partition and never
//   sends the field.
// * v13+ names topics by id (UNKNOWN_TOPIC_ID), older versions by name.
// * acks must be -1, 1 or 0 (INVALID_REQUIRED_ACKS); acks=0 writes no
//   response. Writes are immediate: TimeoutMillis is ignored.
// * Each partition must hold exactly one v2 batch (INVALID_RECORD
//   otherwise), at most max.message.bytes (MESSAGE_TOO_LARGE), with a good
//   CRC, magic 2, consistent counts and records that decode
//   (CORRUPT_MESSAGE); control batches are INVALID_RECORD.
// * Idempotent batches (producer id >= 0) follow the dedup rules of
//   producerState; duplicates answer the original base offset.
// * A partition led by another node answers NOT_LEADER_OR_FOLLOWER, with
//   the KIP-951 CurrentLeader and the leader's endpoint at v10+.
// * Fault hooks: InjectError and Refuse answers of ScriptAnswers answer a
//   partition before anything else; InjectErrorAfterAppend and
//   AppendThenFail answers replace the success of an appended (or
//   duplicate) batch by an error code; DropProduceResponses drops the
//   whole response after the appends.
// * A Refuse answer of NOT_LEADER_OR_FOLLOWER with a Hint carries that
//   CurrentLeader (a node the cluster lacks, a stale epoch) instead.
// * SetProduceQuota: ThrottleMillis is what the node's byte-rate budget
//   earns (the larger of it and SetProduceThrottle's); from v6 the
//   connection is then muted for it once the answer is written (KIP-219),
//   below v6 the answer waits for it.
//
// * Transactions: a transactional batch (attribute bit 0x10) needs the
//   request's transactional id mapping to its producer id
//   (INVALID_PRODUCER_ID_MAPPING) at the coordinator's epoch
//   (INVALID_PRODUCER_EPOCH). Its first batch on a partition per
//   transaction is verified: at v12+ (transaction version 2; as on Kafka
//   4.4 whatever the finalized feature says) it adds the partition to the
//   transaction (while the previous one's markers
//   are pending the request waits for them up to 100 ms, as Kafka retries
//   inside the broker, then answers CONCURRENT_TRANSACTIONS, or
//   NOT_ENOUGH_REPLICAS below v12; sequence 0 required where the
//   producer retains no batch of its epoch, unless
//   SetLenientTransactionStart), otherwise the partition must have been
//   added by AddPartitionsToTxn (INVALID_TXN_STATE up to v10,
//   TRANSACTION_ABORTABLE from v11). An idempotent, non-transactional
//   batch of a producer with an open transaction on the partition is
//   INVALID_TXN_STATE.
//
// Simplifications: no replication, LogAppendTime batches keep the
// client's timestamps, one producer id per request is not enforced.

func init() { regKey(0, 3, produceMaxVersion, handleProduce) }

// maxDecompressed bounds a batch's decompressed body.
const maxDecompressed = 16 << 20

func handleProduce(c *Cluster, r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.ProduceRequest)
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	now := time.Now()
	v14 := req.Version >= 14
	if c.txnCompleting(req) && !r.final {
		// Kafka retries a transactional produce meeting the previous
		// transaction's pending markers inside the broker for up to
		// 100 ms before answering CONCURRENT_TRANSACTIONS.
		r.waitCh = c.dataWait()
		if r.waitUntil.IsZero() {
			r.waitUntil = r.readAt.Add(min(txnProduceWait, maxFetchWait))
		}
		return nil, errWaitData
	}

	var leaders map[int32]bool // nodes named in CurrentLeader hints, for resp.Brokers
	bytes := 0                 // record bytes of known partitions, for the quota
	answer := func(rt *kmsg.ProduceResponseTopic, part int32, code int16, msg string) *kmsg.ProduceResponseTopicPartition {
		sp := kmsg.NewProduceResponseTopicPartition()
		sp.Partition = part
		sp.ErrorCode = code
		if msg != "" && req.Version >= 8 {
			m := msg // a copy, so a call without a message allocates nothing
			sp.ErrorMessage = &m
		}
		rt.Partitions = append(rt.Partitions, sp)
		return &rt.Partitions[len(rt.Partitions)-1]
	}

	if c.cfg.OnProduce != nil {
		var records [][]byte
		for _, qt := range req.Topics {
			for _, qp := range qt.Partitions {
				records = append(records, qp.Records)
			}
		}
		c.cfg.OnProduce(r.n.id, records)
	}
	badAcks := req.Acks != -1 && req.Acks != 0 && req.Acks != 1
	oldReject := v14 && r.n.old
	for _, qt := range req.Topics {
		rt := kmsg.NewProduceResponseTopic()
		rt.Topic, rt.TopicID = qt.Topic, qt.TopicID
		t := c.requestTopic(req.Version, qt.Topic, qt.TopicID)
		for _, qp := range qt.Partitions {
			switch {
			case badAcks:
				answer(&rt, qp.Partition, kerr.InvalidRequiredAcks.Code, "acks must be -1, 0 or 1")
			case oldReject:
				answer(&rt, qp.Partition, kerr.UnsupportedVersion.Code, "old-mode node: Produce v14 not supported")
			case t == nil && req.Version >= 13:
				answer(&rt, qp.Partition, kerr.UnknownTopicID.Code, "")
			case t == nil || qp.Partition < 0 || int(qp.Partition) >= len(t.parts):
				answer(&rt, qp.Partition, kerr.UnknownTopicOrPartition.Code, "")
			default:
				p := t.parts[qp.Partition]
				sp := answer(&rt, qp.Partition, 0, "")
				hint := c.producePartition(r, p, qp.Records, sp, now)
				if sp.ErrorCode == kerr.NotLeaderForPartition.Code && req.Version >= 10 {
					if hint == nil {
						hint = &LeaderHint{Leader: p.leader, Epoch: p.epoch}
					}
					sp.CurrentLeader.LeaderID = hint.Leader
					sp.CurrentLeader.LeaderEpoch = hint.Epoch
					if hint.Leader >= 0 && int(hint.Leader) < len(c.nodes) {
						if leaders == nil {
							leaders = make(map[int32]bool)
						}
						leaders[hint.Leader] = true
					}
				}
				bytes += len(qp.Records)
				c.countAnswer(p, sp.ErrorCode)
			}
			if v14 && !r.n.old {
				// Every v14 partition response carries the window,
				// errors included; an unknown topic gets the default.
				w := c.defaultWindow
				if t != nil {
					w = c.windowOf(t)
				}
				rt.Partitions[len(rt.Partitions)-1].UnknownTags = c.retainTags(w)
			}
		}
		resp.Topics = append(resp.Topics, rt)
	}
	for id := range leaders {
		n := c.nodes[id]
		b := kmsg.NewProduceResponseBroker()
		b.NodeID = id
		b.Host, b.Port = n.hostPort()
		resp.Brokers = append(resp.Brokers, b)
	}
	if req.Acks == 0 {
		r.p.drop = false
		return nil, nil
	}
	if r.n.dropProduce > 0 {
		r.n.dropProduce--
		r.p.drop = true
	}
	resp.ThrottleMillis = int32(r.n.throttle.Milliseconds())
	if d := r.n.quotaThrottle(bytes, now); d > 0 {
		resp.ThrottleMillis = max(resp.ThrottleMillis, int32(d.Milliseconds()))
		if req.Version >= 6 {
			r.p.mute = d // the connection is muted once the answer is written (KIP-219)
		} else {
			r.p.due = r.p.due.Add(d) // older clients do not know to wait: the answer waits
		}
	}
	return resp, nil
}

// quotaThrottle counts bytes against n's produce quota (SetProduceQuota)
// at now and returns the throttle they earn, in whole milliseconds: the
// time the bytes past the burst take to drain at the quota's rate. c.mu
// is held.
func (n *node) quotaThrottle(bytes int, now time.Time) time.Duration {
	if n.quota <= 0 {
		return 0
	}
	rate := float64(n.quota)
	if !n.quotaAt.IsZero() {
		n.quotaLevel = max(0, n.quotaLevel-rate*now.Sub(n.quotaAt).Seconds())
	}
	n.quotaAt = now
	n.quotaLevel += float64(bytes)
	over := n.quotaLevel - rate/10
	if over <= 0 {
		return 0
	}
	return time.Duration(over/rate*1000) * time.Millisecond
}

// producePartition validates and appends one partition's records, filling
// sp, and returns the leader hint of a scripted answer (Answer.Hint), nil
// for none. c.mu is held.
func (c *Cluster) producePartition(r *request, p *partition, records []byte, sp *kmsg.ProduceResponseTopicPartition, now time.Time) (hint *LeaderHint) {
	fail := func(code int16, msg string) {
		sp.ErrorCode = code
		if msg != "" && r.version >= 8 {
			m := msg // a copy, so a call without a message allocates nothing
			sp.ErrorMessage = &m
		}
	}
	// Count the batch in flight from now until its response is written
	// (or dropped, or its connection dies): the window a producer
	// really has open, emulated delay included. Only a batch whose
	// header we can read has a producer id to count. The header (and
	// its CRC) is checked once, here; the checks below reuse it.
	info, hdrErr := protocol.ParseBatchHeader(records)
	if hdrErr == nil && info.ProducerID >= 0 {
		c.trackInflight(r, p, info.ProducerID, info.ProducerEpoch, info.BaseSequence)
	}
	if len(p.injected) > 0 {
		inj := &p.injected[0]
		code, mode := inj.code, inj.mode
		if inj.n--; inj.n <= 0 {
			p.injected = p.injected[1:]
		}
		switch mode {
		case Refuse:
			fail(code, "injected")
			if code == kerr.NotLeaderForPartition.Code {
				return inj.hint
			}
			return nil
		case AppendThenFail:
			// Whatever the normal path below decides; only a batch it
			// wrote (or had written) is then answered with code.
			defer func() {
				if sp.ErrorCode == 0 {
					sp.BaseOffset = -1
					fail(code, "injected after append")
				}
			}()
		}
	}
	if p.leader != r.n.id {
		fail(kerr.NotLeaderForPartition.Code, "")
		return
	}
	if len(records) > p.t.maxMessageBytes() {
		fail(kerr.MessageTooLarge.Code, "")
		return
	}
	if hdrErr != nil || info.TotalLen() != len(records) {
		// Not one well-formed batch filling the partition's bytes:
		// split them to tell a corrupt batch from several (or none).
		batches, err := protocol.SplitBatches(records)
		switch {
		case err != nil:
			fail(kerr.CorruptMessage.Code, err.Error())
		case len(batches) != 1:
			fail(kerr.InvalidRecord.Code, fmt.Sprintf("produce needs exactly one batch per partition, got %d", len(batches)))
		default:
			fail(kerr.CorruptMessage.Code, hdrErr.Error())
		}
		return
	}
	// Decode every record to check it, without keeping them: the log
	// stores the batch's bytes, and Records decodes them when asked.
	badDeltas := false
	err := protocol.ForEachRecord(records, info, maxDecompressed, func(i int, rec protocol.Record) error {
		badDeltas = badDeltas || rec.Offset-info.BaseOffset != int64(i)
		return nil
	})
	switch {
	case err != nil:
		fail(kerr.CorruptMessage.Code, err.Error())
		return
	case info.NumRecords <= 0 || info.LastOffsetDelta != info.NumRecords-1:
		fail(kerr.CorruptMessage.Code, "record count and last offset delta disagree")
		return
	case info.Control():
		fail(kerr.InvalidRecord.Code, "clients cannot send control batches")
		return
	case badDeltas:
		fail(kerr.InvalidRecord.Code, "record offset deltas must be 0..n-1")
		return
	}
	// An appended batch is stored in place, without a copy: the request
	// frame becomes the log's (keepFrame), and the connection reads its
	// next request into a fresh buffer.
	b := records[:len(records):len(records)]

	code, msg, lenient := c.txnProduce(r, p, info, now)
	if code != 0 {
		fail(code, msg)
		return
	}
	if info.ProducerID < 0 {
		r.cc.keepFrame = true
		sp.BaseOffset = c.appendBatch(p, b, info)
		sp.LogStartOffset = 0
		return
	}
	if info.BaseSequence < 0 || info.ProducerEpoch < 0 {
		fail(kerr.InvalidRecord.Code, "idempotent batch without sequence or epoch")
		return
	}
	window := c.effectiveWindow(p)
	s := c.producer(p, info.ProducerID, now)
	vd, dup := s.check(info.ProducerEpoch, info.BaseSequence, info.LastSequence(), window)
	switch vd {
	case verdictDuplicate:
		p.stats.Duplicates++
		sp.BaseOffset = dup.baseOffset
		sp.LogStartOffset = 0
	case verdictOutOfOrder:
		fail(kerr.OutOfOrderSequenceNumber.Code, "")
	case verdictInvalidEpoch:
		fail(kerr.InvalidProducerEpoch.Code, "")
	case verdictAppend:
		r.cc.keepFrame = true
		base := c.appendBatch(p, b, info)
		c.txnAppended(p, info, base)
		if lenient {
			c.lenientStart(p, info, now)
		}
		if s == nil {
			s = &producerState{epoch: info.ProducerEpoch}
			p.pids[info.ProducerID] = s
		}
		s.push(batchMeta{
			firstSeq:   info.BaseSequence,
			lastSeq:    info.LastSequence(),
			baseOffset: base,
			lastOffset: base + int64(info.LastOffsetDelta),
			epoch:      info.ProducerEpoch,
		}, window, now)
		sp.BaseOffset = base
		sp.LogStartOffset = 0
	}
	return nil
}

// retainTags returns the shared tagged fields announcing window w in a
// v14 partition response (protocol.BatchesToRetainTags), built once per
// window value. c.mu is held.
func (c *Cluster) retainTags(w int) kmsg.Tags {
	t, ok := c.retainTagsOf[w]
	if !ok {
		if c.retainTagsOf == nil {
			c.retainTagsOf = make(map[int]kmsg.Tags)
		}
		t = protocol.BatchesToRetainTags(int32(w))
		c.retainTagsOf[w] = t
	}
	return t
}

// trackInflight counts one batch of pid on p in flight until r's response
// is written. c.mu is held.
func (c *Cluster) trackInflight(r *request, p *partition, pid int64, epoch int16, seq int32) {
	if n := p.addInflight(pid, 1); n > p.stats.MaxInFlight {
		p.stats.MaxInFlight = n
	}
	var w int32
	if r.version >= 14 && !r.n.old {
		w = int32(c.windowOf(p.t)) // what the partition response will announce
	}
	b := procBatch{p: p, pid: pid, epoch: epoch, seq: seq}
	if !c.checkWindow(r.n, b) {
		b = procBatch{}
	}
	r.p.inflight = append(r.p.inflight, inflightRef{p: p, pid: pid, n: r.n, w: w, b: b})
}

// addInflight adds d to pid's in-flight count on p and returns the new
// count; a count that reaches 0 is removed. A partition rarely has more
// than a few producers at once, so a slice beats a map. c.mu is held.
func (p *partition) addInflight(pid int64, d int) int {
	for i := range p.inflight {
		if e := &p.inflight[i]; e.pid == pid {
			e.n += d
			n := e.n
			if n <= 0 {
				p.inflight = slices.Delete(p.inflight, i, i+1)
			}
			return n
		}
	}
	if d <= 0 {
		return 0
	}
	p.inflight = append(p.inflight, pidCount{pid: pid, n: d})
	return d
}

// countAnswer counts the error codes PartitionStats reports. c.mu is held.
func (c *Cluster) countAnswer(p *partition, code int16) {
	switch code {
	case kerr.OutOfOrderSequenceNumber.Code:
		p.stats.OutOfOrder++
	case kerr.InvalidProducerEpoch.Code:
		p.stats.InvalidEpoch++
	case kerr.UnknownProducerID.Code:
		p.stats.UnknownProducer++
	}
}
