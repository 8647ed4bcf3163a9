package soak

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/longhaul-kafka/longhaul/internal/broker"
	"github.com/longhaul-kafka/longhaul/internal/logcheck"
	"github.com/longhaul-kafka/longhaul/internal/testkit"
	"github.com/longhaul-kafka/longhaul/producer"
)

// logRecord is one record read back from the cluster.
type logRecord = broker.LogRecord

// Record outcomes, as the callback reported them.
const (
	stPending       uint8 = iota // no callback yet
	stAcked                      // success
	stFailedUnknown              // DeliveryError with FateUnknown: in the log at most once
	stFailedKnown                // DeliveryError without FateUnknown, or ErrOrderLost: not in the log
	stFailedBad                  // an error that does not say why
)

// recState is what one producer knows of one of its records. Small on
// purpose: a long soak tracks millions.
type recState struct {
	offset int64
	part   int32
	size   int32 // bytes the producer accounts against buffer.memory
	topic  uint8
	home   uint8 // the partition of its key (keyPartition)
	status uint8
	calls  uint8 // saturates at 255
}

// book is one producer's records, indexed by the sequence number written
// in each value. mu guards everything; callbacks and the producing
// goroutine both write.
type book struct {
	mu          sync.Mutex
	recs        []recState
	outstanding int64 // bytes accepted and not yet called back
	peak        int64
	errs        []string       // first unexplained errors, for the report
	causes      map[string]int // failure causes, by DeliveryError.Err text
	orderLost   int            // records failed with producer.ErrOrderLost
	// streams are the producer's partitions, indexed topic*partitions +
	// partition: callback order and progress.
	streams []stream
	// codes counts failures by broker error code and partition, for the
	// check that each code was answered to that partition.
	codes map[codeAt]int
	// outOfOrder and wrongPartition count callbacks after a later record
	// of the same partition, and records placed elsewhere than their
	// key's partition; problems holds their first descriptions.
	outOfOrder, wrongPartition int
	problems                   []string
}

// stream is what one producer's book knows of one partition.
type stream struct {
	lastCallback int64 // sequence of the latest record called back; -1 none
	// outstanding counts records accepted (Produce returned) and not
	// called back; it may dip below 0 for a moment when a callback runs
	// before Produce returns.
	outstanding int
	since       time.Time // last callback, or when outstanding work began
	flagged     bool      // reported stuck; cleared by the next callback
}

// codeAt is a broker error code a record of a partition failed with.
type codeAt struct {
	p    tp
	code int16
}

// add registers the next record, to the partition home of topic, and
// returns its sequence number.
func (b *book) add(topic uint8, home int32, size int32) uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.recs = append(b.recs, recState{topic: topic, home: uint8(home), size: size, part: -1, offset: -1})
	b.outstanding += int64(size)
	b.peak = max(b.peak, b.outstanding)
	return uint64(len(b.recs) - 1)
}

// stream returns the stream of topic index t, partition p.
func (b *book) stream(t uint8, p uint8) *stream {
	i := int(t)*partitions + int(p)
	for len(b.streams) <= i {
		b.streams = append(b.streams, stream{lastCallback: -1})
	}
	return &b.streams[i]
}

// accepted records that Produce returned for seq: the record is work the
// producer owns from now on.
func (b *book) accepted(seq uint64, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	st := &b.recs[seq]
	s := b.stream(st.topic, st.home)
	if s.outstanding <= 0 {
		s.since = now
	}
	s.outstanding++
}

func (b *book) problem(format string, args ...any) {
	if len(b.problems) < 10 {
		b.problems = append(b.problems, fmt.Sprintf(format, args...))
	}
}

// done records a callback.
func (b *book) done(seq uint64, r *producer.Record, err error, topics []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	st := &b.recs[seq]
	if st.calls < 255 {
		st.calls++
	}
	if st.calls > 1 {
		return // counted as a bad callback; keep the first outcome
	}
	b.outstanding -= int64(st.size)
	st.part = r.Partition()
	s := b.stream(st.topic, st.home)
	s.outstanding--
	s.since, s.flagged = time.Now(), false
	if int64(seq) < s.lastCallback {
		b.outOfOrder++
		b.problem("%s[%d]: seq %d called back after seq %d (err %v)", topics[st.topic], st.home, seq, s.lastCallback, err)
	}
	s.lastCallback = max(s.lastCallback, int64(seq))
	if st.part >= 0 && st.part != int32(st.home) {
		b.wrongPartition++
		b.problem("%s seq %d: key's partition is %d, the producer placed it on %d", topics[st.topic], seq, st.home, st.part)
	}
	if err == nil {
		st.status, st.offset = stAcked, r.Offset
		return
	}
	st.status = classify(err, topics[st.topic])
	if b.causes == nil {
		b.causes = map[string]int{}
	}
	b.causes[cause(err)]++
	if errors.Is(err, producer.ErrOrderLost) {
		b.orderLost++
	}
	if ke := (*kerr.Error)(nil); errors.As(err, &ke) {
		if b.codes == nil {
			b.codes = map[codeAt]int{}
		}
		b.codes[codeAt{tp{topics[st.topic], int32(st.home)}, ke.Code}]++
	}
	if st.status == stFailedBad && len(b.errs) < 5 {
		b.errs = append(b.errs, fmt.Sprintf("seq %d: %v", seq, err))
	}
}

// classify sorts a failure: it must be a DeliveryError for the record's
// topic with a cause. ErrOrderLost records are checked as not in the log,
// as ErrOrderLost promises, even when marked FateUnknown (an earlier
// attempt's doubt, which the renumbering's resolution settled).
func classify(err error, topic string) uint8 {
	var de *producer.DeliveryError
	if !errors.As(err, &de) || de.Err == nil || de.Topic != topic {
		return stFailedBad
	}
	if de.FateUnknown && !errors.Is(err, producer.ErrOrderLost) {
		return stFailedUnknown
	}
	return stFailedKnown
}

// cause names a failure for the report: the DeliveryError's cause, cut
// before details that vary per record, and whether the fate is unknown.
func cause(err error) string {
	var de *producer.DeliveryError
	if !errors.As(err, &de) {
		return "not a DeliveryError: " + err.Error()
	}
	var s string
	if ke := (*kerr.Error)(nil); errors.As(de.Err, &ke) {
		s = ke.Message // the code's name: its long description would not fit a line
		// A producer error wrapping the code (a delivery timeout after
		// it, say) keeps its own name in front.
		if outer := strings.SplitN(fmt.Sprint(de.Err), ":", 2)[0]; de.Err != error(ke) && outer != s {
			s = strings.TrimPrefix(outer, "producer") + "/" + s
		}
	} else {
		s = fmt.Sprint(de.Err)
		s = strings.TrimPrefix(s, "producer: ")
		if i := strings.IndexAny(s, ":(;"); i > 0 {
			s = s[:i]
		}
		if len(s) > 40 {
			s = s[:40]
		}
	}
	s = strings.Join(strings.Fields(s), "_")
	if de.FateUnknown {
		s += "(fate_unknown)"
	}
	return s
}

// encodeValue writes a record value carrying its producer and sequence,
// padded to size bytes (testkit.Value, the producer's index as the id).
func encodeValue(producerIdx int, seq uint64, size int) []byte {
	return testkit.Value(strconv.Itoa(producerIdx), seq, size)
}

// decodeValue is encodeValue's inverse; n is the length of the identity,
// the value up to and including the second '/'.
func decodeValue(v []byte) (producerIdx int, seq uint64, n int, ok bool) {
	id, seq, n, ok := testkit.ParseValue(v)
	if !ok || len(id) > 5 {
		return 0, 0, 0, false
	}
	for _, c := range id {
		if c < '0' || c > '9' {
			return 0, 0, 0, false
		}
		producerIdx = producerIdx*10 + int(c-'0')
	}
	return producerIdx, seq, n, producerIdx < 1<<16
}

// tp names a partition.
type tp struct {
	topic string
	part  int32
}

// counts is what the checks found.
type counts struct {
	acked, failed, fateUnknown, pending int

	lost, dup, reorder int
	phantom            int // failed without FateUnknown, yet in the log
	badOffset          int // callback offset or partition differs from the log
	foreign            int // a log record we did not write
	badCallbacks       int // records called back other than exactly once
	unexplained        int // failures without a DeliveryError saying why, or with a code never answered to their partition
	outOfOrder         int // callbacks after a later record's of the same partition

	problems []string
}

func (c *counts) problem(format string, args ...any) {
	if len(c.problems) < 20 {
		c.problems = append(c.problems, fmt.Sprintf(format, args...))
	}
}

// checkRecords checks the books against the partitions read back. It
// expects every producer closed (no callback still to come).
//
// The log check is logcheck's: a stream is one producer's records to one
// partition (the one its callback reported, else its key's), and each
// partition's log is split among the producers by the value's prefix. A
// record found in another partition or topic than its stream's is a bad
// offset and is left out of the log check (an acked one is then also
// lost from its own partition).
func checkRecords(books []*book, topics []string, logs map[tp][]logRecord) counts {
	var c counts
	for i, b := range books {
		b.mu.Lock()
		for _, e := range b.errs {
			c.problem("producer %d: unexplained failure %s", i, e)
		}
		c.outOfOrder += b.outOfOrder
		c.badOffset += b.wrongPartition
		for _, e := range b.problems {
			c.problem("producer %d: %s", i, e)
		}
	}
	defer func() {
		for _, b := range books {
			b.mu.Unlock()
		}
	}()
	topicIdx := map[string]uint8{}
	for i, t := range topics {
		topicIdx[t] = uint8(i)
	}
	// The log of each stream; values are sliced to their identity, the
	// "producer/seq/" prefix, so nothing is copied.
	entries := map[streamKey][]logcheck.Entry{}
	wheres := make([]tp, 0, len(logs))
	for where := range logs {
		wheres = append(wheres, where)
	}
	slices.SortFunc(wheres, func(a, b tp) int { return cmp.Or(cmp.Compare(a.topic, b.topic), cmp.Compare(a.part, b.part)) })
	for _, where := range wheres {
		ti, known := topicIdx[where.topic]
		for _, lr := range logs[where] {
			pi, seq, n, ok := decodeValue(lr.Value)
			if !ok || pi >= len(books) || seq >= uint64(len(books[pi].recs)) {
				c.foreign++
				c.problem("%s[%d] offset %d: record not written by the soak", where.topic, where.part, lr.Offset)
				continue
			}
			st := &books[pi].recs[seq]
			at := streamKey{pi, ti, where.part}
			if sk := streamOf(pi, st); !known || sk != at {
				c.badOffset++
				c.problem("%s[%d] offset %d: producer %d seq %d was produced to %s[%d]", where.topic, where.part, lr.Offset, pi, seq, topics[sk.topic], sk.part)
				continue
			}
			entries[at] = append(entries[at], logcheck.Entry{Value: lr.Value[:n], Offset: lr.Offset})
		}
	}
	// The records of each stream, in produce order.
	sent := map[streamKey][]uint64{}
	for pi, b := range books {
		for seq := range b.recs {
			st := &b.recs[seq]
			sk := streamOf(pi, st)
			sent[sk] = append(sent[sk], uint64(seq))
			if st.calls != 1 {
				c.badCallbacks++
				c.problem("producer %d seq %d: callback ran %d times", pi, seq, st.calls)
			}
			switch st.status {
			case stPending:
				c.pending++
			case stAcked:
				c.acked++
			case stFailedUnknown:
				c.failed++
				c.fateUnknown++
			case stFailedKnown:
				c.failed++
			case stFailedBad:
				c.failed++
				c.unexplained++
			}
		}
	}
	streams := slices.Collect(maps.Keys(sent))
	for sk := range entries {
		if _, ok := sent[sk]; !ok {
			streams = append(streams, sk)
		}
	}
	slices.SortFunc(streams, func(a, b streamKey) int {
		return cmp.Or(cmp.Compare(a.prod, b.prod), cmp.Compare(a.topic, b.topic), cmp.Compare(a.part, b.part))
	})
	for _, sk := range streams {
		seqs := sent[sk]
		ss := make([]logcheck.Sent, len(seqs))
		for i, seq := range seqs {
			st := &books[sk.prod].recs[seq]
			ss[i] = logcheck.Sent{Value: encodeValue(sk.prod, seq, 0), Outcome: logcheck.FateUnknown}
			switch st.status {
			case stAcked:
				ss[i].Outcome = logcheck.Acked
				ss[i].Offset, ss[i].HasOffset = st.offset, st.offset >= 0
			case stFailedKnown:
				ss[i].Outcome = logcheck.NotWritten
			}
		}
		r := logcheck.Stream(ss, entries[sk])
		c.lost += r.Count(logcheck.Lost)
		c.dup += r.Count(logcheck.Duplicate)
		c.reorder += r.Count(logcheck.Reorder)
		c.phantom += r.Count(logcheck.Written)
		c.badOffset += r.Count(logcheck.OffsetMismatch)
		c.foreign += r.Count(logcheck.Stray) + r.Count(logcheck.NotUnique)
		for _, v := range r.Violations {
			c.problem("producer %d %s[%d]: %v", sk.prod, topics[sk.topic], sk.part, v)
		}
	}
	return c
}

// streamKey names one producer's records to one partition.
type streamKey struct {
	prod  int
	topic uint8
	part  int32
}

// streamOf returns the stream of producer pi's record st: the partition
// its callback reported, else (no callback, or one before the record was
// placed) its key's.
func streamOf(pi int, st *recState) streamKey {
	part := st.part
	if part < 0 {
		part = int32(st.home)
	}
	return streamKey{pi, st.topic, part}
}

// checkCodes counts the failures whose broker error code was never
// answered to their partition: neither injected or scripted there
// (answered) nor one the embedded broker answers on its own
// (naturalCodes). Such a failure has a cause the faults cannot explain:
// the producer blamed a record for another partition's answer, or made a
// code up.
func checkCodes(books []*book, answered map[tp]map[int16]bool) (n int, problems []string) {
	natural := map[int16]bool{}
	for _, e := range naturalCodes {
		natural[e.Code] = true
	}
	for i, b := range books {
		b.mu.Lock()
		for at, k := range b.codes {
			if natural[at.code] || answered[at.p][at.code] {
				continue
			}
			n += k
			if len(problems) < 10 {
				problems = append(problems, fmt.Sprintf("producer %d: %d records of %s[%d] failed with %s, never answered to that partition",
					i, k, at.p.topic, at.p.part, kerr.ErrorForCode(at.code)))
			}
		}
		b.mu.Unlock()
	}
	return n, problems
}

// keyPartition is the partition of a keyed record among n, as the Java
// client (and longhaul's producer) picks it: toPositive(murmur2(key)) % n.
// The soak predicts it to follow each partition's callbacks as they come.
func keyPartition(key []byte, n int32) int32 {
	return int32(murmur2(key)&0x7fffffff) % n
}

// murmur2 is the 32-bit MurmurHash2 with Kafka's seed 0x9747b28c, the hash
// of Kafka's default partitioner (Utils.murmur2).
func murmur2(data []byte) uint32 {
	const m = 0x5bd1e995
	h := uint32(0x9747b28c) ^ uint32(len(data))
	for len(data) >= 4 {
		k := uint32(data[0]) | uint32(data[1])<<8 | uint32(data[2])<<16 | uint32(data[3])<<24
		k *= m
		k ^= k >> 24
		h = h*m ^ k*m
		data = data[4:]
	}
	switch len(data) {
	case 3:
		h ^= uint32(data[2]) << 16
		fallthrough
	case 2:
		h ^= uint32(data[1]) << 8
		fallthrough
	case 1:
		h ^= uint32(data[0])
		h *= m
	}
	h ^= h >> 13
	h *= m
	return h ^ h>>15
}
