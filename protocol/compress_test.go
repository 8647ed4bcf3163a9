package protocol

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/klauspost/compress/s2"
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
