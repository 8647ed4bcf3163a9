package protocol

import (
	"errors"
	"fmt"
)

// Sentinel errors. Every error returned by this package that matches one of
// these wraps it, so callers test with [errors.Is].
var (
	// ErrConnClosed is given to a request's completion when its connection
	// was closed by [Conn.Close] or broke (read or write failure, garbage
	// frame) while the request was queued or outstanding. Whether the broker
	// saw the request is told by [SafeToRetry].
	ErrConnClosed = errors.New("protocol: connection closed")

	// ErrRequestTimeout is given to a request's completion when its deadline
	// passed before the response arrived. The connection stays open; a late
	// response is discarded. The broker may have processed the request.
	ErrRequestTimeout = errors.New("protocol: request timed out")

	// ErrUnsupportedVersion means the broker does not support the request's
	// API key at all (from [Conn.Send]), or a request frame asks for a
	// version this package cannot decode (from [ParseRequest]).
	ErrUnsupportedVersion = errors.New("protocol: unsupported version")

	// ErrIdempotenceUnsupported is returned by [RequireIdempotentProduce]
	// when the broker cannot take Produce v3 or later (RecordBatch v2 with
	// producer id, epoch and sequence numbers), and by [InitProducerID]
	// when it has no InitProducerId: Kafka before 0.11.
	ErrIdempotenceUnsupported = errors.New("protocol: broker does not support idempotent produce (Produce v3+)")

	// ErrMalformedResponse means a response could not be decoded: a bad
	// header, a body that does not decode (kmsg's decoder, or ours for
	// Produce, which rejects what kmsg rejects), or a tagged field of the
	// wrong size ([BatchesToRetain]), or an answer that decodes but cannot
	// be true ([InitProducerID] without an identity). On a [Conn] it kills
	// the connection, except the last two, which only [BatchesToRetain]
	// and [InitProducerID] report.
	ErrMalformedResponse = errors.New("protocol: malformed response")

	// ErrMalformedRequest means a request frame could not be decoded by
	// [ParseRequest].
	ErrMalformedRequest = errors.New("protocol: malformed request")

	// ErrCorruptBatch means a RecordBatch failed a structural check: short,
	// wrong magic, bad length, CRC mismatch, bogus record counts or lengths,
	// or a body that does not decompress.
	ErrCorruptBatch = errors.New("protocol: corrupt record batch")

	// ErrFrameTooLarge means a frame's size prefix is negative or above the
	// allowed maximum ([DefaultMaxFrameSize] unless configured).
	ErrFrameTooLarge = errors.New("protocol: frame too large")

	// ErrUnknownAPIKey is returned by [ParseRequest] for an API key kmsg does
	// not know.
	ErrUnknownAPIKey = errors.New("protocol: unknown api key")

	// ErrEmptyBatch is returned by [BatchBuilder.Build] when no record was
	// appended: Kafka rejects empty batches.
	ErrEmptyBatch = errors.New("protocol: empty record batch")

	// ErrDecompressedTooLarge is returned by [Decompress] (and wrapped in
	// [ErrCorruptBatch] by [ParseRecordBatch]) when the decompressed data
	// would exceed the caller's limit.
	ErrDecompressedTooLarge = errors.New("protocol: decompressed data exceeds limit")

	// ErrUnknownCodec is returned for a compression codec outside
	// none/gzip/snappy/lz4/zstd.
	ErrUnknownCodec = errors.New("protocol: unknown compression codec")
)

// ConnError describes a failed request on a [Conn]: which broker, and whether
// the request had been (possibly partially) written to the socket. It wraps
// the cause ([ErrConnClosed], [ErrRequestTimeout], an I/O error, ...).
type ConnError struct {
	// Addr is the broker address the connection was dialed to.
	Addr string
	// Written is true once any byte of the request reached the socket, so
	// the broker may have seen and processed it.
	Written bool
	// Err is the cause.
	Err error
}

// Error implements error.
func (e *ConnError) Error() string {
	w := "not written"
	if e.Written {
		w = "written"
	}
	return fmt.Sprintf("protocol: broker %s (request %s): %v", e.Addr, w, e.Err)
}

// Unwrap returns the cause.
func (e *ConnError) Unwrap() error { return e.Err }

// SafeToRetry reports whether err certainly means the request never reached
// the broker (it was never written), so sending it again cannot duplicate
// it. Like pgconn.SafeToRetry it answers false when unsure, for example for
// [ErrRequestTimeout] or a connection that broke after the request was
// written.
func SafeToRetry(err error) bool {
	var ce *ConnError
	if errors.As(err, &ce) {
		return !ce.Written
	}
	// Errors raised before anything was queued (version missing) never
	// touched the wire.
	return errors.Is(err, ErrUnsupportedVersion)
}
