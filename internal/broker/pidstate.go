package broker

import (
	"math"
	"time"
)

// batchMeta is what the broker retains of one appended idempotent batch,
// enough to recognise a retry of it and answer with its original offsets.
type batchMeta struct {
	firstSeq, lastSeq      int32
	baseOffset, lastOffset int64
	epoch                  int16
}

// producerState is the dedup state of one producer id on one partition:
// its current epoch and the metadata of its newest batches, oldest first.
// It is pure logic (no clock, no I/O); the partition owns it under the
// cluster mutex.
type producerState struct {
	epoch     int16
	batches   []batchMeta // oldest first; len <= the window at the last push
	lastWrite time.Time   // last append, for producer.id.expiration.ms
}

// verdict is the broker's answer to an idempotent batch.
type verdict uint8

const (
	verdictAppend       verdict = iota // append it
	verdictDuplicate                   // answer success with the original offsets
	verdictOutOfOrder                  // OUT_OF_ORDER_SEQUENCE_NUMBER
	verdictInvalidEpoch                // INVALID_PRODUCER_EPOCH
)

// nextSeq is the sequence after seq: sequences wrap from 2^31-1 to 0.
func nextSeq(seq int32) int32 {
	if seq == math.MaxInt32 {
		return 0
	}
	return seq + 1
}

// check decides what to do with a batch of the given epoch and sequence
// range, considering only the newest window retained batches (an old-mode
// node looks at 5 even when more are kept). A nil state accepts any
// sequence: the behaviour of brokers since 2.5 that SPEC.md calls the trap.
// The order follows Kafka (UnifiedLog.analyzeAndValidateProducerState, then
// ProducerAppendInfo): older epoch, then duplicate, then sequence.
func (s *producerState) check(epoch int16, firstSeq, lastSeq int32, window int) (verdict, batchMeta) {
	if s == nil {
		return verdictAppend, batchMeta{}
	}
	if epoch < s.epoch {
		return verdictInvalidEpoch, batchMeta{}
	}
	retained := s.batches
	if len(retained) > window {
		retained = retained[len(retained)-window:]
	}
	if epoch == s.epoch {
		for _, b := range retained {
			if b.epoch == epoch && b.firstSeq == firstSeq && b.lastSeq == lastSeq {
				return verdictDuplicate, b
			}
		}
	}
	if epoch > s.epoch {
		// A bumped epoch restarts the sequence.
		if firstSeq != 0 {
			return verdictOutOfOrder, batchMeta{}
		}
		return verdictAppend, batchMeta{}
	}
	if len(s.batches) == 0 {
		// State without batches (a window shrunk to nothing cannot
		// happen, but be lenient like a fresh producer).
		return verdictAppend, batchMeta{}
	}
	if firstSeq != nextSeq(s.batches[len(s.batches)-1].lastSeq) {
		return verdictOutOfOrder, batchMeta{}
	}
	return verdictAppend, batchMeta{}
}

// push records an appended batch, switching to its epoch (a new epoch
// forgets the old epoch's batches, as Kafka does) and keeping at most
// window batches.
func (s *producerState) push(m batchMeta, window int, now time.Time) {
	if m.epoch != s.epoch {
		s.epoch = m.epoch
		s.batches = s.batches[:0]
	}
	s.batches = append(s.batches, m)
	s.trim(window)
	s.lastWrite = now
}

// trim drops the oldest batches beyond window.
func (s *producerState) trim(window int) {
	if over := len(s.batches) - window; over > 0 {
		s.batches = append(s.batches[:0], s.batches[over:]...)
	}
}
