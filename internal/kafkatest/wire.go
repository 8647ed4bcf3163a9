package kafkatest

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// maxResponse bounds a response size so a confused peer cannot make a probe
// allocate without limit.
const maxResponse = 64 << 20

// Conn is a raw Kafka connection for probes. [Conn.Request] sends a request
// at exactly the version set on it, with no negotiation, and decodes the
// response at that version. It is not safe for concurrent use; one request
// is in flight at a time.
type Conn struct {
	c    net.Conn
	corr int32
	// ClientID is sent in every request header; default "kafkatest".
	ClientID string
}

// Dial opens a raw connection to a broker at addr.
func Dial(ctx context.Context, addr string) (*Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("kafkatest: dial %s: %w", addr, err)
	}
	return &Conn{c: c, ClientID: "kafkatest"}, nil
}

// Close closes the connection.
func (c *Conn) Close() error { return c.c.Close() }

// Request writes req at req.GetVersion() and returns the decoded response
// (a kmsg response of the matching type, at the same version). Versions
// above what kmsg knows are written with kmsg's highest layout, which is
// right when the request body did not change (Produce v14 = v13). ctx
// bounds the whole round trip. After an error the connection must be
// closed: its framing is unknown.
func (c *Conn) Request(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	body, err := c.RequestRaw(ctx, req)
	if err != nil {
		return nil, err
	}
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	if err := resp.ReadFrom(body); err != nil {
		return nil, fmt.Errorf("kafkatest: decode %s v%d response: %w", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	return resp, nil
}

// RequestRaw is [Conn.Request] returning the response body undecoded (after
// the response header), for checks kmsg cannot express.
func (c *Conn) RequestRaw(ctx context.Context, req kmsg.Request) ([]byte, error) {
	if dl, ok := ctx.Deadline(); ok {
		c.c.SetDeadline(dl)
	} else {
		c.c.SetDeadline(time.Time{})
	}
	stop := context.AfterFunc(ctx, func() { c.c.SetDeadline(time.Unix(1, 0)) })
	defer stop()

	c.corr++
	flexible := req.IsFlexible()
	buf := make([]byte, 4, 256)
	buf = kbin.AppendInt16(buf, req.Key())
	buf = kbin.AppendInt16(buf, req.GetVersion())
	buf = kbin.AppendInt32(buf, c.corr)
	buf = kbin.AppendNullableString(buf, &c.ClientID)
	if flexible {
		buf = append(buf, 0) // request header v2: empty tagged fields
	}
	buf = req.AppendTo(buf)
	binary.BigEndian.PutUint32(buf, uint32(len(buf)-4))
	if _, err := c.c.Write(buf); err != nil {
		return nil, fmt.Errorf("kafkatest: write %s: %w", kmsg.NameForKey(req.Key()), err)
	}

	var size [4]byte
	if _, err := io.ReadFull(c.c, size[:]); err != nil {
		return nil, fmt.Errorf("kafkatest: read %s response: %w", kmsg.NameForKey(req.Key()), err)
	}
	n := binary.BigEndian.Uint32(size[:])
	if n < 4 || n > maxResponse {
		return nil, fmt.Errorf("kafkatest: %s response size %d out of range", kmsg.NameForKey(req.Key()), n)
	}
	resp := make([]byte, n)
	if _, err := io.ReadFull(c.c, resp); err != nil {
		return nil, fmt.Errorf("kafkatest: read %s response: %w", kmsg.NameForKey(req.Key()), err)
	}
	r := kbin.Reader{Src: resp}
	if got := r.Int32(); got != c.corr {
		return nil, fmt.Errorf("kafkatest: correlation id %d, want %d", got, c.corr)
	}
	// ApiVersions always answers with response header v0 so that a client
	// that guessed a too-new version can still read it.
	if flexible && req.Key() != (&kmsg.ApiVersionsRequest{}).Key() {
		for range r.Uvarint() {
			r.Uvarint()
			r.Span(int(r.Uvarint()))
		}
	}
	if !r.Ok() {
		return nil, fmt.Errorf("kafkatest: short %s response header", kmsg.NameForKey(req.Key()))
	}
	return r.Src, nil
}

// APIVersions asks the broker at addr for its supported versions with
// ApiVersions v3 on a fresh connection.
func APIVersions(ctx context.Context, addr string) (*kmsg.ApiVersionsResponse, error) {
	c, err := Dial(ctx, addr)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	req.ClientSoftwareName = "longhaul-kafkatest"
	req.ClientSoftwareVersion = "0"
	resp, err := c.Request(ctx, req)
	if err != nil {
		return nil, err
	}
	av := resp.(*kmsg.ApiVersionsResponse)
	if av.ErrorCode != 0 {
		return av, &ResponseError{Op: "ApiVersions", Resource: addr, Err: kerr.ErrorForCode(av.ErrorCode)}
	}
	return av, nil
}

// VersionRange returns the min and max version of key that resp offers,
// and false if the key is absent.
func VersionRange(resp *kmsg.ApiVersionsResponse, key int16) (minV, maxV int16, ok bool) {
	for _, k := range resp.ApiKeys {
		if k.ApiKey == key {
			return k.MinVersion, k.MaxVersion, true
		}
	}
	return 0, 0, false
}

// InitProducerID gets a fresh idempotent (non-transactional) producer id
// and epoch from the broker at addr, retrying retriable errors such as
// COORDINATOR_LOAD_IN_PROGRESS (common right after startup) until ctx ends.
func InitProducerID(ctx context.Context, addr string) (id int64, epoch int16, err error) {
	for {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionTimeoutMillis = 60000
		var resp kmsg.Response
		resp, err = requestNode(ctx, addr, req)
		if err == nil {
			ip := resp.(*kmsg.InitProducerIDResponse)
			if err = kerr.ErrorForCode(ip.ErrorCode); err == nil {
				return ip.ProducerID, ip.ProducerEpoch, nil
			}
			if !kerr.IsRetriable(err) {
				return 0, 0, &ResponseError{Op: "InitProducerId", Resource: addr, Err: err}
			}
		}
		select {
		case <-ctx.Done():
			return 0, 0, fmt.Errorf("kafkatest: InitProducerId: %w (last %v)", ctx.Err(), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
