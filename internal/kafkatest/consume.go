package kafkatest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Consume reads topic from the earliest offset of every partition with an
// independent franz-go client (direct listeners, no proxy, no consumer
// group, read_committed off) until n records have arrived, and returns them
// by partition in log order. It fails the test if n records do not arrive
// within timeout, or if more than n arrive within one poll after that (the
// extra ones are returned too, for the caller's diagnosis, when the test
// does not fail first).
func (c *Cluster) Consume(t testing.TB, topic string, n int, timeout time.Duration) map[int32][]*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(strings.Split(c.Bootstrap(), ",")...),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxBytes(64<<20),
	)
	if err != nil {
		t.Fatalf("kafkatest: consumer: %v", err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	got := make(map[int32][]*kgo.Record)
	total := 0
	for total < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("kafkatest: consumed %d of %d records of %s in %v", total, n, topic, timeout)
		}
		for _, e := range fs.Errors() {
			t.Logf("kafkatest: consume %s/%d: %v", e.Topic, e.Partition, e.Err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			got[r.Partition] = append(got[r.Partition], r)
			total++
		})
	}
	// Anything beyond n (duplicates) that is already fetched or arrives
	// shortly after is included so the checker sees it.
	extraCtx, cancelExtra := context.WithTimeout(context.Background(), time.Second)
	defer cancelExtra()
	fs := cl.PollFetches(extraCtx)
	fs.EachRecord(func(r *kgo.Record) { got[r.Partition] = append(got[r.Partition], r) })
	return got
}

// latestOffsetsRequest asks for the log end offsets (timestamp -1, as a
// consumer: replica id -1) of parts of topic, with no leader epoch check.
func latestOffsetsRequest(topic string, parts ...int32) *kmsg.ListOffsetsRequest {
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	for _, p := range parts {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = p, -1, -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	return req
}

// EndOffsets returns each partition's log end offset (ListOffsets latest,
// asked of the partition's leader over the DIRECT listener). For a topic
// written only by non-transactional producers it is the number of records
// in the partition, duplicates included, which is what lets a checker read
// everything with [Cluster.Consume] instead of stopping at the expected
// count. It fails the test on error.
func (c *Cluster) EndOffsets(t testing.TB, topic string, partitions int32) map[int32]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	out := make(map[int32]int64, partitions)
	for p := range partitions {
		leader := c.Partition(t, topic, p).Leader
		if leader < 0 || int(leader) >= len(c.nodes) {
			t.Fatalf("kafkatest: %s/%d has no leader (%d)", topic, p, leader)
		}
		resp, err := requestNode(ctx, c.nodes[leader].directAddr, latestOffsetsRequest(topic, p))
		if err != nil {
			t.Fatalf("kafkatest: ListOffsets %s/%d: %v", topic, p, err)
		}
		for _, tr := range resp.(*kmsg.ListOffsetsResponse).Topics {
			for _, pr := range tr.Partitions {
				if pr.ErrorCode != 0 {
					t.Fatalf("kafkatest: %v", &ResponseError{Op: "ListOffsets", Resource: fmt.Sprintf("%s/%d", topic, p), Err: kerr.ErrorForCode(pr.ErrorCode)})
				}
				out[pr.Partition] = pr.Offset
			}
		}
	}
	return out
}
