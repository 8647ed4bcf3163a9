package protocol

import (
	"bytes"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestForEachRecordMatchesParse: the walk hands fn the records
// ParseRecordBatch returns, in order with their indexes, for every record
// set and codec.
func TestForEachRecordMatchesParse(t *testing.T) {
	for name, recs := range recordSets() {
		for _, c := range allCodecs {
			raw := buildTest(t, recs, BatchHeader{ProducerID: 1, ProducerEpoch: 2, BaseSequence: 3, Compression: c})
			SetBaseOffset(raw, 500)
			info, want, err := ParseRecordBatch(raw, 0)
			require.NoError(t, err, "%s/%v", name, c)
			var got []Record
			err = ForEachRecord(raw, info, 0, func(i int, rec Record) error {
				assert.Equal(t, len(got), i, "%s/%v: index", name, c)
				got = append(got, rec)
				return nil
			})
			require.NoError(t, err, "%s/%v", name, c)
			require.Equal(t, want, got, "%s/%v", name, c)
		}
	}
}

// TestForEachRecordStops: fn's error ends the walk and comes back as is.
func TestForEachRecordStops(t *testing.T) {
	raw := buildTest(t, recordSets()["many"], BatchHeader{})
	info, err := ParseBatchHeader(raw)
	require.NoError(t, err)
	stop := errors.New("stop")
	calls := 0
	err = ForEachRecord(raw, info, 0, func(i int, _ Record) error {
		calls++
		if i == 2 {
			return stop
		}
		return nil
	})
	require.Equal(t, stop, err)
	assert.NotErrorIs(t, err, ErrCorruptBatch)
	assert.Equal(t, 3, calls)
}

// TestForEachRecordCorrupt: a record that does not decode is an error
// wrapping ErrCorruptBatch, after fn saw the records before it; so are a
// header that claims more bytes than b holds and counts that cannot fit.
func TestForEachRecordCorrupt(t *testing.T) {
	var recs []testRec
	for i := range 4 {
		recs = append(recs, testRec{ts: int64(i), value: bytes.Repeat([]byte{'x'}, 50)})
	}
	raw := buildTest(t, recs, BatchHeader{})
	info, err := ParseBatchHeader(raw)
	require.NoError(t, err)

	// Cut the body inside the third record: the first two still decode.
	var ends []int
	r := reader{b: raw[RecordBatchOverhead:]}
	for range 3 {
		var rec Record
		require.NoError(t, r.record(&rec, &info))
		ends = append(ends, len(raw)-len(r.b))
	}
	short := bytes.Clone(raw[:ends[2]-1])
	cut := info
	cut.Length = int32(len(short) - lengthBase)
	calls := 0
	err = ForEachRecord(short, cut, 0, func(int, Record) error { calls++; return nil })
	require.ErrorIs(t, err, ErrCorruptBatch)
	assert.Equal(t, 2, calls)

	err = ForEachRecord(raw[:len(raw)-1], info, 0, func(int, Record) error { return nil })
	require.ErrorIs(t, err, ErrCorruptBatch, "header longer than b")

	huge := info
	huge.NumRecords = 1 << 30
	err = ForEachRecord(raw, huge, 0, func(int, Record) error { return nil })
	require.ErrorIs(t, err, ErrCorruptBatch, "count that cannot fit")
}

// TestForEachRecordAllocs: walking an uncompressed batch without headers
// allocates nothing (the broker validates every produced batch this way).
func TestForEachRecordAllocs(t *testing.T) {
	raw := buildTest(t, recordSets()["many"], BatchHeader{})
	info, err := ParseBatchHeader(raw)
	require.NoError(t, err)
	n := 0
	allocs := testing.AllocsPerRun(20, func() {
		_ = ForEachRecord(raw, info, 0, func(int, Record) error { n++; return nil })
	})
	assert.Zero(t, allocs)
	assert.Positive(t, n)
	// Negative control: ParseRecordBatch allocates the records.
	assert.NotZero(t, testing.AllocsPerRun(20, func() { _, _, _ = ParseRecordBatch(raw, 0) }))
}

// TestBatchesToRetainTagsShared: one Tags shared by several partition
// responses encodes the window in each at v14, is dropped below v14, and
// encoding leaves the shared value intact.
func TestBatchesToRetainTagsShared(t *testing.T) {
	tags := BatchesToRetainTags(42)
	for _, version := range []int16{14, 13} {
		resp := kmsg.NewPtrProduceResponse()
		resp.Version = version
		rt := kmsg.NewProduceResponseTopic()
		for p := range int32(3) {
			sp := kmsg.NewProduceResponseTopicPartition()
			sp.Partition = p
			sp.UnknownTags = tags
			rt.Partitions = append(rt.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, rt)
		frame := AppendResponse(nil, 7, resp)
		req := kmsg.NewPtrProduceRequest()
		req.Version = version
		got, err := ParseResponse(frame[4:], req, 7)
		require.NoError(t, err)
		for _, sp := range got.(*kmsg.ProduceResponse).Topics[0].Partitions {
			n, present, err := BatchesToRetain(version, &sp)
			require.NoError(t, err)
			assert.Equal(t, version >= 14, present, "v%d partition %d", version, sp.Partition)
			if version >= 14 {
				assert.EqualValues(t, 42, n)
			}
		}
	}
	var p kmsg.ProduceResponseTopicPartition
	p.UnknownTags = tags
	n, present, err := BatchesToRetain(14, &p)
	require.NoError(t, err)
	assert.True(t, present)
	assert.EqualValues(t, 42, n, "the shared tags are unchanged by encoding")
}
