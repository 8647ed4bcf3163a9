package protocol

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
)

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
