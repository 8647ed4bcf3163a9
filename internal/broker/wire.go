package broker

// TEMPORARY SHIM: framing until protocol's ReadFrame, ParseRequest and
// AppendResponse are committed; then these three functions call them.

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// reqHeader is a decoded request header.
type reqHeader struct {
	key, version int16
	corr         int32
	clientID     string
}

// readFrame reads one size-prefixed frame of at most max bytes.
func readFrame(r *bufio.Reader, max int) ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		return nil, err
	}
	n := int32(binary.BigEndian.Uint32(size[:]))
	if n < 0 || int(n) > max {
		return nil, fmt.Errorf("%w: frame of %d bytes (max %d)", errConnClose, n, max)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, err
	}
	return b, nil
}

// parseRequest splits a request frame into its header and body.
func parseRequest(frame []byte) (reqHeader, []byte, error) {
	var h reqHeader
	rd := kbin.Reader{Src: frame}
	h.key = rd.Int16()
	h.version = rd.Int16()
	h.corr = rd.Int32()
	if cid := rd.NullableString(); cid != nil {
		h.clientID = *cid
	}
	if err := rd.Complete(); err != nil {
		return h, nil, fmt.Errorf("%w: truncated header", errConnClose)
	}
	req := kmsg.RequestForKey(h.key)
	if req == nil {
		return h, nil, fmt.Errorf("%w: unknown api key %d", errConnClose, h.key)
	}
	req.SetVersion(h.version)
	if req.IsFlexible() {
		kmsg.SkipTags(&rd)
		if err := rd.Complete(); err != nil {
			return h, nil, fmt.Errorf("%w: truncated header tags", errConnClose)
		}
	}
	return h, rd.Src, nil
}

// appendResponse appends a size-prefixed response frame to dst.
func appendResponse(dst []byte, corr int32, resp kmsg.Response) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst = binary.BigEndian.AppendUint32(dst, uint32(corr))
	if resp.IsFlexible() && resp.Key() != 18 {
		dst = append(dst, 0) // empty header tags; ApiVersions keeps header v0
	}
	dst = resp.AppendTo(dst)
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return dst
}

// setBatchesToRetain sets KIP-1269's ProducerStateBatchesToRetain (tag 1)
// on a v14 partition response.
func setBatchesToRetain(sp *kmsg.ProduceResponseTopicPartition, n int32) {
	sp.UnknownTags.Set(1, binary.BigEndian.AppendUint32(nil, uint32(n)))
}
