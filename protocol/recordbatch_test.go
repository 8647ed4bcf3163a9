package protocol

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

type testRec struct {
	ts         int64
	key, value []byte
	headers    []Header
}

// recordSets are the inputs of the differential tests: nulls vs empties,
// headers (null and empty values), timestamps going backwards, and values
// large enough for multi-byte varints.
func recordSets() map[string][]testRec {
	big := bytes.Repeat([]byte("0123456789abcdef"), 1024) // 16 KiB
	many := make([]testRec, 300)
	for i := range many {
		many[i] = testRec{ts: 1700000000000 + int64(i%7), key: []byte(fmt.Sprint("k", i)), value: bytes.Repeat([]byte{byte(i)}, i)}
	}
	return map[string][]testRec{
		"one":        {{ts: 20, key: []byte("key 1"), value: []byte("value 1")}},
		"null key":   {{ts: 0, key: nil, value: []byte("v")}},
		"null value": {{ts: 5, key: []byte("k"), value: nil}},
		"empty":      {{ts: 5, key: []byte{}, value: []byte{}}},
		"headers": {
			{ts: 20, key: []byte("key 1"), value: []byte("value 1"), headers: []Header{
				{Key: "header key 1", Value: []byte("header value 1")},
				{Key: "", Value: nil},
				{Key: "h3", Value: []byte{}},
			}},
			{ts: 24, key: []byte("key 2"), value: []byte("value 2")},
		},
		"ts backwards": {{ts: 1000}, {ts: 900}, {ts: 2000}, {ts: -5}},
		"big":          {{ts: 1, key: big[:300], value: big}, {ts: 2, value: big[:200]}},
		"many":         many,
	}
}

// kmsgBatch is the reference: the same records encoded by kmsg.Record and
// kmsg.RecordBatch, compressed with our Compress (compression output is not
// what is being compared; the framing around it is).
func kmsgBatch(t testing.TB, recs []testRec, h BatchHeader) []byte {
	t.Helper()
	var body []byte
	first := recs[0].ts
	maxTS := first
	for i, r := range recs {
		maxTS = max(maxTS, r.ts)
		kr := kmsg.Record{
			TimestampDelta64: r.ts - first,
			OffsetDelta:      int32(i),
			Key:              r.key,
			Value:            r.value,
		}
		for _, hd := range r.headers {
			kr.Headers = append(kr.Headers, kmsg.Header{Key: hd.Key, Value: hd.Value})
		}
		kr.Length = int32(len(kr.AppendTo(nil)) - 1) // placeholder length is one byte
		kr.Length = int32(len(kr.AppendTo(nil)) - kbin.VarintLen(kr.Length))
		body = kr.AppendTo(body)
	}
	comp, err := Compress(nil, h.Compression, body)
	if err != nil {
		t.Fatal(err)
	}
	attrs := int16(h.Compression)
	if h.Transactional {
		attrs |= 0x10
	}
	kb := kmsg.RecordBatch{
		FirstOffset:          0,
		PartitionLeaderEpoch: -1,
		Magic:                2,
		Attributes:           attrs,
		LastOffsetDelta:      int32(len(recs) - 1),
		FirstTimestamp:       first,
		MaxTimestamp:         maxTS,
		ProducerID:           h.ProducerID,
		ProducerEpoch:        h.ProducerEpoch,
		FirstSequence:        h.BaseSequence,
		NumRecords:           int32(len(recs)),
		Records:              comp,
	}
	raw := kb.AppendTo(nil)
	kb.Length = int32(len(raw) - 12)
	kb.CRC = int32(crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)))
	return kb.AppendTo(nil)
}

func buildTest(t testing.TB, recs []testRec, h BatchHeader) []byte {
	t.Helper()
	var b BatchBuilder
	for _, r := range recs {
		b.Append(r.ts, r.key, r.value, r.headers)
	}
	out, err := b.Build([]byte("prefix"), h)
	if err != nil {
		t.Fatal(err)
	}
	if string(out[:6]) != "prefix" {
		t.Fatal("Build clobbered dst")
	}
	return out[6:]
}

var allCodecs = []Codec{CodecNone, CodecGzip, CodecSnappy, CodecLz4, CodecZstd}

func TestBuildMatchesKmsg(t *testing.T) {
	headers := []BatchHeader{
		{ProducerID: 12, ProducerEpoch: 11, BaseSequence: 10, Transactional: true},
		{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1},
		{ProducerID: math.MaxInt64, ProducerEpoch: math.MaxInt16, BaseSequence: math.MaxInt32},
	}
	for name, recs := range recordSets() {
		for _, c := range allCodecs {
			for hi, h := range headers {
				h.Compression = c
				t.Run(fmt.Sprintf("%s/%s/h%d", name, c, hi), func(t *testing.T) {
					got := buildTest(t, recs, h)
					want := kmsgBatch(t, recs, h)
					if !bytes.Equal(got, want) {
						t.Fatalf("batch differs from kmsg\n got %x\nwant %x", got, want)
					}
				})
			}
		}
	}
}

// TestBuildDecodesWithKmsg decodes our batches with kmsg.RecordBatch and
// kmsg.Record (after decompressing with our Decompress) and checks every
// field against the input.
func TestBuildDecodesWithKmsg(t *testing.T) {
	for name, recs := range recordSets() {
		for _, c := range allCodecs {
			t.Run(name+"/"+c.String(), func(t *testing.T) {
				h := BatchHeader{ProducerID: 7, ProducerEpoch: 3, BaseSequence: 99, Compression: c}
				raw := buildTest(t, recs, h)
				var kb kmsg.RecordBatch
				if err := kb.ReadFrom(raw); err != nil {
					t.Fatal(err)
				}
				if int(kb.Length)+12 != len(raw) || kb.Magic != 2 || kb.NumRecords != int32(len(recs)) ||
					kb.ProducerID != 7 || kb.ProducerEpoch != 3 || kb.FirstSequence != 99 ||
					kb.LastOffsetDelta != int32(len(recs)-1) || Codec(kb.Attributes&7) != c {
					t.Fatalf("header mismatch: %+v", kb)
				}
				if crc := int32(crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli))); crc != kb.CRC {
					t.Fatalf("crc %x, want %x", kb.CRC, crc)
				}
				body, err := Decompress(nil, c, kb.Records, 0)
				if err != nil {
					t.Fatal(err)
				}
				for i, r := range recs {
					var kr kmsg.Record
					l, n := kbin.Varint(body)
					if n <= 0 {
						t.Fatalf("record %d: bad length", i)
					}
					if err := kr.ReadFrom(body[:n+int(l)]); err != nil {
						t.Fatalf("record %d: %v", i, err)
					}
					body = body[n+int(l):]
					if kb.FirstTimestamp+kr.TimestampDelta64 != r.ts || kr.OffsetDelta != int32(i) ||
						!sameBytes(kr.Key, r.key) || !sameBytes(kr.Value, r.value) || len(kr.Headers) != len(r.headers) {
						t.Fatalf("record %d mismatch: %+v", i, kr)
					}
					for j, hd := range r.headers {
						if kr.Headers[j].Key != hd.Key || !sameBytes(kr.Headers[j].Value, hd.Value) {
							t.Fatalf("record %d header %d mismatch", i, j)
						}
					}
				}
				if len(body) != 0 {
					t.Fatalf("%d trailing bytes", len(body))
				}
			})
		}
	}
}

// sameBytes is bytes.Equal that also distinguishes null from empty.
func sameBytes(a, b []byte) bool { return (a == nil) == (b == nil) && bytes.Equal(a, b) }

func TestParseRecordBatchRoundTrip(t *testing.T) {
	for name, recs := range recordSets() {
		for _, c := range allCodecs {
			t.Run(name+"/"+c.String(), func(t *testing.T) {
				raw := buildTest(t, recs, BatchHeader{ProducerID: 1, ProducerEpoch: 2, BaseSequence: 3, Compression: c})
				SetBaseOffset(raw, 1000)
				info, got, err := ParseRecordBatch(raw, 0)
				if err != nil {
					t.Fatal(err)
				}
				if info.BaseOffset != 1000 || info.Compression() != c || info.NumRecords != int32(len(recs)) || info.TotalLen() != len(raw) {
					t.Fatalf("info %+v", info)
				}
				for i, r := range recs {
					g := got[i]
					if g.Offset != 1000+int64(i) || g.Timestamp != r.ts || !sameBytes(g.Key, r.key) || !sameBytes(g.Value, r.value) || len(g.Headers) != len(r.headers) {
						t.Fatalf("record %d: %+v", i, g)
					}
					for j := range r.headers {
						if g.Headers[j].Key != r.headers[j].Key || !sameBytes(g.Headers[j].Value, r.headers[j].Value) {
							t.Fatalf("record %d header %d", i, j)
						}
					}
				}
			})
		}
	}
}

func TestRecordSizeMatchesEncoding(t *testing.T) {
	for name, recs := range recordSets() {
		var b BatchBuilder
		for i, r := range recs {
			before := b.EncodedLen()
			b.Append(r.ts, r.key, r.value, r.headers)
			want := RecordSize(r.ts-recs[0].ts, int32(i), r.key, r.value, r.headers)
			if got := b.EncodedLen() - before; got != want {
				t.Fatalf("%s record %d: appended %d bytes, RecordSize %d", name, i, got, want)
			}
		}
		out, _ := b.Build(nil, BatchHeader{})
		if len(out) != RecordBatchOverhead+b.EncodedLen() {
			t.Fatalf("%s: uncompressed batch %d bytes, want overhead+%d", name, len(out), b.EncodedLen())
		}
	}
}

func TestBuilderResetReuse(t *testing.T) {
	var b BatchBuilder
	if _, err := b.Build(nil, BatchHeader{}); !errors.Is(err, ErrEmptyBatch) {
		t.Fatalf("empty build: %v", err)
	}
	b.Append(1, []byte("a"), []byte("b"), nil)
	b.Reset()
	if b.NumRecords() != 0 || b.EncodedLen() != 0 {
		t.Fatal("reset did not clear")
	}
	recs := recordSets()["headers"]
	for _, r := range recs {
		b.Append(r.ts, r.key, r.value, r.headers)
	}
	got, err := b.Build(nil, BatchHeader{ProducerID: 12, ProducerEpoch: 11, BaseSequence: 10, Transactional: true})
	if err != nil {
		t.Fatal(err)
	}
	want := kmsgBatch(t, recs, BatchHeader{ProducerID: 12, ProducerEpoch: 11, BaseSequence: 10, Transactional: true})
	if !bytes.Equal(got, want) {
		t.Fatal("reused builder differs from kmsg")
	}
	if _, err := b.Build(nil, BatchHeader{Compression: 9}); !errors.Is(err, ErrUnknownCodec) {
		t.Fatalf("bad codec: %v", err)
	}
}

func TestBuilderAppendAllocFree(t *testing.T) {
	var b BatchBuilder
	key, val := []byte("key"), bytes.Repeat([]byte("v"), 1024)
	hs := []Header{{Key: "h", Value: []byte("x")}}
	for range 100 {
		b.Append(1, key, val, hs)
	}
	allocs := testing.AllocsPerRun(100, func() {
		b.Reset()
		for range 100 {
			b.Append(1, key, val, hs)
		}
	})
	if allocs != 0 {
		t.Fatalf("warm Append allocates %.1f times per 100 records", allocs)
	}
}

func TestSetBatchSequence(t *testing.T) {
	recs := recordSets()["headers"]
	for _, c := range allCodecs {
		raw := buildTest(t, recs, BatchHeader{ProducerID: 1, ProducerEpoch: 1, BaseSequence: 500, Compression: c})
		want := buildTest(t, recs, BatchHeader{ProducerID: 9, ProducerEpoch: 4, BaseSequence: 0, Compression: c})
		if err := SetBatchSequence(raw, 9, 4, 0); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(raw, want) {
			t.Fatalf("%s: renumbered batch differs from a fresh build", c)
		}
		if _, err := ParseBatchHeader(raw); err != nil {
			t.Fatal(err)
		}
	}
	raw := buildTest(t, recs, BatchHeader{})
	raw[offMagic] = 1
	if err := SetBatchSequence(raw, 1, 1, 1); !errors.Is(err, ErrCorruptBatch) {
		t.Fatalf("magic 1: %v", err)
	}
	if err := SetBatchSequence(raw[:40], 1, 1, 1); !errors.Is(err, ErrCorruptBatch) {
		t.Fatalf("short: %v", err)
	}
	raw[offMagic] = 2
	if err := SetBatchSequence(append(raw, 0), 1, 1, 1); !errors.Is(err, ErrCorruptBatch) {
		t.Fatalf("trailing byte: %v", err)
	}
}

// TestParseDetectsCorruption flips every byte of a batch (except baseOffset
// and partitionLeaderEpoch, which the CRC does not cover because brokers
// rewrite them) and expects an
// error each time. The negative control shows the check is what catches it:
// with the CRC recomputed after the flip, most flips parse fine.
func TestParseDetectsCorruption(t *testing.T) {
	raw := buildTest(t, recordSets()["headers"], BatchHeader{ProducerID: 5, Compression: CodecNone})
	undetected := 0
	for i := 8; i < len(raw); i++ {
		if i >= offLeaderEpoch && i < offMagic {
			continue
		}
		bad := bytes.Clone(raw)
		bad[i] ^= 0x40
		if _, _, err := ParseRecordBatch(bad, 0); !errors.Is(err, ErrCorruptBatch) {
			t.Errorf("flip at %d: err %v", i, err)
		}
		// Negative control: fix up the CRC and the flip in the records'
		// value bytes goes unnoticed.
		if i >= 21 {
			binaryPutCRC(bad)
			if _, _, err := ParseRecordBatch(bad, 0); err == nil {
				undetected++
			}
		}
	}
	if undetected == 0 {
		t.Fatal("negative control: recomputing the CRC should let some flips through")
	}
}

func binaryPutCRC(b []byte) {
	c := crc32.Checksum(b[offAttributes:], crc32c)
	b[offCRC], b[offCRC+1], b[offCRC+2], b[offCRC+3] = byte(c>>24), byte(c>>16), byte(c>>8), byte(c)
}

// TestParseBogusCounts checks hostile counts and lengths give errors, not
// panics or big allocations.
func TestParseBogusCounts(t *testing.T) {
	base := buildTest(t, recordSets()["one"], BatchHeader{})
	mut := func(f func(b []byte) []byte) []byte {
		b := f(bytes.Clone(base))
		binaryPutCRC(b)
		return b
	}
	cases := map[string][]byte{
		"huge count":     mut(func(b []byte) []byte { b[offNumRecords] = 0x7f; return b }),
		"negative count": mut(func(b []byte) []byte { b[offNumRecords] = 0xff; return b }),
		"extra count":    mut(func(b []byte) []byte { b[offNumRecords+3]++; return b }),
		"zero count":     mut(func(b []byte) []byte { b[offNumRecords+3] = 0; return b }),
		"huge record len": mut(func(b []byte) []byte {
			b[RecordBatchOverhead] = 0xfe // varint way beyond the body
			return b
		}),
		"bad codec": mut(func(b []byte) []byte { b[offAttributes+1] |= 7; return b }),
	}
	for name, b := range cases {
		allocs := testing.AllocsPerRun(1, func() {
			if _, _, err := ParseRecordBatch(b, 0); !errors.Is(err, ErrCorruptBatch) {
				t.Errorf("%s: err %v", name, err)
			}
		})
		if allocs > 20 {
			t.Errorf("%s: %v allocations", name, allocs)
		}
	}
}

func TestDecompressLimit(t *testing.T) {
	var b BatchBuilder
	b.Append(0, nil, bytes.Repeat([]byte("z"), 1<<20), nil)
	for _, c := range allCodecs[1:] {
		raw, err := b.Build(nil, BatchHeader{Compression: c})
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := ParseRecordBatch(raw, 1<<19); !errors.Is(err, ErrCorruptBatch) || !errors.Is(err, ErrDecompressedTooLarge) {
			t.Errorf("%s: limit not enforced: %v", c, err)
		}
		if _, _, err := ParseRecordBatch(raw, 2<<20); err != nil {
			t.Errorf("%s: within limit: %v", c, err)
		}
	}
}

func TestLastSequenceWraps(t *testing.T) {
	cases := []struct {
		base, delta, want int32
	}{
		{0, 0, 0},
		{10, 4, 14},
		{math.MaxInt32, 0, math.MaxInt32},
		{math.MaxInt32, 1, 0},
		{math.MaxInt32 - 2, 5, 2},
		{-1, 3, -1},
	}
	for _, c := range cases {
		if got := (BatchInfo{BaseSequence: c.base, LastOffsetDelta: c.delta}).LastSequence(); got != c.want {
			t.Errorf("LastSequence(%d+%d) = %d, want %d", c.base, c.delta, got, c.want)
		}
	}
}

func TestSplitBatches(t *testing.T) {
	a := buildTest(t, recordSets()["one"], BatchHeader{})
	b := buildTest(t, recordSets()["headers"], BatchHeader{Compression: CodecLz4})
	all := append(append([]byte{}, a...), b...)
	got, err := SplitBatches(all)
	if err != nil || len(got) != 2 || !bytes.Equal(got[0], a) || !bytes.Equal(got[1], b) {
		t.Fatalf("split: %v %d", err, len(got))
	}
	if cap(got[0]) != len(a) {
		t.Fatal("capacity not clipped")
	}
	if got, err := SplitBatches(nil); err != nil || len(got) != 0 {
		t.Fatal("empty input")
	}
	for _, bad := range [][]byte{all[:len(all)-1], all[:10], append(bytes.Clone(all), 1, 2, 3)} {
		if _, err := SplitBatches(bad); !errors.Is(err, ErrCorruptBatch) {
			t.Errorf("len %d: %v", len(bad), err)
		}
	}
}

func TestParseCodec(t *testing.T) {
	for _, c := range allCodecs {
		got, err := ParseCodec(strings.ToUpper(c.String()))
		if err != nil || got != c {
			t.Errorf("%s: %v %v", c, got, err)
		}
	}
	if _, err := ParseCodec("brotli"); !errors.Is(err, ErrUnknownCodec) {
		t.Error("brotli accepted")
	}
	if Codec(7).String() != "codec(7)" {
		t.Error(Codec(7).String())
	}
}

// TestBuildInPlaceMatchesKmsg: BuildInPlace gives kmsg's bytes for every
// record set, codec and header, on a fresh and on a reused builder, and
// leaves the builder as Build would (a Build afterwards is identical).
func TestBuildInPlaceMatchesKmsg(t *testing.T) {
	h := BatchHeader{ProducerID: 12, ProducerEpoch: 11, BaseSequence: 10, Transactional: true}
	var reused BatchBuilder
	for name, recs := range recordSets() {
		for _, c := range allCodecs {
			h.Compression = c
			t.Run(fmt.Sprintf("%s/%s", name, c), func(t *testing.T) {
				want := kmsgBatch(t, recs, h)
				var fresh BatchBuilder
				for _, b := range []*BatchBuilder{&fresh, &reused} {
					b.Reset()
					for _, r := range recs {
						b.Append(r.ts, r.key, r.value, r.headers)
					}
					got, err := b.BuildInPlace(h)
					if err != nil {
						t.Fatal(err)
					}
					if !bytes.Equal(got, want) {
						t.Fatalf("BuildInPlace differs from kmsg\n got %x\nwant %x", got, want)
					}
					if len(got) != RecordBatchOverhead+b.EncodedLen() && c == CodecNone {
						t.Fatalf("%d bytes, EncodedLen %d", len(got), b.EncodedLen())
					}
					again, err := b.Build(nil, h)
					if err != nil || !bytes.Equal(again, want) {
						t.Fatalf("Build after BuildInPlace: %v", err)
					}
				}
			})
		}
	}
}

// TestBuildInPlaceNoCopy: uncompressed, the batch is the builder's own
// buffer (no copy, no allocation once warm); Build's result never is.
func TestBuildInPlaceNoCopy(t *testing.T) {
	var b BatchBuilder
	val := bytes.Repeat([]byte("v"), 1024)
	for range 16 {
		b.Append(1, nil, val, nil)
	}
	got, err := b.BuildInPlace(BatchHeader{})
	if err != nil {
		t.Fatal(err)
	}
	if &got[RecordBatchOverhead] != &b.records()[0] {
		t.Fatal("uncompressed BuildInPlace copied the records")
	}
	built, _ := b.Build(nil, BatchHeader{})
	if &built[RecordBatchOverhead] == &b.records()[0] {
		t.Fatal("Build aliases the builder")
	}
	allocs := testing.AllocsPerRun(100, func() {
		b.Reset()
		for range 16 {
			b.Append(1, nil, val, nil)
		}
		if _, err := b.BuildInPlace(BatchHeader{}); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("warm uncompressed BuildInPlace allocates %.1f times", allocs)
	}
}

func TestBuildInPlaceErrors(t *testing.T) {
	var b BatchBuilder
	if out, err := b.BuildInPlace(BatchHeader{}); !errors.Is(err, ErrEmptyBatch) || out != nil {
		t.Fatalf("empty: %v %v", out, err)
	}
	b.Grow(100)
	if b.EncodedLen() != 0 || b.NumRecords() != 0 {
		t.Fatal("Grow added records")
	}
	b.Append(1, nil, []byte("x"), nil)
	if out, err := b.BuildInPlace(BatchHeader{Compression: 9}); !errors.Is(err, ErrUnknownCodec) || out != nil {
		t.Fatalf("bad codec: %v %v", out, err)
	}
}

// TestBuildInPlaceCompressIfSmaller: with CompressIfSmaller, records that do
// not shrink (random bytes) are sent uncompressed, as the uncompressed
// in-place batch; records that shrink are compressed exactly as without the
// flag. Build ignores the flag. Every result parses back to the records.
func TestBuildInPlaceCompressIfSmaller(t *testing.T) {
	random := make([]byte, 4096)
	_, _ = rand.NewChaCha8([32]byte{1}).Read(random)
	repetitive := bytes.Repeat([]byte("abcd"), 1024)
	for _, c := range allCodecs {
		if c == CodecNone {
			continue
		}
		t.Run(c.String(), func(t *testing.T) {
			var b BatchBuilder
			h := BatchHeader{ProducerID: 3, ProducerEpoch: 1, BaseSequence: 7, Compression: c, CompressIfSmaller: true}

			b.Append(100, []byte("k"), random, nil)
			got, err := b.BuildInPlace(h)
			require.NoError(t, err)
			info, recs, err := ParseRecordBatch(got, 0)
			require.NoError(t, err)
			assert.Equal(t, CodecNone, info.Compression(), "random bytes: compression did not help, so none")
			assert.Len(t, got, RecordBatchOverhead+b.EncodedLen())
			require.Len(t, recs, 1)
			assert.Equal(t, random, recs[0].Value)
			assert.Equal(t, int32(7), info.BaseSequence)
			noFlag := h
			noFlag.CompressIfSmaller = false
			uncompressed := noFlag
			uncompressed.Compression = CodecNone
			want, err := b.Build(nil, uncompressed)
			require.NoError(t, err)
			assert.Equal(t, want, got, "the uncompressed batch, byte for byte")
			forced, err := b.Build(nil, h)
			require.NoError(t, err)
			finfo, err := ParseBatchHeader(forced)
			require.NoError(t, err)
			assert.Equal(t, c, finfo.Compression(), "Build ignores CompressIfSmaller")
			assert.GreaterOrEqual(t, len(forced), len(got), "the negative case: compression really did not help")

			b.Reset()
			b.Append(100, nil, repetitive, nil)
			got, err = b.BuildInPlace(h)
			require.NoError(t, err)
			info, recs, err = ParseRecordBatch(got, 0)
			require.NoError(t, err)
			assert.Equal(t, c, info.Compression(), "repetitive bytes shrink: compressed")
			assert.Less(t, len(got), RecordBatchOverhead+b.EncodedLen())
			require.Len(t, recs, 1)
			assert.Equal(t, repetitive, recs[0].Value)
			want, err = b.Build(nil, noFlag)
			require.NoError(t, err)
			assert.Equal(t, want, got)
		})
	}
}

// TestRetain: keeping a subset re-encodes exactly the batch built from that
// subset alone (offset deltas, first timestamp, bytes), for every record
// set and every subset pattern; keeping none leaves an empty builder.
func TestRetain(t *testing.T) {
	patterns := map[string]func(i int) bool{
		"all":       func(int) bool { return true },
		"none":      func(int) bool { return false },
		"even":      func(i int) bool { return i%2 == 0 },
		"odd":       func(i int) bool { return i%2 == 1 },
		"not first": func(i int) bool { return i > 0 },
		"first":     func(i int) bool { return i == 0 },
	}
	for name, recs := range recordSets() {
		for pname, keep := range patterns {
			t.Run(name+"/"+pname, func(t *testing.T) {
				var b, want BatchBuilder
				for i, r := range recs {
					b.Append(r.ts, r.key, r.value, r.headers)
					if keep(i) {
						want.Append(r.ts, r.key, r.value, r.headers)
					}
				}
				n := b.Retain(keep)
				require.Equal(t, want.NumRecords(), n)
				require.Equal(t, want.NumRecords(), b.NumRecords())
				assert.Equal(t, want.FirstTimestamp(), b.FirstTimestamp())
				assert.Equal(t, want.records(), b.records())
				if n == 0 {
					return
				}
				h := BatchHeader{ProducerID: 1, ProducerEpoch: 2, BaseSequence: 3}
				got, err := b.BuildInPlace(h)
				require.NoError(t, err)
				exp, err := want.Build(nil, h)
				require.NoError(t, err)
				assert.Equal(t, exp, got)
			})
		}
	}
}

// TestGrowCapCapFree: GrowCap allocates what it is asked for (16 KiB is an
// allocator size class), keeps what was appended, and never shrinks; Cap
// and Free report the buffer's capacity and the room left for records.
func TestGrowCapCapFree(t *testing.T) {
	var b BatchBuilder
	require.Equal(t, 0, b.Cap())
	b.Append(1, []byte("k"), []byte("v"), nil)
	before := b.EncodedLen()
	b.GrowCap(16384)
	require.Equal(t, 16384, b.Cap(), "exactly the asked capacity, not append's growth")
	require.Equal(t, 16384-RecordBatchOverhead-before, b.Free())
	require.Equal(t, before, b.EncodedLen(), "appended records kept")
	b.GrowCap(100)
	require.Equal(t, 16384, b.Cap(), "never shrinks")
	out, err := b.BuildInPlace(BatchHeader{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1})
	require.NoError(t, err)
	_, recs, err := ParseRecordBatch(out, len(out))
	require.NoError(t, err)
	require.Len(t, recs, 1)
	require.Equal(t, []byte("v"), recs[0].Value)
}

// TestSpareIsWhereAppendWrites checks Spare's promise: the bytes it returns
// are the unused capacity the next Append writes, at most n of them, and
// none once the buffer is full.
func TestSpareIsWhereAppendWrites(t *testing.T) {
	var b BatchBuilder
	b.GrowCap(RecordBatchOverhead + 100)
	value := []byte("0123456789")
	for i := 0; i < 3; i++ {
		spare := b.Spare(40)
		require.Len(t, spare, 40)
		before := b.EncodedLen()
		b.Append(int64(i), nil, value, nil)
		recs := b.records()
		// The record just appended starts at the first spare byte.
		require.Same(t, &spare[0], &recs[before], "record %d", i)
		require.Equal(t, value, recs[b.EncodedLen()-len(value)-1:b.EncodedLen()-1], "record %d ends with its value (then the header count)", i)
	}
	// Fewer than n bytes left: Spare returns what there is.
	left := b.Cap() - RecordBatchOverhead - b.EncodedLen()
	require.Positive(t, left)
	require.Len(t, b.Spare(1000), left)
	require.Empty(t, b.Spare(-1))

	// A full buffer has no spare bytes.
	var full BatchBuilder
	full.GrowCap(RecordBatchOverhead + RecordSize(0, 0, nil, value, nil))
	full.Append(0, nil, value, nil)
	require.Nil(t, full.Spare(10))

	// A builder with no buffer has none either, and one without records
	// yet spares what comes after the header space.
	var empty BatchBuilder
	require.Nil(t, empty.Spare(10))
	empty.GrowCap(RecordBatchOverhead + 8)
	require.Len(t, empty.Spare(100), 8)
}
