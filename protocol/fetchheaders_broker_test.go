package protocol_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/longhaul-kafka/longhaul/internal/broker"
	"github.com/longhaul-kafka/longhaul/internal/testkit"
	"github.com/longhaul-kafka/longhaul/protocol"
)

// TestFetchHeadersEmbedded reads back batch headers from the embedded
// broker: each batch's producer id, epoch, base sequence and record count
// as produced, from the batch holding the asked offset; a future
// CurrentLeaderEpoch and a replica that does not lead are refused, not
// served. TopicConfigValue reads a topic's cleanup.policy.
func TestFetchHeadersEmbedded(t *testing.T) {
	cl := testkit.StartCluster(t, broker.Config{Nodes: 2, Topics: []broker.TopicConfig{{Name: "rb", Partitions: 1}}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := protocol.Dial(ctx, cl.Addrs()[0], protocol.DialConfig{ClientID: "it"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	md, err := protocol.Metadata(ctx, c, []string{"rb"})
	if err != nil {
		t.Fatal(err)
	}
	topic := md.Topics["rb"]
	pid, epoch, _, err := protocol.InitProducerID(ctx, c, -1, -1, 0)
	if err != nil {
		t.Fatal(err)
	}
	var bb protocol.BatchBuilder
	seq := int32(0)
	for i := range 4 {
		bb.Reset()
		for range i + 1 {
			bb.Append(1000, nil, []byte("v"), nil)
		}
		raw, err := bb.Build(nil, protocol.BatchHeader{ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq, Compression: protocol.CodecLz4})
		if err != nil {
			t.Fatal(err)
		}
		seq += int32(i + 1)
		req := kmsg.NewPtrProduceRequest()
		req.Acks = -1
		req.TimeoutMillis = 10000
		tp := kmsg.NewProduceRequestTopic()
		tp.Topic, tp.TopicID = "rb", topic.ID
		pp := kmsg.NewProduceRequestTopicPartition()
		pp.Records = raw
		tp.Partitions = append(tp.Partitions, pp)
		req.Topics = append(req.Topics, tp)
		if r, err := c.Do(ctx, req); err != nil || r.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode != 0 {
			t.Fatalf("produce %d: %v", i, err)
		}
	}
	_, leaderEpoch := cl.Leader("rb", 0)
	q := protocol.HeaderFetch{Topic: "rb", TopicID: topic.ID, Partition: 0, Offset: 2, LeaderEpoch: leaderEpoch}
	res, err := protocol.FetchHeaders(ctx, c, q)
	if err != nil || res.ErrorCode != 0 {
		t.Fatalf("%v %+v", err, res)
	}
	// Offsets 0 | 1-2 | 3-5 | 6-9: offset 2 is inside the second batch.
	if len(res.Batches) != 3 || res.Next != 10 || res.HighWatermark != 10 {
		t.Fatalf("%d batches, next %d, hw %d", len(res.Batches), res.Next, res.HighWatermark)
	}
	for i, h := range res.Batches {
		n := int32(i + 2)
		if h.ProducerID != pid || h.ProducerEpoch != epoch || h.NumRecords != n || h.BaseSequence != []int32{1, 3, 6}[i] {
			t.Errorf("batch %d: %+v", i, h)
		}
	}
	for _, tc := range []struct {
		epoch int32
		code  int16
	}{{leaderEpoch + 1, kerr.UnknownLeaderEpoch.Code}} {
		q.LeaderEpoch = tc.epoch
		if res, err := protocol.FetchHeaders(ctx, c, q); err != nil || res.ErrorCode != tc.code {
			t.Errorf("epoch %d: %v %+v, want code %d", tc.epoch, err, res, tc.code)
		}
	}
	q.LeaderEpoch = leaderEpoch
	if v, found, code, err := protocol.TopicConfigValue(ctx, c, "rb", "cleanup.policy"); err != nil || code != 0 || !found || v != "delete" {
		t.Errorf("cleanup.policy: %q %v %d %v", v, found, code, err)
	}
	if _, found, code, err := protocol.TopicConfigValue(ctx, c, "rb", "no.such.config"); err != nil || code != 0 || found {
		t.Errorf("no.such.config: %v %d %v", found, code, err)
	}
	if _, _, code, err := protocol.TopicConfigValue(ctx, c, "missing", "cleanup.policy"); err != nil || code != kerr.UnknownTopicOrPartition.Code {
		t.Errorf("missing topic: %d %v", code, err)
	}
	other, err := protocol.Dial(ctx, cl.Addrs()[1], protocol.DialConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if res, err := protocol.FetchHeaders(ctx, other, q); err != nil || res.ErrorCode != kerr.NotLeaderForPartition.Code {
		t.Errorf("follower: %v %+v", err, res)
	}
}
