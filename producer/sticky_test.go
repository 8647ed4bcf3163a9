package producer

// Tests of the sticky partition for records without a key: it moves after
// batch.size bytes, not at linger or Flush seals, per topic, also through a
// Partitioner returning StickyPartition, and before a record that would
// start a batch alone.

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/longhaul-kafka/longhaul/internal/broker"
)

// stickyRuns produces 40 keyless records of 200 bytes one at a time, with
// batch.size 1024, each made to leave its batch by flush (after each
// Produce) and returns the partition of each, topic by topic, alternating
// between topics.
func stickyRuns(t *testing.T, topics []string, flush func(*Producer, *Record), opts ...Opt) map[string][]int32 {
	parts := map[string][]int32{}
	synctest.Test(t, func(t *testing.T) {
		var tcs []broker.TopicConfig
		for _, name := range topics {
			tcs = append(tcs, broker.TopicConfig{Name: name, Partitions: 6, Window: 10})
		}
		c, n := memCluster(t, broker.Config{Topics: tcs})
		p := memProducer(t, c, n, append([]Opt{BatchSize(1024)}, opts...)...)
		for i := range 40 * len(topics) {
			topic := topics[i%len(topics)]
			r := &Record{Topic: topic, Value: make([]byte, 200)}
			flush(p, r)
			parts[topic] = append(parts[topic], r.Partition())
		}
	})
	return parts
}

// produceOneSync produces a record and waits for it: its batch is sealed by
// linger.
func produceOneSync(t *testing.T) func(*Producer, *Record) {
	return func(p *Producer, r *Record) {
		require.NoError(t, p.ProduceSync(context.Background(), r).FirstErr())
	}
}

// runsOf counts the runs of equal partitions in parts.
func runsOf(parts []int32) int {
	runs := 1
	for i := 1; i < len(parts); i++ {
		if parts[i] != parts[i-1] {
			runs++
		}
	}
	return runs
}

// TestStickyPartitionIgnoresFlushSeals: a batch sealed by Flush does not
// move the sticky partition (partitioner.go: "A batch sealed by linger or
// Flush does not move it"): records flushed one by one with a linger of a
// minute stay until batch.size bytes have gone to their partition, as
// with linger seals (TestStickyPartitionIgnoresLingerSeals): 40 records
// of about 210 bytes with batch.size 1024 make 6 to 9 runs, not 40.
func TestStickyPartitionIgnoresFlushSeals(t *testing.T) {
	parts := stickyRuns(t, []string{"t"}, func(p *Producer, r *Record) {
		var done atomic.Bool
		p.Produce(context.Background(), r, func(_ *Record, err error) { assert.NoError(t, err); done.Store(true) })
		require.NoError(t, p.Flush(context.Background()))
		require.True(t, done.Load())
	}, Linger(time.Minute), DeliveryTimeout(2*time.Minute))["t"]
	require.GreaterOrEqual(t, runsOf(parts), 6, "moves on after batch.size bytes: %v", parts)
	require.LessOrEqual(t, runsOf(parts), 9, "a Flush seal moved the partition: %v", parts)
}

// TestStickyPartitionPerTopic: records without a key stick to one
// partition per topic: two topics produced to alternately each keep their
// own sticky partition and move after batch.size bytes went to it there
// (6 to 9 runs of 40 records each), not after the bytes of both topics.
func TestStickyPartitionPerTopic(t *testing.T) {
	for topic, parts := range stickyRuns(t, []string{"x", "y"}, produceOneSync(t)) {
		require.Len(t, parts, 40)
		require.GreaterOrEqual(t, runsOf(parts), 6, "%s: %v", topic, parts)
		require.LessOrEqual(t, runsOf(parts), 9, "%s: %v", topic, parts)
	}
}

// TestStickyPartitionThroughPartitioner: a Partitioner returning
// StickyPartition gets the partition records without a key share, which
// moves after batch.size bytes went to it, not at every linger seal: the
// same 6 to 9 runs as the built-in rule.
func TestStickyPartitionThroughPartitioner(t *testing.T) {
	calls := 0
	pt := PartitionerFunc(func(*Record, int32) (int32, error) { calls++; return StickyPartition, nil })
	parts := stickyRuns(t, []string{"t"}, produceOneSync(t), RecordPartitioner(pt))["t"]
	require.Equal(t, 40, calls, "the partitioner was asked for every record")
	require.GreaterOrEqual(t, runsOf(parts), 6, "%v", parts)
	require.LessOrEqual(t, runsOf(parts), 9, "%v", parts)
}

// TestStickyBurstsStayWhole: a record that would start a batch on a sticky
// partition batch.size bytes already went to moves the partition first, so
// it is not left alone in a batch on the old one (placed's doc). Bursts of
// three keyless 200-byte records, each burst's batch sealed by linger, with
// batch.size 1024: every burst lands on one partition, and the partition
// still moves. The negative control (stickyStartAlone) places the record
// and moves after it, and bursts split: the first record on the previous
// partition, alone in its batch.
func TestStickyBurstsStayWhole(t *testing.T) {
	for _, alone := range bugCases {
		synctest.Test(t, func(t *testing.T) {
			c, n := memCluster(t, broker.Config{Topics: []broker.TopicConfig{{Name: "t", Partitions: 6, Window: 10}}})
			p := memProducer(t, c, n, BatchSize(1024), Linger(5*time.Millisecond),
				bug(t, stickyStartAlone, alone))
			require.NoError(t, p.ProduceSync(context.Background(), &Record{Topic: "t", Key: []byte("k"), Value: []byte("metadata")}).FirstErr())
			var bursts [][]int32
			for range 8 {
				var parts []int32
				for range 3 {
					r := &Record{Topic: "t", Value: make([]byte, 200)}
					p.Produce(context.Background(), r, func(_ *Record, err error) { assert.NoError(t, err) })
					parts = append(parts, r.Partition())
				}
				bursts = append(bursts, parts)
				time.Sleep(50 * time.Millisecond) // past linger: the batch is sealed and sent
			}
			require.NoError(t, p.Flush(context.Background()))
			split, moves := 0, 0
			for i, b := range bursts {
				require.Equal(t, b[1], b[2], "bursts %v", bursts)
				if b[0] != b[1] {
					split++
					require.Positive(t, i)
					require.Equal(t, bursts[i-1][2], b[0], "the lone record stays on the previous partition: %v", bursts)
				}
				if i > 0 && b[2] != bursts[i-1][2] {
					moves++
				}
			}
			require.Positive(t, moves, "the sticky partition moves: %v", bursts)
			if alone {
				require.Positive(t, split, "negative control: a burst's first record left alone: %v", bursts)
			} else {
				require.Zero(t, split, "no burst split: %v", bursts)
			}
		})
	}
}
