package protocol

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/klauspost/compress/s2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
)

func compressInputs() map[string][]byte {
	r := rand.New(rand.NewPCG(1, 2))
	random := make([]byte, 100_000)
	for i := range random {
		random[i] = byte(r.Uint32())
	}
	return map[string][]byte{
		"empty":      {},
		"small":      []byte("hello kafka"),
		"repetitive": bytes.Repeat([]byte("longhaul "), 50_000),
		"random":     random,
	}
}

// kgoCodec maps our codec to franz-go's compression options.
func kgoCodec(c Codec) kgo.CompressionCodec {
	switch c {
	case CodecGzip:
		return kgo.GzipCompression()
	case CodecSnappy:
		return kgo.SnappyCompression()
	case CodecLz4:
		return kgo.Lz4Compression()
	case CodecZstd:
		return kgo.ZstdCompression()
	}
	return kgo.NoCompression()
}

// TestCompressRoundTrip: ours -> ours, ours -> franz-go's decompressor (what
// kgo accepts from a broker), and franz-go's compressor -> ours.
func TestCompressRoundTrip(t *testing.T) {
	kd := kgo.DefaultDecompressor()
	for name, in := range compressInputs() {
		for _, c := range allCodecs {
			t.Run(name+"/"+c.String(), func(t *testing.T) {
				comp, err := Compress([]byte("x"), c, in)
				if err != nil {
					t.Fatal(err)
				}
				if comp[0] != 'x' {
					t.Fatal("prefix lost")
				}
				comp = comp[1:]
				out, err := Decompress([]byte("y"), c, comp, len(in)+1)
				if err != nil {
					t.Fatal(err)
				}
				if out[0] != 'y' || !bytes.Equal(out[1:], in) {
					t.Fatal("round trip mismatch")
				}
				if c == CodecNone {
					return
				}
				theirs, err := kd.Decompress(comp, kgo.CompressionCodecType(c))
				if err != nil || !bytes.Equal(theirs, in) {
					t.Fatalf("franz-go cannot decompress ours: %v", err)
				}
				kc, err := kgo.DefaultCompressor(kgoCodec(c))
				if err != nil {
					t.Fatal(err)
				}
				kcomp, codec := kc.Compress(new(bytes.Buffer), in)
				if kcomp == nil || Codec(codec) != c {
					t.Skip("franz-go declined to compress")
				}
				out, err = Decompress(nil, c, kcomp, len(in)+1)
				if err != nil || !bytes.Equal(out, in) {
					t.Fatalf("cannot decompress franz-go's: %v", err)
				}
				if len(in) > 0 {
					if _, err := Decompress(nil, c, comp, len(in)-1); !errors.Is(err, ErrDecompressedTooLarge) {
						t.Fatalf("limit %d not enforced: %v", len(in)-1, err)
					}
				}
			})
		}
	}
}

// TestSnappyXerial decodes the framing the Java producer writes: magic,
// version, compat, then big-endian length-prefixed raw snappy blocks.
func TestSnappyXerial(t *testing.T) {
	in := compressInputs()["repetitive"]
	framed := append([]byte{}, xerialMagic...)
	framed = binary.BigEndian.AppendUint32(framed, 1)
	framed = binary.BigEndian.AppendUint32(framed, 1)
	for rest := in; len(rest) > 0; {
		n := min(len(rest), 32<<10)
		blk := s2.EncodeSnappy(nil, rest[:n])
		framed = binary.BigEndian.AppendUint32(framed, uint32(len(blk)))
		framed = append(framed, blk...)
		rest = rest[n:]
	}
	out, err := Decompress(nil, CodecSnappy, framed, len(in))
	if err != nil || !bytes.Equal(out, in) {
		t.Fatalf("xerial: %v", err)
	}
	if _, err := Decompress(nil, CodecSnappy, framed, len(in)-1); !errors.Is(err, ErrDecompressedTooLarge) {
		t.Fatalf("xerial limit: %v", err)
	}
	if _, err := Decompress(nil, CodecSnappy, framed[:len(framed)-3], len(in)); err == nil {
		t.Fatal("truncated xerial accepted")
	}
}

func TestDecompressGarbage(t *testing.T) {
	garbage := []byte("definitely not compressed data, at least not validly")
	for _, c := range allCodecs[1:] {
		if _, err := Decompress(nil, c, garbage, 1<<20); err == nil {
			t.Errorf("%s accepted garbage", c)
		}
	}
	if _, err := Decompress(nil, Codec(6), garbage, 0); !errors.Is(err, ErrUnknownCodec) {
		t.Error("codec 6")
	}
}

// textLike is compressible but not trivially: words drawn at random from
// a small vocabulary, so stronger levels find more to gain.
func textLike(n int) []byte {
	r := rand.New(rand.NewPCG(5, 6))
	words := []string{"kafka", "producer", "window", "batch", "partition", "leader", "epoch",
		"sequence", "record", "offset", "broker", "acks", "linger", "retry", "idempotent"}
	var b bytes.Buffer
	for b.Len() < n {
		fmt.Fprintf(&b, "%s %d ", words[r.IntN(len(words))], r.IntN(1000))
	}
	return b.Bytes()[:n]
}

// Every level of Java's range round-trips, through our decompressor and
// franz-go's, and reaches the library: the strongest level compresses
// text-like data smaller than the fastest (if the level were ignored both
// would be the same size).
func TestCompressLevels(t *testing.T) {
	in := textLike(200_000)
	kd := kgo.DefaultDecompressor()
	cases := []struct {
		c                  Codec
		levels             []int
		fastest, strongest int
	}{
		{CodecGzip, []int{0, GzipLevelDefault, 1, 2, 3, 4, 5, 6, 7, 8, 9}, 1, 9},
		{CodecLz4, []int{0, 1, 4, 8, Lz4LevelDefault, 10, 12, 17}, Lz4LevelDefault, 17},
		{CodecZstd, []int{0, ZstdLevelMin, -5, 1, 2, ZstdLevelDefault, 6, 10, 19, ZstdLevelMax}, 1, 19},
	}
	for _, tc := range cases {
		size := map[int]int{}
		for _, level := range tc.levels {
			comp, err := CompressLevel(nil, tc.c, level, in)
			require.NoError(t, err, "%s level %d", tc.c, level)
			out, err := Decompress(nil, tc.c, comp, len(in))
			require.NoError(t, err, "%s level %d", tc.c, level)
			require.True(t, bytes.Equal(in, out), "%s level %d round trip", tc.c, level)
			theirs, err := kd.Decompress(comp, kgo.CompressionCodecType(tc.c))
			require.NoError(t, err, "%s level %d: franz-go", tc.c, level)
			require.True(t, bytes.Equal(in, theirs))
			size[level] = len(comp)
		}
		assert.Less(t, size[tc.strongest], size[tc.fastest], "%s: level %d vs %d: %v", tc.c, tc.strongest, tc.fastest, size)
		def, err := Compress(nil, tc.c, in)
		require.NoError(t, err)
		assert.Equal(t, size[0], len(def), "%s: Compress is level 0", tc.c)
	}
	// Java's defaults are the codecs' defaults.
	for _, d := range []struct {
		c     Codec
		level int
	}{{CodecGzip, GzipLevelDefault}, {CodecLz4, Lz4LevelDefault}, {CodecZstd, ZstdLevelDefault}} {
		a, _ := CompressLevel(nil, d.c, 0, in)
		b, _ := CompressLevel(nil, d.c, d.level, in)
		assert.Equal(t, a, b, "%s: 0 and %d", d.c, d.level)
	}
}

// Levels outside Java's ranges are refused before anything is written;
// codecs without levels take only 0.
func TestCompressLevelOutOfRange(t *testing.T) {
	bad := []struct {
		c     Codec
		level int
	}{
		{CodecGzip, -2}, {CodecGzip, 10},
		{CodecLz4, -1}, {CodecLz4, 18},
		{CodecZstd, ZstdLevelMin - 1}, {CodecZstd, 23},
		{CodecSnappy, 1}, {CodecNone, 3},
	}
	for _, b := range bad {
		out, err := CompressLevel([]byte("x"), b.c, b.level, []byte("data"))
		require.ErrorIs(t, err, ErrCompressionLevel, "%s %d", b.c, b.level)
		require.Equal(t, []byte("x"), out)
		require.ErrorIs(t, CheckCompressionLevel(b.c, b.level), ErrCompressionLevel)
	}
	var bb BatchBuilder
	bb.Append(0, nil, []byte("v"), nil)
	_, err := bb.Build(nil, BatchHeader{Compression: CodecGzip, CompressionLevel: 42})
	require.ErrorIs(t, err, ErrCompressionLevel)
}
