package protocol

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func sampleRequests() []kmsg.Request {
	av0 := kmsg.NewPtrApiVersionsRequest()
	av3 := kmsg.NewPtrApiVersionsRequest()
	av3.Version = 3
	av3.ClientSoftwareName = "longhaul"
	av3.ClientSoftwareVersion = "0.1"
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 12
	mt := kmsg.NewMetadataRequestTopic()
	name := "orders"
	mt.Topic = &name
	md.Topics = append(md.Topics, mt)
	md1 := kmsg.NewPtrMetadataRequest()
	md1.Version = 1
	cs := kmsg.NewPtrControlledShutdownRequest()
	cs.Version = 0
	ip := kmsg.NewPtrInitProducerIDRequest()
	ip.Version = 4
	pr := kmsg.NewPtrProduceRequest()
	pr.Version = 14
	pr.Acks = -1
	return []kmsg.Request{av0, av3, md, md1, cs, ip, pr}
}

// TestAppendRequestMatchesKmsgFormatter: our request framing is
// byte-identical to kmsg's RequestFormatter (v13 is the formatter's max for
// Produce, but it only looks at IsFlexible, so v14 is covered too).
func TestAppendRequestMatchesKmsgFormatter(t *testing.T) {
	id := "client-1"
	for _, clientID := range []*string{nil, &id} {
		var opts []kmsg.RequestFormatterOpt
		if clientID != nil {
			opts = append(opts, kmsg.FormatterClientID(*clientID))
		}
		f := kmsg.NewRequestFormatter(opts...)
		for _, req := range sampleRequests() {
			if req.Key() == 7 && req.GetVersion() == 0 {
				// kmsg's formatter returns early for ControlledShutdown
				// v0, without the body or the size; TestParseRequestRoundTrip
				// covers ours.
				continue
			}
			got := AppendRequest([]byte("pre"), req, 77, clientID)
			want := f.AppendRequest(nil, req, 77)
			if !bytes.Equal(got[3:], want) {
				t.Errorf("key %d v%d: got %x want %x", req.Key(), req.GetVersion(), got[3:], want)
			}
		}
	}
}

func TestParseRequestRoundTrip(t *testing.T) {
	id := "cid"
	for _, req := range sampleRequests() {
		frame := AppendRequest(nil, req, 123, &id)
		body, err := ReadFrame(bytes.NewReader(frame), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		h, got, err := ParseRequest(body)
		if err != nil {
			t.Fatalf("key %d v%d: %v", req.Key(), req.GetVersion(), err)
		}
		if h.Key != req.Key() || h.Version != req.GetVersion() || h.CorrelationID != 123 {
			t.Fatalf("header %+v", h)
		}
		wantID := h.Key != 7 || h.Version != 0
		if (h.ClientID != nil) != wantID || wantID && *h.ClientID != id {
			t.Fatalf("key %d: client id %v", h.Key, h.ClientID)
		}
		if !bytes.Equal(got.AppendTo(nil), req.AppendTo(nil)) {
			t.Fatalf("key %d v%d: body did not round trip", h.Key, h.Version)
		}
	}
}

func TestParseRequestErrors(t *testing.T) {
	frame := func(key, version int16) []byte {
		var b []byte
		b = binary.BigEndian.AppendUint16(b, uint16(key))
		b = binary.BigEndian.AppendUint16(b, uint16(version))
		b = binary.BigEndian.AppendUint32(b, 9)
		return append(b, 0xff, 0xff) // null client id
	}
	if h, _, err := ParseRequest(frame(18, 99)); !errors.Is(err, ErrUnsupportedVersion) || h.CorrelationID != 9 || h.Key != 18 {
		t.Errorf("ApiVersions v99: %v %+v", err, h)
	}
	if _, _, err := ParseRequest(frame(0, 15)); !errors.Is(err, ErrUnsupportedVersion) {
		t.Errorf("Produce v15: %v", err)
	}
	if _, _, err := ParseRequest(frame(0, -1)); !errors.Is(err, ErrUnsupportedVersion) {
		t.Errorf("Produce v-1: %v", err)
	}
	if h, _, err := ParseRequest(frame(30000, 0)); !errors.Is(err, ErrUnknownAPIKey) || h.CorrelationID != 9 {
		t.Errorf("key 30000: %v", err)
	}
	if _, _, err := ParseRequest([]byte{0, 0, 0}); !errors.Is(err, ErrMalformedRequest) {
		t.Errorf("short: %v", err)
	}
	if _, _, err := ParseRequest(append(frame(0, 9), 0x05)); !errors.Is(err, ErrMalformedRequest) {
		t.Errorf("truncated produce: %v", err)
	}
}

func TestResponseRoundTrip(t *testing.T) {
	for _, v := range []int16{0, 3, 4} {
		req := kmsg.NewPtrApiVersionsRequest()
		req.Version = v
		resp := req.ResponseKind().(*kmsg.ApiVersionsResponse)
		resp.ApiKeys = append(resp.ApiKeys, kmsg.ApiVersionsResponseApiKey{ApiKey: 0, MinVersion: 3, MaxVersion: 14})
		frame := AppendResponse(nil, 5, resp)
		// ApiVersions: header v0 at every version (no tag byte after the id).
		if int(binary.BigEndian.Uint32(frame)) != len(frame)-4 || !bytes.Equal(frame[8:], resp.AppendTo(nil)) {
			t.Fatalf("v%d: ApiVersions response header not v0", v)
		}
		got, err := ParseResponse(frame[4:], req, 5)
		if err != nil || got.(*kmsg.ApiVersionsResponse).ApiKeys[0].MaxVersion != 14 {
			t.Fatalf("v%d: %v", v, err)
		}
		if _, err := ParseResponse(frame[4:], req, 6); !errors.Is(err, ErrMalformedResponse) {
			t.Fatalf("wrong correlation id accepted: %v", err)
		}
	}
	// Flexible Metadata: header v1 carries a tag section.
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 12
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	resp.Brokers = append(resp.Brokers, kmsg.MetadataResponseBroker{NodeID: 1, Host: "h", Port: 9092})
	frame := AppendResponse(nil, 8, resp)
	if frame[8] != 0 || !bytes.Equal(frame[9:], resp.AppendTo(nil)) {
		t.Fatal("flexible response header missing tag byte")
	}
	got, err := ParseResponse(frame[4:], req, 8)
	if err != nil || got.(*kmsg.MetadataResponse).Brokers[0].Port != 9092 {
		t.Fatal(err)
	}
	if _, err := ParseResponse(frame[4:len(frame)-2], req, 8); !errors.Is(err, ErrMalformedResponse) {
		t.Fatalf("truncated: %v", err)
	}
}

func TestReadFrame(t *testing.T) {
	var stream []byte
	stream = binary.BigEndian.AppendUint32(stream, 3)
	stream = append(stream, 'a', 'b', 'c')
	stream = binary.BigEndian.AppendUint32(stream, 0)
	r := bytes.NewReader(stream)
	buf := make([]byte, 0, 64)
	got, err := ReadFrame(r, buf, 10)
	if err != nil || string(got) != "abc" || &got[0] != &buf[:1][0] {
		t.Fatalf("frame 1: %q %v (or buffer not reused)", got, err)
	}
	if got, err := ReadFrame(r, buf, 10); err != nil || len(got) != 0 {
		t.Fatalf("empty frame: %v", err)
	}
	if _, err := ReadFrame(r, buf, 10); err != io.EOF {
		t.Fatalf("clean EOF: %v", err)
	}
	big := binary.BigEndian.AppendUint32(nil, 11)
	if _, err := ReadFrame(bytes.NewReader(big), nil, 10); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("oversized: %v", err)
	}
	neg := binary.BigEndian.AppendUint32(nil, 0x80000000)
	if _, err := ReadFrame(bytes.NewReader(neg), nil, 10); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("negative: %v", err)
	}
	if _, err := ReadFrame(bytes.NewReader(stream[:5]), nil, 10); err != io.ErrUnexpectedEOF {
		t.Fatalf("short body: %v", err)
	}
	if _, err := ReadFrame(bytes.NewReader(stream[:2]), nil, 10); err != io.ErrUnexpectedEOF {
		t.Fatalf("short size: %v", err)
	}
}
