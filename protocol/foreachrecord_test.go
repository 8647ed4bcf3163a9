package protocol

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math/rand/v2"
	"sync"
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

// TestForEachRecordAliases: for an uncompressed batch, fn's records' Key,
// Value and header values alias b (overwriting b after the walk changes
// them); header keys are strings and are copied. For a compressed batch
// they alias the decompression buffer, not b (overwriting b changes
// nothing).
func TestForEachRecordAliases(t *testing.T) {
	recs := recordSets()["headers"]
	for _, c := range []Codec{CodecNone, CodecLz4} {
		raw := buildTest(t, recs, BatchHeader{Compression: c})
		info, err := ParseBatchHeader(raw)
		require.NoError(t, err)
		var got []Record
		require.NoError(t, ForEachRecord(raw, info, 0, func(_ int, rec Record) error {
			got = append(got, rec)
			return nil
		}))
		_, want, err := ParseRecordBatch(bytes.Clone(raw), 0)
		require.NoError(t, err)
		for i := RecordBatchOverhead; i < len(raw); i++ {
			raw[i] = 0xEE
		}
		var aliased, nonEmpty int
		check := func(b []byte) {
			if len(b) == 0 {
				return
			}
			nonEmpty++
			if bytes.Equal(b, bytes.Repeat([]byte{0xEE}, len(b))) {
				aliased++
			}
		}
		for _, rec := range got {
			check(rec.Key)
			check(rec.Value)
			for _, h := range rec.Headers {
				check(h.Value)
			}
		}
		require.Positive(t, nonEmpty)
		if c == CodecNone {
			assert.Equal(t, nonEmpty, aliased, "every key, value and header value aliases b")
			assert.Equal(t, want[0].Headers[0].Key, got[0].Headers[0].Key, "header keys are copied")
		} else {
			assert.Zero(t, aliased, "%v: records alias the decompression buffer, not b", c)
			assert.Equal(t, want, got)
		}
	}
}

// TestForEachRecordTrustsInfo: the header and CRC are not checked again. A
// CRC spoiled after ParseBatchHeader succeeded is what ParseBatchHeader
// (and ParseRecordBatch) reject, and ForEachRecord, given the info from
// before, walks the records anyway.
func TestForEachRecordTrustsInfo(t *testing.T) {
	raw := buildTest(t, recordSets()["many"], BatchHeader{})
	info, err := ParseBatchHeader(raw)
	require.NoError(t, err)
	raw[offCRC] ^= 0xFF
	_, err = ParseBatchHeader(raw)
	require.ErrorIs(t, err, ErrCorruptBatch, "control: the CRC is now wrong")
	n := 0
	require.NoError(t, ForEachRecord(raw, info, 0, func(int, Record) error { n++; return nil }))
	assert.Equal(t, int(info.NumRecords), n)
}

// TestForEachRecordChecksAsParse: on batches with bytes of their body
// changed (the CRC recomputed, so only the records are wrong), ForEachRecord
// fails exactly when ParseRecordBatch does, with the same message, and
// every error wraps ErrCorruptBatch; both reject some of the inputs (the
// check is not vacuous).
func TestForEachRecordChecksAsParse(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	base := buildTest(t, recordSets()["headers"], BatchHeader{})
	rejected, accepted := 0, 0
	for range 3000 {
		raw := bytes.Clone(base)
		for range 1 + rng.IntN(3) {
			raw[RecordBatchOverhead+rng.IntN(len(raw)-RecordBatchOverhead)] = byte(rng.Uint32())
		}
		binary.BigEndian.PutUint32(raw[offCRC:], crc32.Checksum(raw[offAttributes:], crc32c))
		info, err := ParseBatchHeader(raw)
		require.NoError(t, err)
		_, _, perr := ParseRecordBatch(raw, 0)
		ferr := ForEachRecord(raw, info, 0, func(int, Record) error { return nil })
		if perr == nil {
			accepted++
			require.NoError(t, ferr)
			continue
		}
		rejected++
		require.Error(t, ferr)
		require.ErrorIs(t, ferr, ErrCorruptBatch)
		require.Equal(t, perr.Error(), ferr.Error())
	}
	assert.Positive(t, rejected)
	assert.Positive(t, accepted)
}

// TestForEachRecordConcurrent: walks of one batch from many goroutines at
// once (run under -race) each see what ParseRecordBatch returns.
func TestForEachRecordConcurrent(t *testing.T) {
	for _, c := range []Codec{CodecNone, CodecZstd} {
		raw := buildTest(t, recordSets()["many"], BatchHeader{Compression: c})
		info, want, err := ParseRecordBatch(raw, 0)
		require.NoError(t, err)
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				var got []Record
				err := ForEachRecord(raw, info, 0, func(_ int, rec Record) error {
					got = append(got, rec)
					return nil
				})
				assert.NoError(t, err)
				assert.Equal(t, want, got)
			})
		}
		wg.Wait()
	}
}

// TestForEachRecordHeadersAllocate: the walk allocates nothing itself for
// records without headers (TestForEachRecordAllocs), while a record with
// headers gets a Headers slice of its own and copied keys.
func TestForEachRecordHeadersAllocate(t *testing.T) {
	raw := buildTest(t, recordSets()["headers"], BatchHeader{})
	info, err := ParseBatchHeader(raw)
	require.NoError(t, err)
	allocs := testing.AllocsPerRun(20, func() {
		_ = ForEachRecord(raw, info, 0, func(int, Record) error { return nil })
	})
	// One record with three headers (keys "header key 1", "", "h3"): the
	// slice and the two non-empty keys; the second record has none.
	assert.Positive(t, allocs)
	assert.LessOrEqual(t, allocs, 3.0)
}
