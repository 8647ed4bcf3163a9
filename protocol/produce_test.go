package protocol

import (
	"bytes"
	"errors"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func produceResponse(version int16) *kmsg.ProduceResponse {
	r := kmsg.NewPtrProduceResponse()
	r.Version = version
	t := kmsg.NewProduceResponseTopic()
	t.Topic = "orders"
	t.TopicID = [16]byte{1, 2, 3}
	for i := range int32(3) {
		p := kmsg.NewProduceResponseTopicPartition()
		p.Partition = i
		p.BaseOffset = 100 * int64(i)
		if version >= 10 && i == 1 {
			p.CurrentLeader.LeaderID = 7
			p.CurrentLeader.LeaderEpoch = 9
		}
		t.Partitions = append(t.Partitions, p)
	}
	r.Topics = append(r.Topics, t)
	return r
}

func reencode(t *testing.T, r *kmsg.ProduceResponse) *kmsg.ProduceResponse {
	t.Helper()
	frame := AppendResponse(nil, 42, r)
	req := kmsg.NewPtrProduceRequest()
	req.Version = r.Version
	resp, err := ParseResponse(frame[4:], req, 42)
	if err != nil {
		t.Fatalf("v%d: %v", r.Version, err)
	}
	return resp.(*kmsg.ProduceResponse)
}

// TestProduceResponseRoundTrip covers v3..v14 with the tag set on partition
// 0 and absent on the others: only v14 yields it, and KIP-951's
// CurrentLeader survives next to it.
func TestProduceResponseRoundTrip(t *testing.T) {
	for v := int16(3); v <= MaxProduceVersion; v++ {
		r := produceResponse(v)
		SetBatchesToRetain(&r.Topics[0].Partitions[0], 200)
		got := reencode(t, r)
		ps := got.Topics[0].Partitions
		if len(ps) != 3 || ps[2].BaseOffset != 200 {
			t.Fatalf("v%d: partitions %+v", v, ps)
		}
		n, present, err := BatchesToRetain(v, &ps[0])
		switch {
		case err != nil:
			t.Fatalf("v%d: %v", v, err)
		case v >= 14 && (!present || n != 200):
			t.Fatalf("v%d: got %d present=%v, want 200", v, n, present)
		case v < 14 && (present || n != DefaultBatchesToRetain):
			t.Fatalf("v%d: field yielded below v14: %d %v", v, n, present)
		}
		// Below v14 the tag must not even be on the wire.
		if v < 14 && ps[0].UnknownTags.Len() != 0 {
			t.Fatalf("v%d: tag encoded below v14", v)
		}
		if n, present, err := BatchesToRetain(v, &ps[1]); n != 5 || present || err != nil {
			t.Fatalf("v%d absent: %d %v %v", v, n, present, err)
		}
		id, epoch, ok := CurrentLeader(v, &ps[1])
		if (v >= 10) != ok || (ok && (id != 7 || epoch != 9)) {
			t.Fatalf("v%d CurrentLeader %d %d %v", v, id, epoch, ok)
		}
		if _, _, ok := CurrentLeader(v, &ps[0]); ok {
			t.Fatalf("v%d: default CurrentLeader reported", v)
		}
	}
	// AppendResponse must not have modified the caller's v13 response.
	r := produceResponse(13)
	SetBatchesToRetain(&r.Topics[0].Partitions[0], 9)
	AppendResponse(nil, 1, r)
	if r.Topics[0].Partitions[0].UnknownTags.Len() != 1 {
		t.Fatal("AppendResponse mutated its argument")
	}
}

// TestV13ResponseWithTagOnWire: a (buggy) v13 response carrying tag 1 on the
// wire still never yields the field.
func TestV13ResponseWithTagOnWire(t *testing.T) {
	r := produceResponse(13)
	SetBatchesToRetain(&r.Topics[0].Partitions[0], 50)
	body := r.AppendTo(nil) // kmsg writes the unknown tag at v13
	got := kmsg.NewPtrProduceResponse()
	got.Version = 13
	if err := got.ReadFrom(body); err != nil {
		t.Fatal(err)
	}
	p := &got.Topics[0].Partitions[0]
	if p.UnknownTags.Len() != 1 {
		t.Fatal("test setup: tag not on the wire")
	}
	if n, present, err := BatchesToRetain(13, p); n != 5 || present || err != nil {
		t.Fatalf("v13 yielded %d %v %v", n, present, err)
	}
}

// TestBatchesToRetainOddValues: the value is returned as sent (policy is
// the caller's); a tag of the wrong size is ErrMalformedResponse with the
// default, never a panic.
func TestBatchesToRetainOddValues(t *testing.T) {
	for _, n := range []int32{0, -1, math.MaxInt32, math.MinInt32, 1, 5} {
		r := produceResponse(14)
		SetBatchesToRetain(&r.Topics[0].Partitions[0], n)
		p := &reencode(t, r).Topics[0].Partitions[0]
		got, present, err := BatchesToRetain(14, p)
		if got != n || !present || err != nil {
			t.Errorf("value %d: got %d %v %v", n, got, present, err)
		}
	}
	for _, size := range []int{0, 2, 3, 5, 9} {
		r := produceResponse(14)
		r.Topics[0].Partitions[0].UnknownTags.Set(1, bytes.Repeat([]byte{0x7f}, size))
		p := &reencode(t, r).Topics[0].Partitions[0]
		got, present, err := BatchesToRetain(14, p)
		if !errors.Is(err, ErrMalformedResponse) || present || got != 5 {
			t.Errorf("%d-byte tag: %d %v %v", size, got, present, err)
		}
	}
	// Unrelated unknown tags are ignored.
	r := produceResponse(14)
	r.Topics[0].Partitions[0].UnknownTags.Set(7, []byte{1})
	p := &reencode(t, r).Topics[0].Partitions[0]
	if n, present, err := BatchesToRetain(14, p); n != 5 || present || err != nil {
		t.Errorf("tag 7 only: %d %v %v", n, present, err)
	}
}

// TestProduceV14WireLayout hand-checks the encoding against KIP-1269: tag
// 1, length 4, big-endian int32, after tag 0, in the partition's tag
// section.
func TestProduceV14WireLayout(t *testing.T) {
	r := kmsg.NewPtrProduceResponse()
	r.Version = 14
	tp := kmsg.NewProduceResponseTopic()
	p := kmsg.NewProduceResponseTopicPartition()
	p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch = 3, 4
	SetBatchesToRetain(&p, 64)
	tp.Partitions = append(tp.Partitions, p)
	r.Topics = append(r.Topics, tp)
	got := r.AppendTo(nil)

	var want []byte
	want = append(want, 2)                   // topics: compact array of 1
	want = append(want, make([]byte, 16)...) // topic id
	want = append(want, 2)                   // partitions: 1
	want = kbin.AppendInt32(want, 0)         // partition
	want = kbin.AppendInt16(want, 0)         // error code
	want = kbin.AppendInt64(want, 0)         // base offset
	want = kbin.AppendInt64(want, -1)        // log append time
	want = kbin.AppendInt64(want, -1)        // log start offset
	want = append(want, 1)                   // error records: empty compact array
	want = append(want, 0)                   // error message: null
	want = append(want, 2)                   // two tags
	want = append(want, 0, 9)                // tag 0, 9 bytes
	want = kbin.AppendInt32(want, 3)
	want = kbin.AppendInt32(want, 4)
	want = append(want, 0)    // CurrentLeader's own tags
	want = append(want, 1, 4) // tag 1, 4 bytes
	want = kbin.AppendInt32(want, 64)
	want = append(want, 0)           // topic tags
	want = kbin.AppendInt32(want, 0) // throttle
	want = append(want, 0)           // response tags
	if !bytes.Equal(got, want) {
		t.Fatalf("v14 layout\n got %x\nwant %x", got, want)
	}
}

// TestProduceRequestV14EqualsV13: the v14 request body is the v13 body.
func TestProduceRequestV14EqualsV13(t *testing.T) {
	var b BatchBuilder
	b.Append(1, []byte("k"), []byte("v"), nil)
	batch, _ := b.Build(nil, BatchHeader{ProducerID: 1, BaseSequence: 0})
	mk := func(v int16) *kmsg.ProduceRequest {
		r := kmsg.NewPtrProduceRequest()
		r.Version = v
		r.Acks = -1
		tp := kmsg.NewProduceRequestTopic()
		tp.Topic = "t"
		tp.TopicID = [16]byte{9}
		pp := kmsg.NewProduceRequestTopicPartition()
		pp.Records = batch
		tp.Partitions = append(tp.Partitions, pp)
		r.Topics = append(r.Topics, tp)
		return r
	}
	if !bytes.Equal(mk(13).AppendTo(nil), mk(14).AppendTo(nil)) {
		t.Fatal("v14 body differs from v13")
	}
	for v := int16(3); v <= MaxProduceVersion; v++ {
		req := mk(v)
		frame := AppendRequest(nil, req, 5, nil)
		h, got, err := ParseRequest(frame[4:])
		if err != nil || h.Version != v || h.Key != 0 {
			t.Fatalf("v%d: %v %+v", v, err, h)
		}
		gp := got.(*kmsg.ProduceRequest)
		if !bytes.Equal(gp.Topics[0].Partitions[0].Records, batch) || gp.Acks != -1 {
			t.Fatalf("v%d: request did not round trip", v)
		}
		if v >= 13 && gp.Topics[0].TopicID != [16]byte{9} || v < 13 && gp.Topics[0].Topic != "t" {
			t.Fatalf("v%d: topic naming wrong", v)
		}
	}
}

// Tests of the KIP-1269 window tag (tag 1 of a v14 partition response) on
// kmsg's types: BatchesToRetainTags, and that no other package touches tag
// numbers.

// TestBatchesToRetainTagsContents: the returned Tags hold tag 1 alone, the
// window as a big-endian int32; copies share one map, so a Set on a copy
// changes what the original reads (the reason none may be modified while
// another is in use).
func TestBatchesToRetainTagsContents(t *testing.T) {
	for _, n := range []int32{0, 1, 5, -3, 1 << 30} {
		tags := BatchesToRetainTags(n)
		require.Equal(t, 1, tags.Len())
		tags.Each(func(key uint32, val []byte) {
			assert.Equal(t, uint32(1), key)
			assert.Equal(t, kbin.AppendInt32(nil, n), val)
		})
	}
	orig := BatchesToRetainTags(3)
	cp := orig
	cp.Set(tagBatchesToRetain, kbin.AppendInt32(nil, 4))
	p := kmsg.NewProduceResponseTopicPartition()
	p.UnknownTags = orig
	n, present, err := BatchesToRetain(14, &p)
	require.NoError(t, err)
	require.True(t, present)
	assert.Equal(t, int32(4), n, "the copy's Set is seen through the original")
}

// TestNoOtherPackageTouchesTagNumbers: the package doc says no other
// package touches tag numbers: outside protocol/, no non-test Go file of
// the repository sets, reads or deletes unknown tags by number. The same
// pattern finds this package's own uses (the check is not vacuous).
func TestNoOtherPackageTouchesTagNumbers(t *testing.T) {
	pat := regexp.MustCompile(`UnknownTags\.(Set|Each|Delete)\(|Tags\.(Set|Each|Delete)\(`)
	ours := 0
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); name == ".git" || name == "testdata" || name == "node_modules" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		n := len(pat.FindAllIndex(src, -1))
		if filepath.Dir(path) == filepath.Join("..", "protocol") {
			ours += n
			return nil
		}
		assert.Zero(t, n, "%s touches tagged fields by number", path)
		return nil
	})
	require.NoError(t, err)
	require.Positive(t, ours, "the pattern finds protocol's own uses")
}
