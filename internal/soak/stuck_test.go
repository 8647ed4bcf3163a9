package soak

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/longhaul-kafka/longhaul/producer"
)

// okRecord is a record acknowledged on partition part.
func okRecord(part int32) *producer.Record {
	r := &producer.Record{}
	r.SetPartition(part)
	return r
}

// TestCallbackOrderNegativeControl: callbacks of one producer's partition
// in Produce order pass; a callback after a later record's of the same
// partition is counted, whether the record was acked or failed; callbacks
// of different partitions may interleave freely.
func TestCallbackOrderNegativeControl(t *testing.T) {
	topics := []string{"t"}
	b := &book{}
	s0 := b.add(0, 0, 0)
	s1 := b.add(0, 1, 0)
	s2 := b.add(0, 0, 0)
	s3 := b.add(0, 1, 0)
	b.done(s1, okRecord(1), nil, topics) // another partition first: fine
	b.done(s0, okRecord(0), nil, topics)
	b.done(s3, okRecord(1), nil, topics)
	b.done(s2, okRecord(0), nil, topics)
	c := checkRecords([]*book{b}, topics, nil)
	require.Zero(t, c.outOfOrder, c.problems)

	// Doctored: partition 0's later record called back first.
	b = &book{}
	s0, s1 = b.add(0, 0, 0), b.add(0, 0, 0)
	b.done(s1, okRecord(0), nil, topics)
	b.done(s0, okRecord(0), &producer.DeliveryError{Topic: "t", Err: producer.ErrDeliveryTimeout}, topics)
	c = checkRecords([]*book{b}, topics, nil)
	assert.Equal(t, 1, c.outOfOrder, c.problems)
	assert.Contains(t, c.problems[0], "called back after seq 1")

	res := Result{CallbacksOutOfOrder: 1}
	assert.False(t, res.OK())
	assert.Contains(t, res.String(), " callbacks_out_of_order=1 stuck=0 ")
}

// TestWrongPartitionCaught: a record the producer places elsewhere than
// its key's partition is a bad offset.
func TestWrongPartitionCaught(t *testing.T) {
	b := &book{}
	seq := b.add(0, 2, 0)
	b.done(seq, okRecord(1), nil, []string{"t"})
	c := checkRecords([]*book{b}, []string{"t"}, nil)
	assert.Equal(t, 1, c.badOffset, c.problems)
}

// TestMisplacedRecordCaught: a record found in another partition than
// the one its callback reported is a bad offset, and, acked, lost from its
// own partition; in its own partition it passes.
func TestMisplacedRecordCaught(t *testing.T) {
	b := &book{}
	seq := b.add(0, 1, 0)
	b.done(seq, okRecord(1), nil, []string{"t"})
	log := []logRecord{{Offset: 0, Value: encodeValue(0, seq, 30)}}
	c := checkRecords([]*book{b}, []string{"t"}, map[tp][]logRecord{{"t", 1}: log})
	require.Empty(t, c.problems)
	c = checkRecords([]*book{b}, []string{"t"}, map[tp][]logRecord{{"t", 0}: log})
	assert.Equal(t, 1, c.badOffset, c.problems)
	assert.Equal(t, 1, c.lost, c.problems)
}

// TestMurmur2 checks the soak's partition prediction against the values of
// Kafka's UtilsTest.testMurmur2; the soak itself checks it against the
// producer's placement of every record (TestWrongPartitionCaught).
func TestMurmur2(t *testing.T) {
	for in, want := range map[string]int32{
		"21": -973932308, "foobar": -790332482, "a-little-bit-long-string": -985981536,
		"a-little-bit-longer-string": -1486304829, "lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
		"abc": 479470107,
	} {
		assert.Equal(t, want, int32(murmur2([]byte(in))), in)
	}
	assert.Equal(t, int32((479470107&0x7fffffff)%3), keyPartition([]byte("abc"), 3))
}

// TestStuckNegativeControl: a partition with records outstanding and no
// callback is flagged once its silence exceeds the base allowance plus the
// cost of the faults that can hit it; a fault on another partition does not
// excuse it, a stall (every partition) or a bump-prone script anywhere
// does; a callback ends the episode.
func TestStuckNegativeControl(t *testing.T) {
	now := time.Now()
	topics := []string{"t"}
	newBook := func(silence time.Duration) *book {
		b := &book{}
		for range 3 {
			b.accepted(b.add(0, 1, 0), now.Add(-silence))
		}
		return b
	}
	sw := newStuckWatch(600*time.Millisecond, 0, nil, topics)
	base := sw.base
	require.Equal(t, retryBackoffMax+600*time.Millisecond+stuckSlack, base)

	// Within the base: fine.
	sw.books = []*book{newBook(base - 50*time.Millisecond)}
	sw.check(now)
	assert.Zero(t, sw.stuck)
	assert.Equal(t, 1, sw.samples)

	// Beyond it, with a fault on another partition only: stuck, once.
	b := newBook(base + 2*time.Second)
	sw = newStuckWatch(600*time.Millisecond, 0, []*book{b}, topics)
	sw.add(faultCost{at: now.Add(-time.Second), cost: 5 * time.Second, parts: []tp{{"t", 0}}, what: "drop on t[0]"})
	sw.check(now)
	sw.check(now.Add(time.Second))
	assert.Equal(t, 1, sw.stuck, "one episode")
	require.Len(t, sw.problems, 1)
	assert.Contains(t, sw.problems[0], "producer 0 t[1]: 3 records outstanding")
	// A callback ends the episode; the next silence is judged afresh.
	b.done(0, okRecord(1), nil, topics)
	sw.check(time.Now())
	assert.Equal(t, 1, sw.stuck)

	// A stall (every partition) long enough explains it.
	sw = newStuckWatch(600*time.Millisecond, 0, []*book{newBook(base + 2*time.Second)}, topics)
	sw.add(faultCost{at: now.Add(-time.Second), cost: 2500 * time.Millisecond, what: "stall"})
	sw.check(now)
	assert.Zero(t, sw.stuck, sw.problems)
	// A fault that ended before the silence began does not.
	sw = newStuckWatch(600*time.Millisecond, 0, []*book{newBook(base + 2*time.Second)}, topics)
	sw.add(faultCost{at: now.Add(-time.Hour), cost: time.Minute, what: "old stall"})
	sw.check(now)
	assert.Equal(t, 1, sw.stuck)

	// A bump-prone script on another partition makes every fault count.
	sw = newStuckWatch(600*time.Millisecond, 0, []*book{newBook(base + 2*time.Second)}, topics)
	sw.add(faultCost{at: now.Add(-time.Second), cost: 1500 * time.Millisecond, parts: []tp{{"t", 0}}, what: "drop on t[0]"})
	sw.add(faultCost{at: now.Add(-time.Second), cost: 700 * time.Millisecond, parts: []tp{{"t", 2}}, couples: true, what: "script INVALID_RECORD on t[2]"})
	sw.check(now)
	assert.Zero(t, sw.stuck, sw.problems)

	res := Result{Stuck: 1}
	assert.False(t, res.OK())
	assert.Contains(t, res.String(), " stuck=1 ")
}

// TestCodesNegativeControl: a record failing with a broker code is
// explained when the code was scripted for its partition or is one the
// embedded broker answers on its own; a code answered only to another
// partition is not.
func TestCodesNegativeControl(t *testing.T) {
	topics := []string{"t"}
	fail := func(part int32, code *kerr.Error) *book {
		b := &book{}
		seq := b.add(0, part, 0)
		b.done(seq, okRecord(part), &producer.DeliveryError{Topic: "t", Partition: part, Err: code}, topics)
		return b
	}
	answered := map[tp]map[int16]bool{{"t", 0}: {kerr.TopicAuthorizationFailed.Code: true}}
	n, _ := checkCodes([]*book{fail(0, kerr.TopicAuthorizationFailed)}, answered)
	assert.Zero(t, n, "scripted for t[0]")
	n, _ = checkCodes([]*book{fail(1, kerr.InvalidRecord)}, answered)
	assert.Zero(t, n, "the broker answers INVALID_RECORD itself")
	n, problems := checkCodes([]*book{fail(1, kerr.TopicAuthorizationFailed)}, answered)
	assert.Equal(t, 1, n)
	assert.Contains(t, problems[0], "t[1] failed with TOPIC_AUTHORIZATION_FAILED")
	b := fail(0, kerr.TopicAuthorizationFailed)
	assert.Equal(t, map[string]int{"TOPIC_AUTHORIZATION_FAILED": 1}, b.causes)
}
