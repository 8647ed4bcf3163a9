package soak

import (
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/longhaul-kafka/longhaul/internal/broker"
	"github.com/longhaul-kafka/longhaul/producer"
)

// logRecord is one record read back from the cluster.
type logRecord = broker.LogRecord

// Record outcomes, as the callback reported them.
const (
	stPending       uint8 = iota // no callback yet
	stAcked                      // success
	stFailedUnknown              // DeliveryError with FateUnknown: in the log at most once
	stFailedKnown                // DeliveryError without FateUnknown: not in the log
	stFailedBad                  // an error that does not say why
)

// recState is what one producer knows of one of its records. Small on
// purpose: a long soak tracks millions.
type recState struct {
	offset int64
	part   int32
	size   int32 // bytes the producer accounts against buffer.memory
	topic  uint8
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
}

// add registers the next record and returns its sequence number.
func (b *book) add(topic uint8, size int32) uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.recs = append(b.recs, recState{topic: topic, size: size, part: -1, offset: -1})
	b.outstanding += int64(size)
	b.peak = max(b.peak, b.outstanding)
	return uint64(len(b.recs) - 1)
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
	if st.status == stFailedBad && len(b.errs) < 5 {
		b.errs = append(b.errs, fmt.Sprintf("seq %d: %v", seq, err))
	}
}

// classify sorts a failure: it must be a DeliveryError for the record's
// topic with a cause.
func classify(err error, topic string) uint8 {
	var de *producer.DeliveryError
	if !errors.As(err, &de) || de.Err == nil || de.Topic != topic {
		return stFailedBad
	}
	if de.FateUnknown {
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
	s := fmt.Sprint(de.Err)
	if len(s) > 80 {
		s = s[:80]
	}
	if de.FateUnknown {
		s += " (fate unknown)"
	}
	return s
}

// encodeValue writes a record value carrying its producer and sequence,
// padded to size bytes.
func encodeValue(producerIdx int, seq uint64, size int) []byte {
	v := make([]byte, 0, max(size, 24))
	v = strconv.AppendInt(v, int64(producerIdx), 10)
	v = append(v, '/')
	v = strconv.AppendUint(v, seq, 10)
	v = append(v, '/')
	for len(v) < size {
		v = append(v, 'x')
	}
	return v
}

// decodeValue is encodeValue's inverse.
func decodeValue(v []byte) (producerIdx int, seq uint64, ok bool) {
	var nums [2]uint64
	k, digits := 0, 0
	for _, c := range v {
		if c == '/' {
			if digits == 0 {
				return 0, 0, false
			}
			if k++; k == 2 {
				return int(nums[0]), nums[1], nums[0] < 1<<16
			}
			digits = 0
			continue
		}
		if c < '0' || c > '9' || digits > 18 {
			return 0, 0, false
		}
		nums[k] = nums[k]*10 + uint64(c-'0')
		digits++
	}
	return 0, 0, false
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
	unexplained        int // failures without a DeliveryError saying why

	problems []string
}

func (c *counts) problem(format string, args ...any) {
	if len(c.problems) < 20 {
		c.problems = append(c.problems, fmt.Sprintf(format, args...))
	}
}

// checkRecords checks the books against the partitions read back. It
// expects every producer closed (no callback still to come).
func checkRecords(books []*book, topics []string, logs map[tp][]logRecord) counts {
	var c counts
	seen := make([][]uint8, len(books))
	for i, b := range books {
		b.mu.Lock()
		seen[i] = make([]uint8, len(b.recs))
		for _, e := range b.errs {
			c.problem("producer %d: unexplained failure %s", i, e)
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
	for where, log := range logs {
		last := make([]int64, len(books))
		for i := range last {
			last[i] = -1
		}
		for _, lr := range log {
			pi, seq, ok := decodeValue(lr.Value)
			if !ok || pi >= len(books) || seq >= uint64(len(books[pi].recs)) {
				c.foreign++
				c.problem("%s[%d] offset %d: record not written by the soak", where.topic, where.part, lr.Offset)
				continue
			}
			st := &books[pi].recs[seq]
			if seen[pi][seq] < 255 {
				seen[pi][seq]++
			}
			if seen[pi][seq] > 1 {
				c.dup++
				c.problem("%s[%d] offset %d: producer %d seq %d is in the log again (status %d)", where.topic, where.part, lr.Offset, pi, seq, st.status)
				continue
			}
			if int64(seq) <= last[pi] {
				c.reorder++
				c.problem("%s[%d] offset %d: producer %d seq %d after seq %d", where.topic, where.part, lr.Offset, pi, seq, last[pi])
			}
			last[pi] = max(last[pi], int64(seq))
			if topicIdx[where.topic] != st.topic {
				c.badOffset++
				c.problem("%s[%d] offset %d: producer %d seq %d was produced to %s", where.topic, where.part, lr.Offset, pi, seq, topics[st.topic])
			}
			switch st.status {
			case stAcked:
				if st.part != where.part || st.offset >= 0 && st.offset != lr.Offset {
					c.badOffset++
					c.problem("producer %d seq %d: callback said [%d]@%d, log has %s[%d]@%d", pi, seq, st.part, st.offset, where.topic, where.part, lr.Offset)
				}
			case stFailedKnown:
				c.phantom++
				c.problem("%s[%d] offset %d: producer %d seq %d failed without FateUnknown but is in the log", where.topic, where.part, lr.Offset, pi, seq)
			}
		}
	}
	for pi, b := range books {
		for seq := range b.recs {
			st := &b.recs[seq]
			if st.calls != 1 {
				c.badCallbacks++
				c.problem("producer %d seq %d: callback ran %d times", pi, seq, st.calls)
			}
			switch st.status {
			case stPending:
				c.pending++
			case stAcked:
				c.acked++
				if seen[pi][seq] == 0 {
					c.lost++
					c.problem("producer %d seq %d: acknowledged at %s[%d]@%d but not in the log", pi, seq, topics[st.topic], st.part, st.offset)
				}
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
	return c
}
