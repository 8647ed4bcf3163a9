package protocol

import (
	"encoding/binary"
	"fmt"
	"io"
	"slices"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DefaultMaxFrameSize is the largest frame [ReadFrame] accepts by default:
// 100 MiB, Kafka's socket.request.max.bytes.
const DefaultMaxFrameSize = 100 << 20

// API keys with header special cases.
const (
	keyControlledShutdown = 7 // v0 request header has no client id
	keyApiVersions        = 18
)

// ReadFrame reads one size-prefixed frame from r and returns its body (the
// bytes after the int32 size) in buf, grown if needed; the result aliases
// buf when it was large enough. max <= 0 means [DefaultMaxFrameSize]. A
// negative size or one above max is an error wrapping [ErrFrameTooLarge]
// (nothing more is read, so the stream is unusable). EOF before the first
// byte returns io.EOF; EOF inside a frame returns io.ErrUnexpectedEOF.
func ReadFrame(r io.Reader, buf []byte, max int) ([]byte, error) {
	if max <= 0 {
		max = DefaultMaxFrameSize
	}
	buf = slices.Grow(buf[:0], 4)[:4]
	if _, err := io.ReadFull(r, buf); err != nil {
		return buf[:0], err
	}
	size := int32(binary.BigEndian.Uint32(buf))
	if size < 0 || int64(size) > int64(max) {
		return buf[:0], fmt.Errorf("%w: size %d, max %d", ErrFrameTooLarge, size, max)
	}
	buf = slices.Grow(buf[:0], int(size))[:size]
	if _, err := io.ReadFull(r, buf); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return buf[:0], err
	}
	return buf, nil
}

// AppendRequest appends a complete request frame to dst: the int32 size,
// the request header (v1, or v2 with an empty tag section when the request
// is flexible at its version; v0 for ControlledShutdown v0), and the body
// encoded at req.GetVersion(). clientID nil is encoded as a null string.
// Like kmsg's formatter the client id is never a compact string, so even a
// broker that does not yet know our ApiVersions version can read it.
// AppendTo has no side effects on req, so a frame may be built again for a
// retry.
func AppendRequest(dst []byte, req kmsg.Request, correlationID int32, clientID *string) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	key, version := req.Key(), req.GetVersion()
	dst = kbin.AppendInt16(dst, key)
	dst = kbin.AppendInt16(dst, version)
	dst = kbin.AppendInt32(dst, correlationID)
	if !(key == keyControlledShutdown && version == 0) {
		dst = kbin.AppendNullableString(dst, clientID)
		if req.IsFlexible() {
			dst = append(dst, 0) // no header tags
		}
	}
	dst = req.AppendTo(dst)
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return dst
}

// RequestHeader is a decoded request header.
type RequestHeader struct {
	Key           int16
	Version       int16
	CorrelationID int32
	ClientID      *string
}

// ParseRequest decodes a request frame body (without the size prefix, as
// returned by [ReadFrame]) into its header and the kmsg request decoded at
// the header's version. Produce is accepted up to [MaxProduceVersion], other
// keys up to kmsg's MaxVersion. An unknown key returns the header and an
// error wrapping [ErrUnknownAPIKey]; an unknown version returns the header
// and [ErrUnsupportedVersion], so a server can still answer (Kafka answers
// ApiVersions with UNSUPPORTED_VERSION at v0). A frame too short for a
// header returns an error wrapping [ErrMalformedRequest] and a zero header;
// a body kmsg rejects returns the header and ErrMalformedRequest. The
// decoded request may alias frame.
func ParseRequest(frame []byte) (RequestHeader, kmsg.Request, error) {
	var h RequestHeader
	r := kbin.Reader{Src: frame}
	h.Key = r.Int16()
	h.Version = r.Int16()
	h.CorrelationID = r.Int32()
	if !r.Ok() {
		return RequestHeader{}, nil, fmt.Errorf("%w: %d byte frame, too short for a header", ErrMalformedRequest, len(frame))
	}
	if !(h.Key == keyControlledShutdown && h.Version == 0) {
		h.ClientID = r.NullableString()
		if !r.Ok() {
			return h, nil, fmt.Errorf("%w: bad client id", ErrMalformedRequest)
		}
	}
	req := kmsg.RequestForKey(h.Key)
	if req == nil {
		return h, nil, fmt.Errorf("%w: %d", ErrUnknownAPIKey, h.Key)
	}
	if h.Version < 0 || h.Version > maxVersion(h.Key) {
		return h, nil, fmt.Errorf("%w: key %d version %d (max %d)", ErrUnsupportedVersion, h.Key, h.Version, maxVersion(h.Key))
	}
	req.SetVersion(h.Version)
	if req.IsFlexible() && !(h.Key == keyControlledShutdown && h.Version == 0) {
		if !skipTags(&r) {
			return h, nil, fmt.Errorf("%w: bad header tags", ErrMalformedRequest)
		}
	}
	if err := req.ReadFrom(r.Src); err != nil {
		return h, nil, fmt.Errorf("%w: key %d v%d: %w", ErrMalformedRequest, h.Key, h.Version, err)
	}
	return h, req, nil
}

// skipTags skips a tagged-field section, reporting false if it is truncated.
func skipTags(r *kbin.Reader) bool {
	for n := r.Uvarint(); n > 0 && r.Ok(); n-- {
		r.Uvarint() // tag
		size := r.Uvarint()
		if !r.Ok() || uint64(size) > uint64(len(r.Src)) {
			return false
		}
		r.Span(int(size))
	}
	return r.Ok()
}

// responseHeaderFlexible reports whether a response to key at a version
// where the request is flexible uses response header v1. ApiVersions
// answers with header v0 at every version, because a client must be able
// to read the answer before it knows which versions the broker speaks.
func responseHeaderFlexible(key int16, flexible bool) bool {
	return flexible && key != keyApiVersions
}

// AppendResponse appends a complete response frame to dst: the int32 size,
// the response header (the correlation id, plus an empty tag section when
// the response is flexible, except for ApiVersions which always uses header
// v0), and the body encoded at resp.GetVersion(). A ProduceResponse below
// v14 is encoded without ProducerStateBatchesToRetain even if
// [SetBatchesToRetain] put it in UnknownTags, since the field does not exist
// at those versions (resp itself is not modified).
func AppendResponse(dst []byte, correlationID int32, resp kmsg.Response) []byte {
	if pr, ok := resp.(*kmsg.ProduceResponse); ok && pr.Version < 14 {
		resp = withoutBatchesToRetain(pr)
	}
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst = kbin.AppendInt32(dst, correlationID)
	if responseHeaderFlexible(resp.Key(), resp.IsFlexible()) {
		dst = append(dst, 0)
	}
	dst = resp.AppendTo(dst)
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return dst
}

// ResponseCorrelationID returns the correlation id opening a response frame
// body, for matching it to its request before decoding.
func ResponseCorrelationID(frame []byte) (int32, error) {
	if len(frame) < 4 {
		return 0, fmt.Errorf("%w: %d byte frame, too short for a header", ErrMalformedResponse, len(frame))
	}
	return int32(binary.BigEndian.Uint32(frame)), nil
}

// ParseResponse decodes a response frame body (without the size prefix)
// answering req, which must carry the version it was sent at. It checks
// the correlation id, strips the header (flexible per req's key and
// version) and decodes the body into req.ResponseKind() at req's version.
// Errors wrap [ErrMalformedResponse]. The response may alias frame. A
// ProduceResponse v14 decodes as kmsg's v13 with the window among each
// partition's UnknownTags, where [BatchesToRetain] reads it; [Conn.Produce]
// decodes produce answers into a [ProduceResult] instead, without kmsg.
func ParseResponse(frame []byte, req kmsg.Request, correlationID int32) (kmsg.Response, error) {
	return parseResponseAt(frame, req.Key(), req.GetVersion(), correlationID)
}

// parseResponseAt decodes a response frame for a request of key at version.
func parseResponseAt(frame []byte, key, version int16, correlationID int32) (kmsg.Response, error) {
	id, err := ResponseCorrelationID(frame)
	if err != nil {
		return nil, err
	}
	if id != correlationID {
		return nil, fmt.Errorf("%w: correlation id %d, want %d", ErrMalformedResponse, id, correlationID)
	}
	r := kbin.Reader{Src: frame[4:]}
	resp := kmsg.ResponseForKey(key)
	if resp == nil {
		return nil, fmt.Errorf("%w: unknown api key %d", ErrMalformedResponse, key)
	}
	resp.SetVersion(version)
	if responseHeaderFlexible(key, resp.IsFlexible()) && !skipTags(&r) {
		return nil, fmt.Errorf("%w: bad header tags", ErrMalformedResponse)
	}
	if err := resp.ReadFrom(r.Src); err != nil {
		return nil, fmt.Errorf("%w: key %d v%d: %w", ErrMalformedResponse, key, version, err)
	}
	return resp, nil
}
