package broker

import (
	"encoding/binary"
	"hash/crc32"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// recrc recomputes a v2 batch's CRC after a test mutated it.
func recrc(b []byte) []byte {
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], castagnoli))
	return b
}

// TestHostileBatches sends malformed record data: each gets the Kafka
// error a real broker answers, nothing is appended, and the connection
// keeps working.
func TestHostileBatches(t *testing.T) {
	c := startCluster(t, Config{Topics: []TopicConfig{{Name: "t", Partitions: 1}}})
	w := dialWire(t, c.Addr())
	good := func() []byte { return batch(t, 3, 0, 0, 2) }
	cases := []struct {
		name string
		recs []byte
		code int16
	}{
		{"bad crc", func() []byte { b := good(); b[len(b)-1] ^= 0xff; return b }(), kerr.CorruptMessage.Code},
		{"record count too high", func() []byte { b := good(); binary.BigEndian.PutUint32(b[57:], 1000); return recrc(b) }(), kerr.CorruptMessage.Code},
		{"record count negative", func() []byte { b := good(); binary.BigEndian.PutUint32(b[57:], 0xffffffff); return recrc(b) }(), kerr.CorruptMessage.Code},
		{"last offset delta disagrees", func() []byte { b := good(); binary.BigEndian.PutUint32(b[23:], 5); return recrc(b) }(), kerr.CorruptMessage.Code},
		{"magic 1", func() []byte { b := good(); b[16] = 1; return b }(), kerr.CorruptMessage.Code},
		{"length beyond data", func() []byte { b := good(); binary.BigEndian.PutUint32(b[8:], 1<<20); return b }(), kerr.CorruptMessage.Code},
		{"truncated batch", good()[:40], kerr.CorruptMessage.Code},
		{"garbage", []byte("this is not a record batch at all, not even close to one"), kerr.CorruptMessage.Code},
		{"two batches", append(good(), batch(t, 3, 0, 2, 1)...), kerr.InvalidRecord.Code},
		{"no batch", []byte{}, kerr.InvalidRecord.Code},
		{"control batch", func() []byte { b := good(); b[22] |= 0x20; return recrc(b) }(), kerr.InvalidRecord.Code},
		{"unknown codec", func() []byte { b := good(); b[22] |= 0x07; return recrc(b) }(), kerr.CorruptMessage.Code},
		{"too large", bigBatch(t, make([]byte, DefaultMaxMessageBytes)), kerr.MessageTooLarge.Code},
	}
	for _, tc := range cases {
		sp := produceOne(t, c, w, 14, "t", 0, tc.recs)
		if sp.ErrorCode != tc.code {
			t.Errorf("%s: %v, want %v", tc.name, kerr.ErrorForCode(sp.ErrorCode), kerr.ErrorForCode(tc.code))
		}
	}
	if n := len(c.Records("t", 0)); n != 0 {
		t.Fatalf("%d records appended from hostile batches", n)
	}
	// Producer state was not touched: sequence 0 is still new.
	if sp := produceOne(t, c, w, 14, "t", 0, good()); sp.ErrorCode != 0 || sp.BaseOffset != 0 {
		t.Fatalf("good batch after the hostile ones: %v offset %d", kerr.ErrorForCode(sp.ErrorCode), sp.BaseOffset)
	}

	req := produceReq(c, 14, "t", 0, batch(t, 3, 0, 2, 1))
	req.Acks = 2
	if sp := partResp(t, w.do(req)); sp.ErrorCode != kerr.InvalidRequiredAcks.Code {
		t.Fatalf("acks=2: %v", kerr.ErrorForCode(sp.ErrorCode))
	}
	req.Acks = 0
	w.send(req)
	w.sent = w.sent[:0] // acks=0: no response
	if _, ok := w.do(metadataReq()).(*kmsg.MetadataResponse); !ok {
		t.Fatal("acks=0 produce was answered")
	}
	if n := len(c.Records("t", 0)); n != 3 {
		t.Fatalf("%d records, want 3 (acks=0 appends)", n)
	}
}

// TestHostileFrames sends frames that must close the connection, and
// checks the node still serves a new one.
func TestHostileFrames(t *testing.T) {
	c := startCluster(t, Config{Topics: []TopicConfig{{Name: "t", Partitions: 1}}})
	frame := func(body []byte) []byte {
		return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
	}
	header := func(key, version int16) []byte {
		b := binary.BigEndian.AppendUint16(nil, uint16(key))
		b = binary.BigEndian.AppendUint16(b, uint16(version))
		b = binary.BigEndian.AppendUint32(b, 7)
		return binary.BigEndian.AppendUint16(b, 0xffff) // null client id
	}
	cases := map[string][]byte{
		"truncated header":     frame([]byte{0, 3, 0}),
		"unknown key":          frame(header(999, 0)),
		"key we do not serve":  frame(append(header(21, 0), make([]byte, 20)...)),
		"metadata v99":         frame(header(3, 99)),
		"produce v2":           frame(header(0, 2)),
		"truncated body":       frame(append(header(3, 1), 0, 0, 0, 5)),
		"oversized frame":      binary.BigEndian.AppendUint32(nil, 1<<30),
		"negative size":        binary.BigEndian.AppendUint32(nil, 0x80000000),
		"huge array count":     frame(append(header(3, 1), 0x7f, 0xff, 0xff, 0xff)),
		"produce garbage body": frame(append(header(0, 9), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff)),
	}
	for name, b := range cases {
		t.Run(name, func(t *testing.T) {
			nc, err := net.Dial("tcp", c.Addr())
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			if _, err := nc.Write(b); err != nil {
				t.Fatal(err)
			}
			nc.SetReadDeadline(time.Now().Add(10 * time.Second))
			var one [1]byte
			if n, err := nc.Read(one[:]); err == nil {
				t.Fatalf("got %d bytes, want the connection closed", n)
			} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Fatal("connection left open")
			}
		})
	}
	// ApiVersions at an unknown version is answered at v0, not closed.
	nc, err := net.Dial("tcp", c.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.Write(frame(header(18, 99)))
	nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	var size [4]byte
	if _, err := nc.Read(size[:]); err != nil {
		t.Fatalf("ApiVersions v99: %v, want a v0 answer", err)
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := nc.Read(body); err != nil {
		t.Fatal(err)
	}
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 0
	if err := resp.ReadFrom(body[4:]); err != nil || resp.ErrorCode != kerr.UnsupportedVersion.Code || len(resp.ApiKeys) != 1 || resp.ApiKeys[0].ApiKey != 18 {
		t.Fatalf("ApiVersions v99 answer: err %v, %+v", err, resp)
	}
	// The node still works.
	if _, ok := dialWire(t, c.Addr()).do(metadataReq()).(*kmsg.MetadataResponse); !ok {
		t.Fatal("node broken after hostile frames")
	}
}
