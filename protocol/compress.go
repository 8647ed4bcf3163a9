package protocol

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// appendWriter is an io.Writer appending to a slice, so streaming encoders
// write straight into the caller's batch buffer.
type appendWriter struct{ b []byte }

func (w *appendWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}

// sliceReader is an io.Reader and io.ByteReader over a slice. Decoders hold a
// pointer to the pooled sliceReader, not to the data, so pooling a decoder
// does not keep the caller's input alive once b is cleared. Being a
// ByteReader keeps gzip/flate from wrapping it in a bufio.Reader, and not
// having Len keeps zstd from its decode-everything-now fast path, which
// would bypass our output limit.
type sliceReader struct{ b []byte }

func (r *sliceReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.b)
	r.b = r.b[n:]
	return n, nil
}

func (r *sliceReader) ReadByte() (byte, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c, nil
}

// streamEncoder is the part of gzip.Writer and lz4.Writer that
// compressStream uses.
type streamEncoder interface {
	Reset(w io.Writer)
	Write(p []byte) (int, error)
	Close() error
}

// compressStream appends src compressed by w to dst through aw. On error dst
// keeps its original length.
func compressStream(dst []byte, w streamEncoder, aw *appendWriter, src []byte) ([]byte, error) {
	start := len(dst)
	aw.b = dst
	w.Reset(aw)
	_, err := w.Write(src)
	if err == nil {
		err = w.Close()
	}
	dst, aw.b = aw.b, nil
	if err != nil {
		return dst[:start], err
	}
	return dst, nil
}

type gzipEnc struct {
	w  *gzip.Writer
	aw appendWriter
}

type lz4Enc struct {
	w  *lz4.Writer
	aw appendWriter
}

type gzipDec struct {
	r   gzip.Reader
	src sliceReader
}

type lz4Dec struct {
	r   *lz4.Reader
	src sliceReader
}

type zstdDec struct {
	d   *zstd.Decoder
	src sliceReader
}

// zstdMaxWindow caps the window a zstd frame may ask for. Producers use far
// less (Java's default level uses a few MiB); a hostile frame cannot make us
// reserve more than this.
const zstdMaxWindow = 64 << 20

// Encoder pools, one per distinct setting of the codec library, indexed as
// gzipSlot, lz4Slot and zstdSlot map Kafka's levels.
var (
	gzipEncPools [11]sync.Pool // flate levels -1 (default) .. 9
	lz4EncPools  [10]sync.Pool // lz4.Fast, then Level1 .. Level9
	zstdEncPools [5]sync.Pool  // zstd.EncoderLevel 1 .. 4
)

func init() {
	for i := range gzipEncPools {
		level := i - 1
		gzipEncPools[i].New = func() any {
			e := new(gzipEnc)
			e.w, _ = gzip.NewWriterLevel(nil, level)
			return e
		}
	}
	for i := range lz4EncPools {
		level := lz4.Fast
		if i > 0 {
			level = lz4.Level1 << (i - 1)
		}
		// Kafka's Java producer writes LZ4 frames with 64 KiB blocks;
		// small blocks also keep the encoder's buffers small.
		lz4EncPools[i].New = func() any {
			e := new(lz4Enc)
			e.w = lz4.NewWriter(nil)
			_ = e.w.Apply(lz4.BlockSizeOption(lz4.Block64Kb), lz4.CompressionLevelOption(level))
			return e
		}
	}
	for i := range zstdEncPools {
		level := zstd.EncoderLevel(i)
		// One encoder per pooled item with concurrency 1: EncodeAll on a
		// shared encoder would serialise callers on its internal slots.
		zstdEncPools[i].New = func() any {
			e, _ := zstd.NewWriter(nil,
				zstd.WithEncoderConcurrency(1),
				zstd.WithZeroFrames(true),
				zstd.WithWindowSize(1<<20),
				zstd.WithEncoderLevel(level),
			)
			return e
		}
	}
}

// Compression levels, with the Java client's meaning and ranges
// (compression.gzip.level, compression.lz4.level, compression.zstd.level).
// Level 0 means the codec's default for every codec.
const (
	GzipLevelDefault = -1      // java.util.zip.Deflater.DEFAULT_COMPRESSION
	GzipLevelMin     = 1       // Deflater.BEST_SPEED
	GzipLevelMax     = 9       // Deflater.BEST_COMPRESSION
	Lz4LevelDefault  = 9       // Kafka's default: lz4's fast compressor
	Lz4LevelMin      = 1       // other levels use the high compressor
	Lz4LevelMax      = 17      // levels above 9 compress as 9 here (the library's highest)
	ZstdLevelDefault = 3       // ZSTD_CLEVEL_DEFAULT
	ZstdLevelMin     = -131072 // ZSTD_minCLevel
	ZstdLevelMax     = 22      // ZSTD_MAX_CLEVEL
)

// ErrCompressionLevel is returned for a level outside the codec's range.
var ErrCompressionLevel = errors.New("protocol: compression level out of range")

func gzipSlot(level int) (int, error) {
	switch {
	case level == 0 || level == GzipLevelDefault:
		return 0, nil
	case level >= GzipLevelMin && level <= GzipLevelMax:
		return level + 1, nil
	}
	return 0, fmt.Errorf("%w: gzip %d (want %d or %d..%d)", ErrCompressionLevel, level, GzipLevelDefault, GzipLevelMin, GzipLevelMax)
}

// lz4Slot maps Kafka's level to pierrec/lz4: the default, 9, is the fast
// compressor as in Kafka's Lz4BlockOutputStream; any other level uses the
// high compressor at that level, capped at the library's Level9.
func lz4Slot(level int) (int, error) {
	switch {
	case level == 0 || level == Lz4LevelDefault:
		return 0, nil
	case level >= Lz4LevelMin && level <= Lz4LevelMax:
		return min(level, 9), nil
	}
	return 0, fmt.Errorf("%w: lz4 %d (want %d..%d)", ErrCompressionLevel, level, Lz4LevelMin, Lz4LevelMax)
}

// zstdSlot maps a zstd level to klauspost/compress's four encoder levels
// (zstd.EncoderLevelFromZstd: below 3 fastest, 3-5 default, 6-9 better,
// 10 and up best).
func zstdSlot(level int) (int, error) {
	switch {
	case level == 0:
		return int(zstd.SpeedDefault), nil
	case level >= ZstdLevelMin && level <= ZstdLevelMax:
		return int(zstd.EncoderLevelFromZstd(level)), nil
	}
	return 0, fmt.Errorf("%w: zstd %d (want %d..%d)", ErrCompressionLevel, level, ZstdLevelMin, ZstdLevelMax)
}

// CheckCompressionLevel reports whether level is valid for codec c: its
// Java range, or 0 (the default). Codecs without levels accept only 0.
func CheckCompressionLevel(c Codec, level int) error {
	var err error
	switch c {
	case CodecGzip:
		_, err = gzipSlot(level)
	case CodecLz4:
		_, err = lz4Slot(level)
	case CodecZstd:
		_, err = zstdSlot(level)
	default:
		if level != 0 {
			err = fmt.Errorf("%w: codec %d has no levels", ErrCompressionLevel, int8(c))
		}
	}
	return err
}

var (
	gzipDecPool = sync.Pool{New: func() any { return new(gzipDec) }}
	lz4DecPool  = sync.Pool{New: func() any { return &lz4Dec{r: lz4.NewReader(nil)} }}
	zstdDecPool = sync.Pool{New: func() any {
		d, _ := zstd.NewReader(nil,
			zstd.WithDecoderConcurrency(1), // synchronous: no goroutines to leak
			zstd.WithDecoderLowmem(true),
			zstd.WithDecoderMaxWindow(zstdMaxWindow),
		)
		return &zstdDec{d: d}
	}}
)

// Compress appends src compressed with codec c to dst and returns the
// extended slice. CodecNone copies src. Snappy is written as one raw snappy
// block, which Kafka brokers accept alongside the xerial framing the Java
// producer writes; lz4 is the LZ4 frame format Kafka requires. Safe for
// concurrent use (encoders come from pools). On error dst is returned
// unchanged in length. It is CompressLevel with level 0.
func Compress(dst []byte, c Codec, src []byte) ([]byte, error) {
	return CompressLevel(dst, c, 0, src)
}

// CompressLevel is [Compress] at a compression level with the Java
// client's meaning (see [GzipLevelDefault] and the constants after it); 0
// is the codec's default. A level outside the codec's range is an error
// wrapping [ErrCompressionLevel] (see [CheckCompressionLevel]).
func CompressLevel(dst []byte, c Codec, level int, src []byte) ([]byte, error) {
	start := len(dst)
	if err := CheckCompressionLevel(c, level); err != nil {
		return dst, err
	}
	switch c {
	case CodecNone:
		return append(dst, src...), nil
	case CodecGzip:
		slot, _ := gzipSlot(level)
		e := gzipEncPools[slot].Get().(*gzipEnc)
		dst, err := compressStream(dst, e.w, &e.aw, src)
		gzipEncPools[slot].Put(e)
		if err != nil {
			return dst, fmt.Errorf("protocol: gzip: %w", err)
		}
		return dst, nil
	case CodecSnappy:
		n := s2.MaxEncodedLen(len(src))
		if n < 0 {
			return dst, fmt.Errorf("protocol: snappy: input of %d bytes too large", len(src))
		}
		dst = slices.Grow(dst, n)
		out := s2.EncodeSnappy(dst[start:start+n], src)
		return dst[:start+len(out)], nil
	case CodecLz4:
		slot, _ := lz4Slot(level)
		e := lz4EncPools[slot].Get().(*lz4Enc)
		dst, err := compressStream(dst, e.w, &e.aw, src)
		lz4EncPools[slot].Put(e)
		if err != nil {
			return dst, fmt.Errorf("protocol: lz4: %w", err)
		}
		return dst, nil
	case CodecZstd:
		slot, _ := zstdSlot(level)
		e := zstdEncPools[slot].Get().(*zstd.Encoder)
		dst = e.EncodeAll(src, dst)
		zstdEncPools[slot].Put(e)
		return dst, nil
	}
	return dst, fmt.Errorf("%w: %d", ErrUnknownCodec, int8(c))
}

// xerialMagic opens a snappy stream framed by the Java snappy-java library
// (SnappyOutputStream), which the Java producer writes.
var xerialMagic = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

// Decompress appends the decompression of src (codec c) to dst. It never
// produces more than limit bytes: larger output is an error wrapping
// [ErrDecompressedTooLarge], detected before the output is allocated where
// the format states its size (snappy) and after limit+1 bytes otherwise.
// limit <= 0 means [DefaultMaxFrameSize]. Snappy input may be raw or
// xerial-framed. Safe for concurrent use. On error dst is returned with its
// original length.
func Decompress(dst []byte, c Codec, src []byte, limit int) ([]byte, error) {
	if limit <= 0 {
		limit = DefaultMaxFrameSize
	}
	start := len(dst)
	var err error
	switch c {
	case CodecNone:
		if len(src) > limit {
			return dst, ErrDecompressedTooLarge
		}
		return append(dst, src...), nil
	case CodecGzip:
		d := gzipDecPool.Get().(*gzipDec)
		d.src.b = src
		if err = d.r.Reset(&d.src); err == nil {
			dst, err = readLimited(dst, &d.r, limit, len(src))
		}
		d.src.b = nil
		gzipDecPool.Put(d)
	case CodecSnappy:
		dst, err = unsnappy(dst, src, limit)
	case CodecLz4:
		d := lz4DecPool.Get().(*lz4Dec)
		d.src.b = src
		d.r.Reset(&d.src)
		dst, err = readLimited(dst, d.r, limit, len(src))
		d.src.b = nil
		lz4DecPool.Put(d)
	case CodecZstd:
		d := zstdDecPool.Get().(*zstdDec)
		d.src.b = src
		if err = d.d.Reset(&d.src); err == nil {
			dst, err = readLimited(dst, d.d, limit, len(src))
		}
		d.src.b = nil
		zstdDecPool.Put(d)
	default:
		return dst, fmt.Errorf("%w: %d", ErrUnknownCodec, int8(c))
	}
	if err != nil {
		return dst[:start], fmt.Errorf("protocol: %s: %w", c, err)
	}
	return dst, nil
}

// readLimited reads r to EOF, appending to dst, failing once more than limit
// bytes arrive. Growth starts near a few times the compressed size so a
// typical batch needs one or two reads, and is bounded by limit+1 so a
// hostile stream cannot make us allocate more than the caller allowed.
func readLimited(dst []byte, r io.Reader, limit, srcLen int) ([]byte, error) {
	start := len(dst)
	for {
		got := len(dst) - start
		if got > limit {
			return dst[:start], ErrDecompressedTooLarge
		}
		if len(dst) == cap(dst) {
			extra := max(got, 4*srcLen, 512)
			extra = min(extra, limit+1-got)
			dst = slices.Grow(dst, extra)
		}
		end := min(cap(dst), start+limit+1)
		n, err := r.Read(dst[len(dst):end])
		dst = dst[:len(dst)+n]
		if err == io.EOF {
			if len(dst)-start > limit {
				return dst[:start], ErrDecompressedTooLarge
			}
			return dst, nil
		}
		if err != nil {
			return dst[:start], err
		}
	}
}

func unsnappy(dst, src []byte, limit int) ([]byte, error) {
	if len(src) < 16 || !bytes.Equal(src[:8], xerialMagic) {
		return snappyBlock(dst, src, limit)
	}
	// xerial: 8 magic bytes, int32 version, int32 min compatible version,
	// then blocks of int32 big-endian length + raw snappy block.
	start := len(dst)
	rest := src[16:]
	for len(rest) > 0 {
		if len(rest) < 4 {
			return dst[:start], fmt.Errorf("xerial: truncated block length")
		}
		n := binary.BigEndian.Uint32(rest)
		rest = rest[4:]
		if uint64(n) > uint64(len(rest)) {
			return dst[:start], fmt.Errorf("xerial: block of %d bytes, %d left", n, len(rest))
		}
		var err error
		dst, err = snappyBlock(dst, rest[:n], limit-(len(dst)-start))
		if err != nil {
			return dst[:start], err
		}
		rest = rest[n:]
	}
	return dst, nil
}

func snappyBlock(dst, src []byte, limit int) ([]byte, error) {
	n, err := s2.DecodedLen(src)
	if err != nil {
		return dst, err
	}
	if n > limit {
		return dst, ErrDecompressedTooLarge
	}
	start := len(dst)
	dst = slices.Grow(dst, n)
	out, err := s2.Decode(dst[start:start+n], src)
	if err != nil {
		return dst[:start], err
	}
	return dst[:start+len(out)], nil
}
