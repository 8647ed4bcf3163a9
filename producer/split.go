package producer

import (
	"fmt"

	"github.com/longhaul-kafka/longhaul/protocol"
)

// split replaces ps.retry[0], a batch the broker refused as too large
// (MESSAGE_TOO_LARGE, RECORD_LIST_TOO_LARGE), with two halves that carry
// the same sequence range, so the broker sees no gap and no epoch bump is
// needed. A half that is still
// too large is split again when it comes back; a single record that is too
// large fails alone (judge).
//
// ps has nothing in flight. The halves and every batch waiting behind them
// get fresh ords: ords are window positions, and the broker will retain one
// batch more than before for the same records.
//
// buffer.memory: each half gets a buffer of exactly its size, and b's is
// given back, so a split holds one batch header and the varint changes more
// than b did, never a pooled buffer per half. The sender cannot wait for
// that difference, so it is taken with TakeOrOwe: owed past the limit at
// most one batch buffer in all (batchBufferMost), the bound buffer.memory
// keeps anyway. Past that split takes nothing and reports false, and the
// partition waits (sendReady lists it in splitWait) until the release that
// pays the debt off wakes the sender. A partition whose every split is
// refused again needs only a header per level of splitting before a single
// record fails alone and gives its bytes back, so a batch buffer of debt
// always lets one partition get there: only one owes at a time (TakeOrOwe's
// debtor), the others waiting until its part is paid back. Shared, the
// room went to partial splits of many partitions, none of which could go
// on, with nothing in flight to pay them back.
func (s *sender) split(ps *partitionState) bool {
	b := ps.retry[0]
	info, recs, err := protocol.ParseRecordBatch(b.bytes, int(b.memory)+protocol.RecordBatchOverhead)
	if err != nil || len(recs) != len(b.records) || len(recs) < 2 {
		// Only our own bytes are parsed here; failing to read them back
		// is a bug, and the records are at least reported.
		b.split = false
		s.p.log.Error("splitting a batch we built failed; sending it whole", "err", err)
		return true
	}
	half := len(recs) / 2
	need1, need2 := splitSize(recs[:half]), splitSize(recs[half:])
	if !s.p.mem.TakeOrOwe(int64(need1+need2)-b.memory, int64(s.p.acc.batchBufferMost()), ps) {
		return false
	}
	if d := b.memory - int64(need1+need2); d > 0 {
		s.p.mem.Release(d)
	}
	b1 := s.splitPart(ps, b, recs[:half], b.records[:half], b.seq, need1)
	b2 := s.splitPart(ps, b, recs[half:], b.records[half:], addSeq(b.seq, half), need2)
	b1.bytes, b2.bytes = s.build(b1, info), s.build(b2, info)

	ps.retry[0] = b1
	ps.retry = append(ps.retry, nil)
	copy(ps.retry[2:], ps.retry[1:])
	ps.retry[1] = b2
	s.p.limiter.Abandon(ps.admission, b.ord)
	for _, x := range ps.retry {
		if x != b1 && x != b2 {
			s.p.limiter.Abandon(ps.admission, x.ord) // its position moves to the end
		}
		x.ord = ps.nextOrd
		ps.nextOrd++
	}
	for i, x := range ps.report {
		if x == b {
			ps.report = append(ps.report, nil)
			copy(ps.report[i+2:], ps.report[i+1:])
			ps.report[i], ps.report[i+1] = b1, b2
			break
		}
	}
	s.p.log.Info("batch too large for the broker; split in two", "topic", ps.topic.name, "partition", ps.id,
		"seq", b.seq, "records", len(recs), "err", b.lastErr)
	// b's memory now belongs to the halves, each holding its own buffer;
	// b itself is dropped (not recycled: its records slice is shared with
	// them). settleMemory changes nothing unless splitSize was wrong.
	s.p.acc.settleMemory(b1)
	s.p.acc.settleMemory(b2)
	return true
}

// splitSize is the exact buffer a batch of recs needs: the header and each
// record encoded with its deltas to the first.
func splitSize(recs []protocol.Record) int {
	n := protocol.RecordBatchOverhead
	for i, r := range recs {
		n += protocol.RecordSize(r.Timestamp-recs[0].Timestamp, int32(i), r.Key, r.Value, r.Headers)
	}
	return n
}

// splitPart makes a half of b holding recs in a buffer of exactly need
// bytes (splitSize), which it holds of buffer.memory.
func (s *sender) splitPart(ps *partitionState, b *batch, recs []protocol.Record, prs []pendingRecord, seq int32, need int) *batch {
	h := smallBatches.Get().(*batch)
	h.part, h.created = ps, b.created
	h.builder = protocol.BatchBuilder{} // not a pooled buffer: it would count more than the half needs
	h.builder.GrowCap(need)
	h.memory = int64(need)
	for i, r := range recs {
		h.builder.Append(r.Timestamp, r.Key, r.Value, r.Headers)
		h.records = append(h.records, prs[i])
	}
	h.seq = seq
	h.attempts = b.attempts
	h.lastErr = b.lastErr
	return h
}

// build encodes h under the producer id and epoch b was last sent with.
func (s *sender) build(h *batch, info protocol.BatchInfo) []byte {
	hdr := protocol.BatchHeader{
		ProducerID: info.ProducerID, ProducerEpoch: info.ProducerEpoch,
		BaseSequence: h.seq, Transactional: info.Transactional(), Compression: s.cfg.compression, CompressionLevel: s.cfg.compressionLevel,
	}
	out, err := h.builder.BuildInPlace(hdr)
	if err != nil {
		hdr.Compression = protocol.CodecNone
		out, err = h.builder.BuildInPlace(hdr)
		if err != nil {
			panic(fmt.Sprintf("producer: building a split batch: %v", err))
		}
	}
	return out
}
