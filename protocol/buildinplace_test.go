package protocol

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

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
