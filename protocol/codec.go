package protocol

import (
	"fmt"
	"strings"
)

// Codec is a RecordBatch compression codec. Its value is the codec's number
// in the low three bits of a v2 batch's attributes.
type Codec int8

// The codecs Kafka defines. CodecZstd needs Produce v7+ on the broker.
const (
	CodecNone   Codec = 0
	CodecGzip   Codec = 1
	CodecSnappy Codec = 2
	CodecLz4    Codec = 3
	CodecZstd   Codec = 4
)

// ParseCodec parses a Kafka compression.type value: "none", "gzip",
// "snappy", "lz4" or "zstd" (case-insensitive, surrounding spaces ignored).
// Anything else is an error wrapping [ErrUnknownCodec].
func ParseCodec(s string) (Codec, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "none":
		return CodecNone, nil
	case "gzip":
		return CodecGzip, nil
	case "snappy":
		return CodecSnappy, nil
	case "lz4":
		return CodecLz4, nil
	case "zstd":
		return CodecZstd, nil
	}
	return CodecNone, fmt.Errorf("%w: %q (allowed: none, gzip, snappy, lz4, zstd)", ErrUnknownCodec, s)
}

// String returns the Kafka name of the codec ("none", "gzip", ...), or
// "codec(N)" for an unknown value.
func (c Codec) String() string {
	switch c {
	case CodecNone:
		return "none"
	case CodecGzip:
		return "gzip"
	case CodecSnappy:
		return "snappy"
	case CodecLz4:
		return "lz4"
	case CodecZstd:
		return "zstd"
	}
	return fmt.Sprintf("codec(%d)", int8(c))
}

// valid reports whether c is one of the five known codecs.
func (c Codec) valid() bool { return c >= CodecNone && c <= CodecZstd }
