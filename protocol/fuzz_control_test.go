package protocol

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// controlKeys are the non-Produce requests a producer sends, whose answers
// kmsg decodes behind parseResponseAt.
var controlKeys = []int16{3, 17, 18, 22, 36}

// controlResponseSeeds are a valid answer of each control key at a few
// versions: key index, version, then the frame after its size.
func controlResponseSeeds() [][]byte {
	var out [][]byte
	for i, key := range controlKeys {
		max := kmsg.ResponseForKey(key).MaxVersion()
		for _, v := range []int16{0, max / 2, max} {
			r := kmsg.ResponseForKey(key)
			r.SetVersion(v)
			switch r := r.(type) {
			case *kmsg.MetadataResponse:
				name := "t"
				tp := kmsg.NewMetadataResponseTopic()
				tp.Topic = &name
				tp.Partitions = []kmsg.MetadataResponseTopicPartition{{Partition: 0, Leader: 1, LeaderEpoch: 3}}
				r.Topics = append(r.Topics, tp)
				r.Brokers = []kmsg.MetadataResponseBroker{{NodeID: 1, Host: "h", Port: 9092}}
			case *kmsg.ApiVersionsResponse:
				r.ApiKeys = allKeys()
			case *kmsg.InitProducerIDResponse:
				r.ProducerID, r.ProducerEpoch = 1000, 2
			}
			out = append(out, append([]byte{byte(i), byte(v)}, AppendResponse(nil, 7, r)[4:]...))
		}
	}
	return out
}

// FuzzParseControlResponse decodes arbitrary frames as the answer to each
// control request a producer sends (Metadata, SaslHandshake, ApiVersions,
// InitProducerId, SaslAuthenticate) at any version kmsg knows: no panic, an
// error wraps ErrMalformedResponse, and an accepted answer re-encodes to a
// frame that decodes to the same body.
func FuzzParseControlResponse(f *testing.F) {
	for _, s := range controlResponseSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 2 {
			return
		}
		key := controlKeys[int(data[0])%len(controlKeys)]
		max := kmsg.ResponseForKey(key).MaxVersion()
		v := int16(data[1]) % (max + 1)
		frame := data[2:]
		resp, err := parseResponseAt(frame, key, v, 7)
		if err != nil {
			require.ErrorIs(t, err, ErrMalformedResponse)
			require.Nil(t, resp)
			return
		}
		require.Equal(t, key, resp.Key())
		require.Equal(t, v, resp.GetVersion())
		body := resp.AppendTo(nil)
		back, err := parseResponseAt(AppendResponse(nil, 7, resp)[4:], key, v, 7)
		require.NoError(t, err, "our re-encoding does not decode")
		require.True(t, bytes.Equal(body, back.AppendTo(nil)), "the answer changed across a round trip")
	})
}

// scriptConn is a net.Conn whose reads return a fixed byte stream and whose
// writes are discarded: the broker's side of a handshake, scripted.
type scriptConn struct {
	r io.Reader
}

func (c *scriptConn) Read(p []byte) (int, error)       { return c.r.Read(p) }
func (c *scriptConn) Write(p []byte) (int, error)      { return len(p), nil }
func (c *scriptConn) Close() error                     { return nil }
func (c *scriptConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (c *scriptConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (c *scriptConn) SetDeadline(time.Time) error      { return nil }
func (c *scriptConn) SetReadDeadline(time.Time) error  { return nil }
func (c *scriptConn) SetWriteDeadline(time.Time) error { return nil }

// FuzzNegotiate answers Dial's ApiVersions exchange with arbitrary bytes:
// two answer bodies (the first may be UNSUPPORTED_VERSION, asking for the
// fallback), each framed with the correlation id the request had. No
// panic; a successful negotiation uses for every key a version that both
// sides support (kmsg's maximum, ours for Produce, the cap given) and the
// broker's range allows; a failure is an error, never a half-filled Conn.
func FuzzNegotiate(f *testing.F) {
	good := kmsg.NewPtrApiVersionsResponse()
	good.Version = 3
	good.ApiKeys = allKeys()
	body := good.AppendTo(nil)
	old := kmsg.NewPtrApiVersionsResponse()
	old.ErrorCode = 35 // UNSUPPORTED_VERSION
	old.ApiKeys = []kmsg.ApiVersionsResponseApiKey{{ApiKey: 18, MinVersion: 0, MaxVersion: 2}}
	f.Add(uint16(len(body)), append(body, body...))
	f.Add(uint16(len(old.AppendTo(nil))), append(old.AppendTo(nil), body...))
	f.Fuzz(func(t *testing.T, split uint16, data []byte) {
		first := data[:min(int(split), len(data))]
		second := data[len(first):]
		var stream []byte
		for i, b := range [][]byte{first, second} {
			stream = binary.BigEndian.AppendUint32(stream, uint32(4+len(b)))
			stream = binary.BigEndian.AppendUint32(stream, uint32(i+1))
			stream = append(stream, b...)
		}
		nc := &scriptConn{r: bytes.NewReader(stream)}
		c := &Conn{addr: "fuzz", nc: nc, br: bufio.NewReader(nc), maxFrame: DefaultMaxFrameSize}
		caps := map[int16]int16{0: 11}
		err := c.negotiate(caps)
		if err != nil {
			if c.versions != nil {
				t.Fatalf("failed negotiation left versions: %v", err)
			}
			var ne net.Error
			if !errors.Is(err, ErrMalformedResponse) && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.As(err, &ne) {
				require.Contains(t, err.Error(), "api versions", "unexpected error: %v", err)
			}
			return
		}
		for k, v := range c.versions {
			require.GreaterOrEqual(t, v, int16(0), "key %d", k)
			require.LessOrEqual(t, v, maxVersion(k), "key %d", k)
			if cv, ok := caps[k]; ok {
				require.LessOrEqual(t, v, cv, "key %d", k)
			}
		}
	})
}
