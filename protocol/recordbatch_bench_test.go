package protocol

import (
	"bytes"
	"fmt"
	"hash/crc32"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Benchmarks compare our encoders with doing the same work with franz-go
// alone (kmsg.Record/RecordBatch/ProduceRequest, kgo's compressor, kmsg's
// RequestFormatter). Run:
//
//	go test -run '^$' -bench 'BuildRecordBatch|EncodeProduceRequest' -benchmem ./protocol

const (
	benchRecords    = 16 // 16 x 1 KiB: Kafka's default batch.size
	benchPartitions = 4
)

// benchValues are 1 KiB values of log-like text, so lz4 has something to do.
func benchValues() (keys, values [][]byte) {
	for i := range benchRecords {
		var v bytes.Buffer
		for v.Len() < 1024 {
			fmt.Fprintf(&v, "ts=%d level=info user=%d msg=\"order placed\" items=%d; ", 1700000000+i*7, i*31+v.Len(), v.Len()%17)
		}
		keys = append(keys, []byte(fmt.Sprintf("user-%08d", i)))
		values = append(values, v.Bytes()[:1024])
	}
	return keys, values
}

var benchHeaders = []Header{{Key: "trace", Value: []byte("abc123")}}

func buildOurs(b *BatchBuilder, dst []byte, keys, values [][]byte, c Codec, seq int32) []byte {
	b.Reset()
	for i := range keys {
		b.Append(1700000000000+int64(i), keys[i], values[i], benchHeaders)
	}
	out, err := b.Build(dst, BatchHeader{ProducerID: 1, ProducerEpoch: 0, BaseSequence: seq, Compression: c})
	if err != nil {
		panic(err)
	}
	return out
}

// kmsgState holds what a franz-go-only encoder would reuse between batches.
type kmsgState struct {
	rec     kmsg.Record
	tmp     []byte
	records []byte
	comp    kgo.Compressor
	buf     bytes.Buffer
}

func buildKmsg(s *kmsgState, dst []byte, keys, values [][]byte, c Codec, seq int32) []byte {
	s.records = s.records[:0]
	hdrs := []kmsg.Header{{Key: benchHeaders[0].Key, Value: benchHeaders[0].Value}}
	for i := range keys {
		s.rec = kmsg.Record{TimestampDelta64: int64(i), OffsetDelta: int32(i), Key: keys[i], Value: values[i], Headers: hdrs}
		// kmsg has no size helper: encode once with a one-byte length to
		// learn the body size, then for real.
		s.tmp = s.rec.AppendTo(s.tmp[:0])
		s.rec.Length = int32(len(s.tmp) - 1)
		s.records = s.rec.AppendTo(s.records)
	}
	body := s.records
	attrs := int16(0)
	if s.comp != nil {
		s.buf.Reset()
		out, codec := s.comp.Compress(&s.buf, s.records)
		body, attrs = out, int16(codec)
	}
	kb := kmsg.RecordBatch{
		PartitionLeaderEpoch: -1, Magic: 2, Attributes: attrs,
		LastOffsetDelta: int32(len(keys) - 1), FirstTimestamp: 1700000000000, MaxTimestamp: 1700000000000 + int64(len(keys)-1),
		ProducerID: 1, FirstSequence: seq, NumRecords: int32(len(keys)), Records: body,
	}
	start := len(dst)
	dst = kb.AppendTo(dst)
	kb.Length = int32(len(dst) - start - 12)
	kb.CRC = int32(crc32.Checksum(dst[start+21:], crc32c))
	return kb.AppendTo(dst[:start])
}

func newKmsgState(c Codec) *kmsgState {
	s := new(kmsgState)
	if c == CodecLz4 {
		s.comp, _ = kgo.DefaultCompressor(kgo.Lz4Compression())
	}
	return s
}

func BenchmarkBuildRecordBatch(b *testing.B) {
	keys, values := benchValues()
	var raw int64
	for i := range keys {
		raw += int64(len(keys[i]) + len(values[i]))
	}
	for _, c := range []Codec{CodecNone, CodecLz4} {
		b.Run(c.String()+"/longhaul", func(b *testing.B) {
			var bb BatchBuilder
			var dst []byte
			b.SetBytes(raw)
			b.ReportAllocs()
			for b.Loop() {
				dst = buildOurs(&bb, dst[:0], keys, values, c, 0)
			}
		})
		b.Run(c.String()+"/longhaul-inplace", func(b *testing.B) {
			var bb BatchBuilder
			b.SetBytes(raw)
			b.ReportAllocs()
			for b.Loop() {
				bb.Reset()
				for i := range keys {
					bb.Append(1700000000000+int64(i), keys[i], values[i], benchHeaders)
				}
				if _, err := bb.BuildInPlace(BatchHeader{ProducerID: 1, Compression: c}); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(c.String()+"/kmsg", func(b *testing.B) {
			s := newKmsgState(c)
			var dst []byte
			b.SetBytes(raw)
			b.ReportAllocs()
			for b.Loop() {
				dst = buildKmsg(s, dst[:0], keys, values, c, 0)
			}
		})
	}
}

// BenchmarkEncodeProduceRequest encodes a whole Produce v13/v14 request
// frame of 4 partitions x 16 records x 1 KiB, from records to wire bytes.
func BenchmarkEncodeProduceRequest(b *testing.B) {
	keys, values := benchValues()
	var raw int64
	for i := range keys {
		raw += int64(len(keys[i]) + len(values[i]))
	}
	raw *= benchPartitions
	id := "bench"
	mkReq := func(v int16, batches [][]byte) *kmsg.ProduceRequest {
		r := kmsg.NewPtrProduceRequest()
		r.Version = v
		r.Acks = -1
		r.TimeoutMillis = 30000
		tp := kmsg.NewProduceRequestTopic()
		tp.TopicID = [16]byte{1}
		for p, batch := range batches {
			pp := kmsg.NewProduceRequestTopicPartition()
			pp.Partition = int32(p)
			pp.Records = batch
			tp.Partitions = append(tp.Partitions, pp)
		}
		r.Topics = append(r.Topics, tp)
		return r
	}
	for _, c := range []Codec{CodecNone, CodecLz4} {
		b.Run(c.String()+"/longhaul", func(b *testing.B) {
			var bb BatchBuilder
			bufs := make([][]byte, benchPartitions)
			var frame []byte
			b.SetBytes(raw)
			b.ReportAllocs()
			for b.Loop() {
				for p := range bufs {
					bufs[p] = buildOurs(&bb, bufs[p][:0], keys, values, c, int32(p))
				}
				frame = AppendRequest(frame[:0], mkReq(14, bufs), 1, &id)
			}
		})
		b.Run(c.String()+"/kmsg", func(b *testing.B) {
			s := newKmsgState(c)
			f := kmsg.NewRequestFormatter(kmsg.FormatterClientID(id))
			bufs := make([][]byte, benchPartitions)
			var frame []byte
			b.SetBytes(raw)
			b.ReportAllocs()
			for b.Loop() {
				for p := range bufs {
					bufs[p] = buildKmsg(s, bufs[p][:0], keys, values, c, int32(p))
				}
				frame = f.AppendRequest(frame[:0], mkReq(13, bufs), 1)
			}
		})
	}
}

// TestBenchEncodersAgree keeps the benchmark honest: both sides produce
// the same bytes (uncompressed) and decodable batches (lz4).
func TestBenchEncodersAgree(t *testing.T) {
	keys, values := benchValues()
	var bb BatchBuilder
	ours := buildOurs(&bb, nil, keys, values, CodecNone, 5)
	theirs := buildKmsg(newKmsgState(CodecNone), nil, keys, values, CodecNone, 5)
	if !bytes.Equal(ours, theirs) {
		t.Fatal("uncompressed benchmark batches differ")
	}
	for _, raw := range [][]byte{
		buildOurs(&bb, nil, keys, values, CodecLz4, 5),
		buildKmsg(newKmsgState(CodecLz4), nil, keys, values, CodecLz4, 5),
	} {
		_, recs, err := ParseRecordBatch(raw, 0)
		if err != nil || len(recs) != benchRecords || !bytes.Equal(recs[3].Value, values[3]) {
			t.Fatalf("lz4 batch: %v", err)
		}
	}
}

// BenchmarkAppend is BatchBuilder.Append alone, the per-record encoding a
// producer does under its lock: records of a keyless 100-byte and 1 KiB
// value (the bench program's shape), a keyed one with a header, into a
// batch reset once it reaches 16 KiB. ns/op is per record.
//
//	go test -run '^$' -bench BenchmarkAppend -benchmem ./protocol
func BenchmarkAppend(b *testing.B) {
	cases := []struct {
		name    string
		key     []byte
		size    int
		headers []Header
	}{
		{"value=100B", nil, 100, nil},
		{"value=1KiB", nil, 1024, nil},
		{"key+header/value=100B", []byte("user-00000042"), 100, benchHeaders},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			value := make([]byte, c.size)
			var bb BatchBuilder
			bb.GrowCap(16384 + 2*c.size)
			b.SetBytes(int64(c.size))
			b.ReportAllocs()
			ts := int64(1700000000000)
			for i := range b.N {
				if bb.EncodedLen() >= 16384-c.size-64 {
					bb.Reset()
				}
				bb.Append(ts+int64(i>>10), c.key, value, c.headers)
			}
		})
	}
}
