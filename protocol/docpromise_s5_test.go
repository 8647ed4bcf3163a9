package protocol

// Tests for doc-comment promises of session 4's protocol additions that no
// other test checked (ParseResponse's shared window tags and their
// read-only caution, BatchesToRetainTags, ForEachRecord's aliasing,
// unchecked header, agreement with ParseRecordBatch on bad input and
// concurrency, ErrMalformedResponse for a Produce body on a Conn).

import (
	"bytes"
	"context"
	"encoding/binary"
	"hash/crc32"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// parseV14 encodes r (v14) as a broker would and decodes it with
// ParseResponse.
func parseV14(t *testing.T, r *kmsg.ProduceResponse) *kmsg.ProduceResponse {
	t.Helper()
	frame := AppendResponse(nil, 9, r)
	req := kmsg.NewPtrProduceRequest()
	req.Version = 14
	resp, err := ParseResponse(frame[4:], req, 9)
	require.NoError(t, err)
	return resp.(*kmsg.ProduceResponse)
}

// windowsResponse is a v14 response whose partitions carry windows 7, 7
// and 9 alone, then 7 next to another unknown tag (5).
func windowsResponse() *kmsg.ProduceResponse {
	r := kmsg.NewPtrProduceResponse()
	r.Version = 14
	tp := kmsg.NewProduceResponseTopic()
	tp.TopicID = [16]byte{4}
	for i, w := range []int32{7, 7, 9, 7} {
		p := kmsg.NewProduceResponseTopicPartition()
		p.Partition = int32(i)
		SetBatchesToRetain(&p, w)
		if i == 3 {
			p.UnknownTags.Set(5, []byte("other"))
		}
		tp.Partitions = append(tp.Partitions, p)
	}
	r.Topics = append(r.Topics, tp)
	return r
}

// TestParseResponseSharesTagsPerWindowValue: at v14, partitions whose only
// unknown tag is the window share one UnknownTags per window value, within
// a response and across responses; a partition with another unknown tag
// gets a map of its own and still reads its window and its other tag.
func TestParseResponseSharesTagsPerWindowValue(t *testing.T) {
	resetSharedWindows(t)
	ps := parseV14(t, windowsResponse()).Topics[0].Partitions
	require.Len(t, ps, 4)
	id7 := tagsID(&ps[0].UnknownTags)
	require.NotZero(t, id7)
	assert.Equal(t, id7, tagsID(&ps[1].UnknownTags), "same window, one map")
	assert.NotEqual(t, id7, tagsID(&ps[2].UnknownTags), "another window, another map")
	assert.NotEqual(t, id7, tagsID(&ps[3].UnknownTags), "another unknown tag: a map of its own")
	assert.Equal(t, 2, ps[3].UnknownTags.Len())
	for i, want := range []int32{7, 7, 9, 7} {
		n, present, err := BatchesToRetain(14, &ps[i])
		require.NoError(t, err)
		require.True(t, present)
		assert.Equal(t, want, n, "partition %d", i)
	}
	var other []byte
	ps[3].UnknownTags.Each(func(key uint32, val []byte) {
		if key == 5 {
			other = val
		}
	})
	assert.Equal(t, []byte("other"), other)

	again := parseV14(t, windowsResponse()).Topics[0].Partitions
	assert.Equal(t, id7, tagsID(&again[0].UnknownTags), "shared across responses")
	assert.Equal(t, tagsID(&ps[2].UnknownTags), tagsID(&again[2].UnknownTags))

	// Below v14 tag 1 is not the window: nothing is shared (kmsg's map).
	r13 := windowsResponse()
	r13.Version = 13
	frame := AppendResponse(nil, 3, r13)
	req := kmsg.NewPtrProduceRequest()
	req.Version = 13
	resp, err := ParseResponse(frame[4:], req, 3)
	require.NoError(t, err)
	p13 := resp.(*kmsg.ProduceResponse).Topics[0].Partitions
	assert.NotEqual(t, id7, tagsID(&p13[0].UnknownTags))
}

// TestParseResponseSharedTagsAreReadOnly is the caution of ParseResponse
// made concrete: a Set on one partition's shared UnknownTags changes every
// partition with that window, in this response and in responses decoded
// later, which is why they must be treated as read-only.
func TestParseResponseSharedTagsAreReadOnly(t *testing.T) {
	resetSharedWindows(t)
	ps := parseV14(t, windowsResponse()).Topics[0].Partitions
	require.Equal(t, 1, ps[1].UnknownTags.Len())
	ps[0].UnknownTags.Set(6, []byte("x"))
	assert.Equal(t, 2, ps[1].UnknownTags.Len(), "the other partition with window 7 changed too")
	assert.Equal(t, 1, ps[2].UnknownTags.Len(), "window 9 is another map")
	later := parseV14(t, windowsResponse()).Topics[0].Partitions
	assert.Equal(t, 2, later[0].UnknownTags.Len(), "a later response shares the changed map")
}

// TestBatchesToRetainTagsContents: the returned Tags hold tag 1 alone, the
// window as a big-endian int32; copies share one map, so a Set on a copy
// changes what the original reads (the reason none may be modified while
// another is in use).
func TestBatchesToRetainTagsContents(t *testing.T) {
	for _, n := range []int32{0, 1, 5, -3, 1 << 30} {
		tags := BatchesToRetainTags(n)
		require.Equal(t, 1, tags.Len())
		tags.Each(func(key uint32, val []byte) {
			assert.Equal(t, uint32(1), key)
			assert.Equal(t, kbin.AppendInt32(nil, n), val)
		})
	}
	orig := BatchesToRetainTags(3)
	cp := orig
	cp.Set(tagBatchesToRetain, kbin.AppendInt32(nil, 4))
	p := kmsg.NewProduceResponseTopicPartition()
	p.UnknownTags = orig
	n, present, err := BatchesToRetain(14, &p)
	require.NoError(t, err)
	require.True(t, present)
	assert.Equal(t, int32(4), n, "the copy's Set is seen through the original")
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

// TestConnMalformedProduceBodyKillsConn: a Produce response whose body our
// decoder rejects (kmsg's decoder is not used for Produce) is
// ErrMalformedResponse on a Conn and kills the connection, unlike a window
// tag of the wrong size (TestConnProduceWindowThroughConn).
func TestConnMalformedProduceBodyKillsConn(t *testing.T) {
	b := newFakeBroker(t)
	b.handle = func(h RequestHeader, req kmsg.Request, reply func(any)) {
		frame := AppendResponse(nil, h.CorrelationID, produceResponse(h.Version))
		frame = frame[:len(frame)-3]
		binary.BigEndian.PutUint32(frame, uint32(len(frame)-4))
		reply(frame)
	}
	c := dialT(t, b.listen(), DialConfig{})
	req := kmsg.NewPtrProduceRequest()
	req.Acks = -1
	_, err := c.Do(context.Background(), req)
	require.ErrorIs(t, err, ErrMalformedResponse)
	<-c.Done()
	require.ErrorIs(t, c.Err(), ErrMalformedResponse)
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

// TestNoOtherPackageTouchesTagNumbers: the package doc says no other
// package touches tag numbers: outside protocol/, no non-test Go file of
// the repository sets, reads or deletes unknown tags by number. The same
// pattern finds this package's own uses (the check is not vacuous).
func TestNoOtherPackageTouchesTagNumbers(t *testing.T) {
	pat := regexp.MustCompile(`UnknownTags\.(Set|Each|Delete)\(|Tags\.(Set|Each|Delete)\(`)
	ours := 0
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); name == ".git" || name == "testdata" || name == "node_modules" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		n := len(pat.FindAllIndex(src, -1))
		if filepath.Dir(path) == filepath.Join("..", "protocol") {
			ours += n
			return nil
		}
		assert.Zero(t, n, "%s touches tagged fields by number", path)
		return nil
	})
	require.NoError(t, err)
	require.Positive(t, ours, "the pattern finds protocol's own uses")
}

// TestDecodeProduceResponseCopiesStringsAliasesTags: decodeProduceResponse
// copies strings (topic names, error messages) and leaves unknown tag
// values aliasing src, as kmsg does: overwriting src after decoding
// changes the tag value and not the strings.
func TestDecodeProduceResponseCopiesStringsAliasesTags(t *testing.T) {
	r := kmsg.NewPtrProduceResponse()
	r.Version = 12
	tp := kmsg.NewProduceResponseTopic()
	tp.Topic = "orders"
	p := kmsg.NewProduceResponseTopicPartition()
	msg := "error message"
	p.ErrorMessage = &msg
	p.UnknownTags.Set(9, []byte("tag value"))
	tp.Partitions = append(tp.Partitions, p)
	r.Topics = append(r.Topics, tp)
	src := r.AppendTo(nil)
	got, err := decodeProduceResponse(src, 12)
	require.NoError(t, err)
	for i := range src {
		src[i] = 'X'
	}
	gp := got.Topics[0].Partitions[0]
	assert.Equal(t, "orders", got.Topics[0].Topic)
	require.NotNil(t, gp.ErrorMessage)
	assert.Equal(t, "error message", *gp.ErrorMessage)
	var tag []byte
	gp.UnknownTags.Each(func(key uint32, val []byte) {
		if key == 9 {
			tag = val
		}
	})
	assert.Equal(t, []byte("XXXXXXXXX"), tag, "the tag value aliases src")
}

// TestSetBatchesToRetainOnDecodedPartition: SetBatchesToRetain replaces the
// window of a partition ParseResponse decoded, whose tags are the shared,
// read-only map of its window value, without touching that map: the
// partition reads the new value, the other partition with the old window
// and a later response still read the old one.
func TestSetBatchesToRetainOnDecodedPartition(t *testing.T) {
	resetSharedWindows(t)
	ps := parseV14(t, windowsResponse()).Topics[0].Partitions
	old, _, err := BatchesToRetain(14, &ps[1])
	require.NoError(t, err)
	SetBatchesToRetain(&ps[0], 64)
	for i, want := range map[int]int32{0: 64, 1: old} {
		n, present, err := BatchesToRetain(14, &ps[i])
		require.NoError(t, err)
		require.True(t, present)
		assert.Equal(t, want, n, "partition %d", i)
	}
	later := parseV14(t, windowsResponse()).Topics[0].Partitions
	n, _, err := BatchesToRetain(14, &later[1])
	require.NoError(t, err)
	assert.Equal(t, old, n, "a later response's shared window is unchanged")
	later[1].UnknownTags.Each(func(_ uint32, val []byte) {
		assert.Equal(t, kbin.AppendInt32(nil, old), val, "the shared map's bytes are unchanged")
	})
}
