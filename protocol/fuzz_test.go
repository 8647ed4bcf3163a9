package protocol

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Seed corpora live in testdata/fuzz/<Target>/ and are regenerated with
// LONGHAUL_WRITE_CORPUS=1 go test -run TestWriteFuzzCorpus ./protocol.

func produceResponseSeeds() [][]byte {
	var out [][]byte
	for v := int16(3); v <= MaxProduceVersion; v++ {
		r := produceResponse(v)
		if v >= 14 {
			SetBatchesToRetain(&r.Topics[0].Partitions[0], 64)
			r.Topics[0].Partitions[2].UnknownTags.Set(1, []byte{1, 2}) // malformed
		}
		out = append(out, append([]byte{byte(v)}, r.AppendTo(nil)...))
	}
	return out
}

func batchSeeds(t testing.TB) [][]byte {
	var out [][]byte
	for _, name := range []string{"one", "headers", "ts backwards"} {
		for _, c := range allCodecs {
			out = append(out, buildTest(t, recordSets()[name], BatchHeader{ProducerID: 3, BaseSequence: 7, Compression: c}))
		}
	}
	return out
}

func requestSeeds(t testing.TB) [][]byte {
	var out [][]byte
	id := "fuzz"
	for _, r := range sampleRequests() {
		out = append(out, AppendRequest(nil, r, 1, &id)[4:])
	}
	batch := buildTest(t, recordSets()["one"], BatchHeader{ProducerID: 1})
	for _, v := range []int16{3, 9, 13, 14} {
		r := kmsg.NewPtrProduceRequest()
		r.Version = v
		tp := kmsg.NewProduceRequestTopic()
		tp.Topic = "t"
		pp := kmsg.NewProduceRequestTopicPartition()
		pp.Records = batch
		tp.Partitions = append(tp.Partitions, pp)
		r.Topics = append(r.Topics, tp)
		out = append(out, AppendRequest(nil, r, 2, nil)[4:])
		// Large enough to be written by reference (wireFrame).
		pp.Records = bytes.Repeat(batch, minRefRecords/len(batch)+1)
		r.Topics[0].Partitions = append(r.Topics[0].Partitions, pp)
		out = append(out, AppendRequest(nil, r, 3, &id)[4:])
	}
	return out
}

// FuzzProduceResponse decodes arbitrary bytes as a ProduceResponse at
// v3..v14 (first byte picks the version) and checks BatchesToRetain: never
// a panic, never a value below v14, a present value equal to the tag's
// 4 bytes, and the same answer after our encode/decode round trip.
func FuzzProduceResponse(f *testing.F) {
	for _, s := range produceResponseSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		v := 3 + int16(data[0])%12
		r := kmsg.NewPtrProduceResponse()
		r.Version = v
		if r.ReadFrom(data[1:]) != nil {
			return
		}
		type answer struct {
			n       int32
			present bool
			bad     bool
		}
		var before []answer
		for i := range r.Topics {
			for j := range r.Topics[i].Partitions {
				p := &r.Topics[i].Partitions[j]
				n, present, err := BatchesToRetain(v, p)
				if err != nil && (!errors.Is(err, ErrMalformedResponse) || present || n != DefaultBatchesToRetain) {
					t.Fatalf("bad error result: %d %v %v", n, present, err)
				}
				if v < 14 && (present || err != nil || n != DefaultBatchesToRetain) {
					t.Fatalf("v%d yielded %d %v %v", v, n, present, err)
				}
				if !present && err == nil && n != DefaultBatchesToRetain {
					t.Fatalf("absent but %d", n)
				}
				before = append(before, answer{n, present, err != nil})
			}
		}
		frame := AppendResponse(nil, 9, r)
		req := kmsg.NewPtrProduceRequest()
		req.Version = v
		back, err := ParseResponse(frame[4:], req, 9)
		if err != nil {
			t.Fatalf("our re-encoding does not decode: %v", err)
		}
		k := 0
		for _, tp := range back.(*kmsg.ProduceResponse).Topics {
			for j := range tp.Partitions {
				n, present, err := BatchesToRetain(v, &tp.Partitions[j])
				if got := (answer{n, present, err != nil}); got != before[k] {
					t.Fatalf("partition %d: %+v after round trip, %+v before", k, got, before[k])
				}
				k++
			}
		}
	})
}

// FuzzParseRecordBatch feeds arbitrary bytes to the batch decoders: no
// panic, bounded output, and internally consistent results.
func FuzzParseRecordBatch(f *testing.F) {
	for _, s := range batchSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		const limit = 1 << 20
		info, recs, err := ParseRecordBatch(data, limit)
		hinfo, herr := ParseBatchHeader(data)
		if herr != nil && err == nil {
			t.Fatal("header rejected but batch accepted")
		}
		if err == nil {
			if hinfo != info || len(recs) != int(info.NumRecords) || info.TotalLen() > len(data) {
				t.Fatalf("inconsistent: %+v %+v %d", info, hinfo, len(recs))
			}
			// Renumbering keeps the batch valid and changes only those fields.
			b := bytes.Clone(data[:info.TotalLen()])
			if err := SetBatchSequence(b, 1, 2, 3); err != nil {
				t.Fatal(err)
			}
			i2, recs2, err := ParseRecordBatch(b, limit)
			if err != nil || i2.ProducerID != 1 || i2.ProducerEpoch != 2 || i2.BaseSequence != 3 || len(recs2) != len(recs) {
				t.Fatalf("after SetBatchSequence: %v %+v", err, i2)
			}
		} else if !errors.Is(err, ErrCorruptBatch) {
			t.Fatalf("error does not wrap ErrCorruptBatch: %v", err)
		}
		if batches, err := SplitBatches(data); err == nil {
			n := 0
			for _, b := range batches {
				n += len(b)
			}
			if n != len(data) {
				t.Fatalf("split covers %d of %d bytes", n, len(data))
			}
		}
		for _, c := range allCodecs[1:] {
			out, err := Decompress(nil, c, data, 4096)
			if len(out) > 4096 || err != nil && len(out) != 0 {
				t.Fatalf("%s: %d bytes, err %v", c, len(out), err)
			}
		}
	})
}

// FuzzParseRequest feeds arbitrary frames to the broker-side parser: no
// panic, any request it accepts re-encodes to a frame that parses to the
// same body, and for a produce request, Conn.Produce's segmented encoding
// of its batches equals AppendRequest's frame.
func FuzzParseRequest(f *testing.F) {
	for _, s := range requestSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		h, req, err := ParseRequest(data)
		if err != nil {
			if req != nil {
				t.Fatal("request returned with an error")
			}
			return
		}
		if req.Key() != h.Key || req.GetVersion() != h.Version {
			t.Fatalf("header %+v vs request key %d v%d", h, req.Key(), req.GetVersion())
		}
		body := req.AppendTo(nil)
		h2, req2, err := ParseRequest(AppendRequest(nil, req, h.CorrelationID, h.ClientID)[4:])
		if err != nil {
			t.Fatalf("re-encoded request does not parse: %v", err)
		}
		if h2.CorrelationID != h.CorrelationID || !bytes.Equal(req2.AppendTo(nil), body) {
			t.Fatal("request changed across a round trip")
		}
		// What Conn.Produce writes for the same batches (record sets by
		// reference) is AppendRequest's frame.
		pr, ok := fromKmsg(req)
		if !ok {
			return
		}
		f := getFrame()
		defer putFrame(f)
		f.encodeProduce(pr, h.Version, h.CorrelationID, h.ClientID)
		if want := AppendRequest(nil, req, h.CorrelationID, h.ClientID); !bytes.Equal(flatten(f), want) {
			t.Fatalf("v%d: Produce's segments differ from AppendRequest", h.Version)
		}
	})
}

// fromKmsg returns the ProduceRequest adding req's batches, when req is a
// produce request at v3+ that one can express: no unknown tags, no topic
// without partitions, and no topic (name and id) listed twice.
func fromKmsg(req kmsg.Request) (*ProduceRequest, bool) {
	kr, ok := req.(*kmsg.ProduceRequest)
	if !ok || kr.Version < 3 || kr.UnknownTags.Len() > 0 {
		return nil, false
	}
	pr := &ProduceRequest{TransactionalID: kr.TransactionID, Acks: kr.Acks, Timeout: time.Duration(kr.TimeoutMillis) * time.Millisecond}
	seen := map[[2]string]bool{}
	for _, t := range kr.Topics {
		key := [2]string{t.Topic, string(t.TopicID[:])}
		if seen[key] || t.UnknownTags.Len() > 0 || len(t.Partitions) == 0 {
			return nil, false
		}
		seen[key] = true
		for _, p := range t.Partitions {
			if p.UnknownTags.Len() > 0 {
				return nil, false
			}
			pr.Add(t.Topic, t.TopicID, p.Partition, p.Records)
		}
	}
	return pr, true
}

// TestWriteFuzzCorpus writes the seed corpora to testdata/fuzz when
// LONGHAUL_WRITE_CORPUS=1.
func TestWriteFuzzCorpus(t *testing.T) {
	if os.Getenv("LONGHAUL_WRITE_CORPUS") != "1" {
		t.Skip("set LONGHAUL_WRITE_CORPUS=1 to regenerate testdata/fuzz")
	}
	write := func(target string, seeds [][]byte) {
		dir := filepath.Join("testdata", "fuzz", target)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for i, s := range seeds {
			body := "go test fuzz v1\n[]byte(" + strconv.Quote(string(s)) + ")\n"
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed-%02d", i)), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	write("FuzzProduceResponse", produceResponseSeeds())
	write("FuzzProduceResponseDecoder", produceDecoderSeeds())
	write("FuzzParseRecordBatch", batchSeeds(t))
	write("FuzzParseRequest", requestSeeds(t))
}
