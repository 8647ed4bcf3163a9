package protocol

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// headerLog is three v2 batches at offsets 10, 13 and 20, with an old
// message-format entry at offset 15 between the second and third.
func headerLog(t testing.TB) []byte {
	var log []byte
	recs := recordSets()
	for i, h := range []BatchHeader{
		{ProducerID: 7, ProducerEpoch: 1, BaseSequence: 0},
		{ProducerID: 7, ProducerEpoch: 1, BaseSequence: 3, Compression: CodecZstd},
		{ProducerID: 8, ProducerEpoch: 0, BaseSequence: 9},
	} {
		b := buildTest(t, recs["one"], h)
		if i < 2 {
			b = buildTest(t, append(append(recs["one"], recs["one"]...), recs["one"]...), h)
		}
		SetBaseOffset(b, []int64{10, 13, 20}[i])
		log = append(log, b...)
		if i == 1 {
			// An old-format (magic 1) message at offset 15.
			old := make([]byte, oldMessageMin+8)
			binary.BigEndian.PutUint64(old[0:], 15)
			binary.BigEndian.PutUint32(old[8:], uint32(len(old)-lengthBase))
			old[offMagic] = 1
			log = append(log, old...)
		}
	}
	return log
}

func TestBatchHeaders(t *testing.T) {
	log := headerLog(t)
	headers, next, err := BatchHeaders(log)
	if err != nil {
		t.Fatal(err)
	}
	if len(headers) != 3 || next != 21 {
		t.Fatalf("%d headers, next %d; want 3, 21", len(headers), next)
	}
	want := []struct {
		base, pid int64
		seq, n    int32
	}{{10, 7, 0, 3}, {13, 7, 3, 3}, {20, 8, 9, 1}}
	for i, w := range want {
		h := headers[i]
		if h.BaseOffset != w.base || h.ProducerID != w.pid || h.BaseSequence != w.seq || h.NumRecords != w.n || h.LastOffsetDelta != w.n-1 {
			t.Errorf("header %d: %+v, want %+v", i, h, w)
		}
	}
	// Cut inside the last batch: it is left out, the old message counts.
	cut := log[:len(log)-5]
	headers, next, err = BatchHeaders(cut)
	if err != nil || len(headers) != 2 || next != 16 {
		t.Fatalf("cut: %d headers, next %d, %v; want 2, 16", len(headers), next, err)
	}
	// Nothing complete.
	if headers, next, err = BatchHeaders(log[:40]); err != nil || len(headers) != 0 || next != -1 {
		t.Fatalf("short: %d headers, next %d, %v", len(headers), next, err)
	}
	// A flipped byte in the records fails the CRC.
	bad := bytes.Clone(log)
	bad[RecordBatchOverhead+2] ^= 0xff
	if _, _, err = BatchHeaders(bad); !errors.Is(err, ErrCorruptBatch) {
		t.Fatalf("corrupt: %v", err)
	}
}

func TestHeaderFetchResult(t *testing.T) {
	log := headerLog(t)
	q := HeaderFetch{Topic: "t", Partition: 2, Offset: 11}
	resp := kmsg.NewPtrFetchResponse()
	rt := kmsg.NewFetchResponseTopic()
	rt.Topic = "t"
	for _, id := range []int32{1, 2} {
		rp := kmsg.NewFetchResponseTopicPartition()
		rp.Partition = id
		rp.HighWatermark, rp.LogStartOffset = 30, 4
		if id == 2 {
			rp.RecordBatches = log
		}
		rt.Partitions = append(rt.Partitions, rp)
	}
	resp.Topics = append(resp.Topics, rt)
	res, err := headerFetchResult(resp, q)
	if err != nil || res.ErrorCode != 0 || len(res.Batches) != 3 || res.Next != 21 || res.HighWatermark != 30 || res.LogStartOffset != 4 || res.Bytes != len(log) {
		t.Fatalf("%+v %v", res, err)
	}
	resp.Topics[0].Partitions[1].ErrorCode = kerr.TopicAuthorizationFailed.Code
	if res, err = headerFetchResult(resp, q); err != nil || res.ErrorCode != kerr.TopicAuthorizationFailed.Code || res.Next != 11 {
		t.Fatalf("%+v %v", res, err)
	}
	resp.Topics[0].Partitions = resp.Topics[0].Partitions[:1]
	if _, err = headerFetchResult(resp, q); !errors.Is(err, ErrMalformedResponse) {
		t.Fatalf("missing partition: %v", err)
	}
}

// FuzzFetchHeaders feeds arbitrary Fetch responses (a version byte, then
// the body) to FetchHeaders' decoder: no panic, errors wrap
// ErrCorruptBatch or ErrMalformedResponse, and the headers it returns lie
// inside the data, in order, with next past each of them.
func FuzzFetchHeaders(f *testing.F) {
	log := headerLog(f)
	for v := int16(4); v <= 16; v++ {
		resp := kmsg.NewPtrFetchResponse()
		resp.Version = v
		rt := kmsg.NewFetchResponseTopic()
		rt.Topic = "t"
		rp := kmsg.NewFetchResponseTopicPartition()
		rp.RecordBatches = log[:len(log)-int(v)]
		rt.Partitions = append(rt.Partitions, rp)
		resp.Topics = append(resp.Topics, rt)
		f.Add(append([]byte{byte(v)}, resp.AppendTo(nil)...))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 1 {
			return
		}
		resp := kmsg.NewPtrFetchResponse()
		resp.Version = int16(data[0] % 17)
		if err := resp.ReadFrom(data[1:]); err != nil {
			return
		}
		q := HeaderFetch{Topic: "t", Offset: 5}
		res, err := headerFetchResult(resp, q)
		if err != nil {
			if !errors.Is(err, ErrCorruptBatch) && !errors.Is(err, ErrMalformedResponse) {
				t.Fatalf("error wraps neither: %v", err)
			}
			return
		}
		if res.Next < q.Offset {
			t.Fatalf("next %d before the asked offset", res.Next)
		}
		size := 0
		for i, h := range res.Batches {
			size += h.TotalLen()
			if h.Magic != 2 || h.LastOffsetDelta < 0 {
				t.Fatalf("header %d: %+v", i, h)
			}
			if h.BaseOffset+int64(h.LastOffsetDelta) >= res.Next && h.BaseOffset+int64(h.LastOffsetDelta) < 1<<62 {
				t.Fatalf("header %d ends at %d, next %d", i, h.BaseOffset+int64(h.LastOffsetDelta), res.Next)
			}
		}
		if size > res.Bytes {
			t.Fatalf("headers cover %d of %d bytes", size, res.Bytes)
		}
	})
}
