package protocol

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestMetadataHelper(t *testing.T) {
	b := newFakeBroker(t)
	asked := make(chan *kmsg.MetadataRequest, 1)
	b.handle = func(h RequestHeader, req kmsg.Request, reply func(any)) {
		r := req.(*kmsg.MetadataRequest)
		asked <- r
		resp := r.ResponseKind().(*kmsg.MetadataResponse)
		resp.ControllerID = 2
		resp.Brokers = []kmsg.MetadataResponseBroker{{NodeID: 1, Host: "10.0.0.1", Port: 9092}, {NodeID: 2, Host: "::1", Port: 9093}}
		name := "orders"
		tp := kmsg.NewMetadataResponseTopic()
		tp.Topic, tp.TopicID = &name, [16]byte{7}
		tp.Partitions = []kmsg.MetadataResponseTopicPartition{
			{Partition: 0, Leader: 1, LeaderEpoch: 4},
			{Partition: 1, Leader: -1, LeaderEpoch: -1, ErrorCode: 5},
		}
		resp.Topics = append(resp.Topics, tp)
		reply(resp)
	}
	c := dialT(t, b.listen(), DialConfig{})
	md, err := Metadata(context.Background(), c, []string{"orders"})
	if err != nil {
		t.Fatal(err)
	}
	if r := <-asked; len(r.Topics) != 1 || *r.Topics[0].Topic != "orders" || r.AllowAutoTopicCreation {
		t.Fatalf("asked %v, auto-create %v", r.Topics, r.AllowAutoTopicCreation)
	}
	if _, err := MetadataAutoCreate(context.Background(), c, []string{"orders"}); err != nil {
		t.Fatal(err)
	}
	if r := <-asked; len(r.Topics) != 1 || !r.AllowAutoTopicCreation {
		t.Fatalf("MetadataAutoCreate asked %v, auto-create %v", r.Topics, r.AllowAutoTopicCreation)
	}
	if md.ControllerID != 2 || md.Brokers[1] != "10.0.0.1:9092" || md.Brokers[2] != "[::1]:9093" {
		t.Fatalf("brokers %+v", md)
	}
	tm := md.Topics["orders"]
	if tm.ID != [16]byte{7} || len(tm.Partitions) != 2 || tm.Partitions[0] != (PartitionMetadata{0, 0, 1, 4}) || tm.Partitions[1].ErrorCode != 5 {
		t.Fatalf("topic %+v", tm)
	}
	if _, err := Metadata(context.Background(), c, nil); err != nil {
		t.Fatal(err)
	}
	if r := <-asked; r.Topics != nil {
		t.Fatalf("all topics: asked %v", r.Topics)
	}
}

func TestInitProducerIDHelper(t *testing.T) {
	b := newFakeBroker(t)
	seen := make(chan *kmsg.InitProducerIDRequest, 1)
	b.handle = func(h RequestHeader, req kmsg.Request, reply func(any)) {
		r := req.(*kmsg.InitProducerIDRequest)
		seen <- r
		resp := r.ResponseKind().(*kmsg.InitProducerIDResponse)
		switch {
		case r.ProducerID == -1:
			resp.ProducerID, resp.ProducerEpoch = 1000, 0
		case r.ProducerID == 1000:
			resp.ProducerID, resp.ProducerEpoch = 1000, r.ProducerEpoch+1
		default:
			resp.ErrorCode = 59 // UNKNOWN_PRODUCER_ID
		}
		reply(resp)
	}
	c := dialT(t, b.listen(), DialConfig{})
	ctx := context.Background()
	id, ep, code, err := InitProducerID(ctx, c, -1, -1, 0)
	last := <-seen
	if err != nil || id != 1000 || ep != 0 || code != 0 || last.TransactionTimeoutMillis != math.MaxInt32 || last.TransactionalID != nil {
		t.Fatalf("new id: %d %d %d %v %+v", id, ep, code, err, last)
	}
	id, ep, code, err = InitProducerID(ctx, c, 1000, 0, time.Minute)
	last = <-seen
	if err != nil || id != 1000 || ep != 1 || code != 0 || last.TransactionTimeoutMillis != 60000 {
		t.Fatalf("bump: %d %d %d %v", id, ep, code, err)
	}
	if id, _, code, err = InitProducerID(ctx, c, 5, 0, 0); err != nil || code != 59 || id != -1 {
		t.Fatalf("error code: %d %d %v", id, code, err)
	}
	<-seen

	old := newFakeBroker(t)
	old.keys = withKey(old.keys, 22, 0, 2)
	oc := dialT(t, old.listen(), DialConfig{})
	if _, _, _, err := InitProducerID(ctx, oc, 1000, 0, 0); !errors.Is(err, ErrUnsupportedVersion) {
		t.Fatalf("bump on v2: %v", err)
	}
}

func TestListOffsetsHelper(t *testing.T) {
	b := newFakeBroker(t)
	b.handle = func(h RequestHeader, req kmsg.Request, reply func(any)) {
		r := req.(*kmsg.ListOffsetsRequest)
		resp := r.ResponseKind().(*kmsg.ListOffsetsResponse)
		rt := kmsg.NewListOffsetsResponseTopic()
		rt.Topic = r.Topics[0].Topic
		rp := kmsg.NewListOffsetsResponseTopicPartition()
		rp.Partition = r.Topics[0].Partitions[0].Partition
		switch r.Topics[0].Partitions[0].Timestamp {
		case OffsetLatest:
			rp.Offset = 42
		case OffsetEarliest:
			rp.Offset = 3
		default:
			rp.ErrorCode = 3
		}
		rt.Partitions = append(rt.Partitions, rp)
		resp.Topics = append(resp.Topics, rt)
		reply(resp)
	}
	c := dialT(t, b.listen(), DialConfig{})
	ctx := context.Background()
	for ts, want := range map[int64]int64{OffsetLatest: 42, OffsetEarliest: 3} {
		if off, code, err := ListOffsets(ctx, c, "t", 2, ts); off != want || code != 0 || err != nil {
			t.Fatalf("ts %d: %d %d %v", ts, off, code, err)
		}
	}
	if _, code, err := ListOffsets(ctx, c, "t", 2, 12345); code != 3 || err != nil {
		t.Fatalf("error code: %d %v", code, err)
	}
}

// TestFetchHelper: the broker returns two data batches, a control batch and
// a batch cut short; Fetch decodes the complete ones, skips the control
// records, drops records before the requested offset, and resolves the topic
// id through Metadata.
func TestFetchHelper(t *testing.T) {
	var bb BatchBuilder
	mk := func(base int64, n int, c Codec, attrs int16) []byte {
		bb.Reset()
		for i := range n {
			bb.Append(1000+int64(i), nil, []byte{byte(base + int64(i))}, nil)
		}
		out, err := bb.Build(nil, BatchHeader{ProducerID: 1, BaseSequence: int32(base), Compression: c})
		if err != nil {
			t.Fatal(err)
		}
		SetBaseOffset(out, base)
		if attrs != 0 {
			out[offAttributes+1] |= byte(attrs)
			binaryPutCRC(out)
		}
		return out
	}
	var data []byte
	data = append(data, mk(0, 3, CodecNone, 0)...)
	data = append(data, mk(3, 1, CodecNone, attrControl)...)
	data = append(data, mk(4, 4, CodecZstd, 0)...)
	partial := mk(8, 2, CodecNone, 0)
	data = append(data, partial[:len(partial)-5]...)

	topicID := [16]byte{0xab}
	b := newFakeBroker(t)
	var mu sync.Mutex // the broker goroutine vs the test; TCP is no happens-before edge for the race detector
	var fetched *kmsg.FetchRequest
	b.handle = func(h RequestHeader, req kmsg.Request, reply func(any)) {
		switch r := req.(type) {
		case *kmsg.MetadataRequest:
			resp := mdEcho(r)
			resp.Topics[0].TopicID = topicID
			reply(resp)
		case *kmsg.FetchRequest:
			mu.Lock()
			defer mu.Unlock()
			fetched = r
			resp := r.ResponseKind().(*kmsg.FetchResponse)
			rt := kmsg.NewFetchResponseTopic()
			rt.TopicID = r.Topics[0].TopicID
			rp := kmsg.NewFetchResponseTopicPartition()
			rp.Partition = r.Topics[0].Partitions[0].Partition
			rp.HighWatermark = 10
			rp.RecordBatches = data
			rt.Partitions = append(rt.Partitions, rp)
			resp.Topics = append(resp.Topics, rt)
			reply(resp)
		}
	}
	c := dialT(t, b.listen(), DialConfig{})
	res, err := Fetch(context.Background(), c, "orders", [16]byte{}, 0, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if fetched.Topics[0].TopicID != topicID || fetched.Topics[0].Partitions[0].FetchOffset != 1 {
		t.Fatalf("request %+v", fetched.Topics)
	}
	if len(res.Batches) != 3 || res.HighWatermark != 10 {
		t.Fatalf("batches %d hw %d", len(res.Batches), res.HighWatermark)
	}
	var offs []int64
	for _, r := range res.Records {
		if r.Value[0] != byte(r.Offset) {
			t.Fatalf("record at %d has value %d", r.Offset, r.Value[0])
		}
		offs = append(offs, r.Offset)
	}
	if want := []int64{1, 2, 4, 5, 6, 7}; len(offs) != len(want) || offs[0] != 1 || offs[5] != 7 || offs[2] != 4 {
		t.Fatalf("offsets %v, want %v", offs, want)
	}
	// A corrupt batch is an error.
	data = bytes.Clone(data)
	data[20] ^= 1
	mu.Unlock()
	defer mu.Lock()
	if _, err := Fetch(context.Background(), c, "orders", topicID, 0, 0, 0); !errors.Is(err, ErrCorruptBatch) {
		t.Fatalf("corrupt: %v", err)
	}
}

// TestInitProducerIDRejectsNoIdentity: an answer without an error code
// must carry an identity. Producer id -1 is what a batch without
// idempotence carries: a producer that took it would send batches the
// broker writes without deduplication, so every retry of a lost answer
// could be written twice, silently. A negative epoch is no epoch either.
// Such answers are a malformed response (the caller retries), not an id.
func TestInitProducerIDRejectsNoIdentity(t *testing.T) {
	for _, tc := range []struct {
		id    int64
		epoch int16
	}{{-1, 0}, {-1, -1}, {-7, 3}, {1000, -1}, {1000, -32768}} {
		t.Run(fmt.Sprintf("id %d epoch %d", tc.id, tc.epoch), func(t *testing.T) {
			b := newFakeBroker(t)
			b.handle = func(h RequestHeader, req kmsg.Request, reply func(any)) {
				resp := req.(*kmsg.InitProducerIDRequest).ResponseKind().(*kmsg.InitProducerIDResponse)
				resp.ProducerID, resp.ProducerEpoch = tc.id, tc.epoch
				reply(resp)
			}
			c := dialT(t, b.listen(), DialConfig{})
			id, ep, code, err := InitProducerID(context.Background(), c, -1, -1, 0)
			require.ErrorIs(t, err, ErrMalformedResponse)
			require.Equal(t, int64(-1), id)
			require.Equal(t, int16(-1), ep)
			require.Zero(t, code)
		})
	}
	// The edges that are identities.
	b := newFakeBroker(t)
	b.handle = func(h RequestHeader, req kmsg.Request, reply func(any)) {
		resp := req.(*kmsg.InitProducerIDRequest).ResponseKind().(*kmsg.InitProducerIDResponse)
		resp.ProducerID, resp.ProducerEpoch = 0, 32767
		reply(resp)
	}
	c := dialT(t, b.listen(), DialConfig{})
	id, ep, code, err := InitProducerID(context.Background(), c, -1, -1, 0)
	require.NoError(t, err)
	require.Equal(t, int64(0), id)
	require.Equal(t, int16(32767), ep)
	require.Zero(t, code)
}

// TestInitProducerIDWithoutKeyIsIdempotenceUnsupported checks
// InitProducerID's promise for a broker without InitProducerId (Kafka
// before 0.11): the error wraps ErrIdempotenceUnsupported, so a caller
// can tell "this broker cannot be produced to idempotently" from a
// transient failure, and ErrUnsupportedVersion; nothing is sent.
func TestInitProducerIDWithoutKeyIsIdempotenceUnsupported(t *testing.T) {
	b := newFakeBroker(t)
	b.keys = slices.DeleteFunc(withKey(b.keys, 0, 0, 2), func(k kmsg.ApiVersionsResponseApiKey) bool { return k.ApiKey == 22 })
	b.handle = func(h RequestHeader, req kmsg.Request, reply func(any)) {
		t.Errorf("request sent: key %d", req.Key())
	}
	c := dialT(t, b.listen(), DialConfig{})
	_, ok := c.Version(22)
	require.False(t, ok)
	id, _, code, err := InitProducerID(context.Background(), c, -1, -1, 0)
	require.ErrorIs(t, err, ErrIdempotenceUnsupported)
	require.ErrorIs(t, err, ErrUnsupportedVersion)
	require.Contains(t, err.Error(), "InitProducerId")
	require.EqualValues(t, -1, id)
	require.Zero(t, code)
	require.ErrorIs(t, RequireIdempotentProduce(c), ErrIdempotenceUnsupported, "Produce v2 at most")
}
