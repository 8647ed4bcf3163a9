package protocol

import (
	"bytes"
	"encoding/binary"
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

var (
	gzipEncPool = sync.Pool{New: func() any {
		e := new(gzipEnc)
		e.w, _ = gzip.NewWriterLevel(nil, gzip.DefaultCompression)
		return e
	}}
	// Kafka's Java producer writes LZ4 frames with 64 KiB blocks; small
	// blocks also keep the encoder's buffers small.
	lz4EncPool = sync.Pool{New: func() any {
		e := new(lz4Enc)
		e.w = lz4.NewWriter(nil)
		_ = e.w.Apply(lz4.BlockSizeOption(lz4.Block64Kb))
		return e
	}}
	// One encoder per pooled item with concurrency 1: EncodeAll on a shared
	// encoder would serialise callers on its internal slots.
	zstdEncPool = sync.Pool{New: func() any {
		e, _ := zstd.NewWriter(nil,
			zstd.WithEncoderConcurrency(1),
			zstd.WithZeroFrames(true),
			zstd.WithWindowSize(1<<20),
		)
		return e
	}}
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
// unchanged in length.
func Compress(dst []byte, c Codec, src []byte) ([]byte, error) {
	start := len(dst)
	switch c {
	case CodecNone:
		return append(dst, src...), nil
	case CodecGzip:
		e := gzipEncPool.Get().(*gzipEnc)
		dst, err := compressStream(dst, e.w, &e.aw, src)
		gzipEncPool.Put(e)
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
		e := lz4EncPool.Get().(*lz4Enc)
		dst, err := compressStream(dst, e.w, &e.aw, src)
		lz4EncPool.Put(e)
		if err != nil {
			return dst, fmt.Errorf("protocol: lz4: %w", err)
		}
		return dst, nil
	case CodecZstd:
		e := zstdEncPool.Get().(*zstd.Encoder)
		dst = e.EncodeAll(src, dst)
		zstdEncPool.Put(e)
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
