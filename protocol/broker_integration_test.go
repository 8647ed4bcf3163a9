package protocol_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/longhaul-kafka/longhaul/internal/broker"
	"github.com/longhaul-kafka/longhaul/internal/testkit"
	"github.com/longhaul-kafka/longhaul/protocol"
)

// TestAgainstEmbeddedBroker runs the client side of this package against
// internal/broker end to end: negotiate Produce v14, get a producer id, keep
// 40 batches in flight on one connection (window 64), read
// ProducerStateBatchesToRetain from each answer, and read the partition
// back with Fetch. An old-mode node negotiates v13 and never sends the
// field.
func TestAgainstEmbeddedBroker(t *testing.T) {
	cl := testkit.StartCluster(t, broker.Config{
		Nodes:    2,
		Topics:   []broker.TopicConfig{{Name: "wide", Partitions: 2, Window: 64}},
		OldNodes: []int32{1},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	c, err := protocol.Dial(ctx, cl.Addrs()[0], protocol.DialConfig{ClientID: "it"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if v, _ := c.Version(0); v != protocol.MaxProduceVersion {
		t.Fatalf("Produce v%d negotiated", v)
	}
	if err := protocol.RequireIdempotentProduce(c); err != nil {
		t.Fatal(err)
	}
	md, err := protocol.Metadata(ctx, c, []string{"wide"})
	if err != nil {
		t.Fatal(err)
	}
	topic := md.Topics["wide"]
	if topic.ErrorCode != 0 || len(topic.Partitions) != 2 || topic.Partitions[0].Leader != 0 {
		t.Fatalf("metadata %+v", topic)
	}
	pid, epoch, code, err := protocol.InitProducerID(ctx, c, -1, -1, 0)
	if err != nil || code != 0 {
		t.Fatalf("InitProducerID: %d %v", code, err)
	}

	const batches, perBatch = 40, 3
	type answer struct {
		resp kmsg.Response
		err  error
	}
	answers := make([]chan answer, batches)
	var bb protocol.BatchBuilder
	for i := range batches {
		bb.Reset()
		for j := range perBatch {
			bb.Append(1000, nil, fmt.Appendf(nil, "r%d", i*perBatch+j), nil)
		}
		raw, err := bb.Build(nil, protocol.BatchHeader{ProducerID: pid, ProducerEpoch: epoch, BaseSequence: int32(i * perBatch), Compression: protocol.Codec(i % 5)})
		if err != nil {
			t.Fatal(err)
		}
		req := kmsg.NewPtrProduceRequest()
		req.Acks = -1
		req.TimeoutMillis = 10000
		tp := kmsg.NewProduceRequestTopic()
		tp.Topic, tp.TopicID = "wide", topic.ID
		pp := kmsg.NewProduceRequestTopicPartition()
		pp.Records = raw
		tp.Partitions = append(tp.Partitions, pp)
		req.Topics = append(req.Topics, tp)
		ch := make(chan answer, 1)
		answers[i] = ch
		c.Send(req, 10*time.Second, func(r kmsg.Response, err error) { ch <- answer{r, err} })
	}
	for i, ch := range answers {
		a := <-ch
		if a.err != nil {
			t.Fatalf("batch %d: %v", i, a.err)
		}
		resp := a.resp.(*kmsg.ProduceResponse)
		p := &resp.Topics[0].Partitions[0]
		if p.ErrorCode != 0 || p.BaseOffset != int64(i*perBatch) {
			t.Fatalf("batch %d: code %d offset %d", i, p.ErrorCode, p.BaseOffset)
		}
		n, present, err := protocol.BatchesToRetain(resp.Version, p)
		if err != nil || !present || n != 64 {
			t.Fatalf("batch %d: BatchesToRetain %d %v %v", i, n, present, err)
		}
	}
	if off, code, err := protocol.ListOffsets(ctx, c, "wide", 0, protocol.OffsetLatest); err != nil || code != 0 || off != batches*perBatch {
		t.Fatalf("ListOffsets: %d %d %v", off, code, err)
	}
	res, err := protocol.Fetch(ctx, c, "wide", topic.ID, 0, 0, 0)
	if err != nil || res.ErrorCode != 0 || len(res.Records) != batches*perBatch {
		t.Fatalf("Fetch: %v %+v", err, res)
	}
	for i, r := range res.Records {
		if r.Offset != int64(i) || string(r.Value) != fmt.Sprint("r", i) {
			t.Fatalf("record %d: offset %d value %q", i, r.Offset, r.Value)
		}
	}

	// The old-mode node: Produce v13 and no field (partition 1 is led by
	// node 1).
	old, err := protocol.Dial(ctx, cl.Addrs()[1], protocol.DialConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	if v, _ := old.Version(0); v != 13 {
		t.Fatalf("old node: Produce v%d", v)
	}
	bb.Reset()
	bb.Append(1, nil, []byte("x"), nil)
	raw, _ := bb.Build(nil, protocol.BatchHeader{ProducerID: pid, ProducerEpoch: epoch, BaseSequence: 0})
	req := kmsg.NewPtrProduceRequest()
	req.Acks = -1
	tp := kmsg.NewProduceRequestTopic()
	tp.Topic, tp.TopicID = "wide", topic.ID
	pp := kmsg.NewProduceRequestTopicPartition()
	pp.Partition, pp.Records = 1, raw
	tp.Partitions = append(tp.Partitions, pp)
	req.Topics = append(req.Topics, tp)
	r, err := old.Do(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	resp := r.(*kmsg.ProduceResponse)
	p := &resp.Topics[0].Partitions[0]
	if n, present, err := protocol.BatchesToRetain(resp.Version, p); p.ErrorCode != 0 || present || n != 5 || err != nil {
		t.Fatalf("old node: code %d, BatchesToRetain %d %v %v", p.ErrorCode, n, present, err)
	}
}
