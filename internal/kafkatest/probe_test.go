package kafkatest

import (
	"context"
	"encoding/binary"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/longhaul-kafka/longhaul/protocol"
)

// produceKey is the Produce API key.
const produceKey = 0

// batchesToRetainTag is KIP-1269's tag in PartitionProduceResponse.
const batchesToRetainTag = 1

// testProbeProduceVersions records which Produce versions Kafka 4.4 offers
// (the log line is what the report quotes) and checks the minimum an
// idempotent producer needs, directly and through the proxy.
func testProbeProduceVersions(t *testing.T, c *Cluster) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, addr := range []string{c.DirectAddr(0), c.ProxiedAddr(0)} {
		av, err := APIVersions(ctx, addr)
		if err != nil {
			t.Fatalf("ApiVersions via %s: %v", addr, err)
		}
		minV, maxV, ok := VersionRange(av, produceKey)
		if !ok {
			t.Fatalf("Kafka %s does not offer Produce", Version)
		}
		t.Logf("Kafka %s via %s offers Produce v%d..v%d (kmsg knows up to v%d)", Version, addr, minV, maxV, kmsg.NewPtrProduceRequest().MaxVersion())
		if maxV < 3 {
			t.Fatalf("Produce max v%d < 3: no idempotent produce", maxV)
		}
		if addr == c.DirectAddr(0) {
			var keys []string
			for _, k := range av.ApiKeys {
				keys = append(keys, fmt.Sprintf("%s:%d-%d", kmsg.NameForKey(k.ApiKey), k.MinVersion, k.MaxVersion))
			}
			sort.Strings(keys)
			t.Logf("all ApiVersions: %s", strings.Join(keys, " "))
		}
	}
}

// produceOnce sends one idempotent batch at version v and returns the
// partition response.
func produceOnce(t *testing.T, ctx context.Context, conn *Conn, v int16, topic string, id [16]byte, batch []byte) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.Version = v
	req.Acks = -1
	req.TimeoutMillis = 30000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic, rt.TopicID = topic, id
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = 0, batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := conn.Request(ctx, req)
	if err != nil {
		t.Fatalf("Produce v%d: %v", v, err)
	}
	pr := resp.(*kmsg.ProduceResponse)
	if len(pr.Topics) != 1 || len(pr.Topics[0].Partitions) != 1 {
		t.Fatalf("Produce v%d: unexpected response shape %+v", v, pr)
	}
	return pr.Topics[0].Partitions[0]
}

// batchesToRetain extracts KIP-1269's tag 1 from a partition response's
// unknown tags (kmsg v1.15 stops at Produce v13 and keeps it there).
func batchesToRetain(p kmsg.ProduceResponseTopicPartition) (n int32, present bool, err error) {
	p.UnknownTags.Each(func(tag uint32, val []byte) {
		if tag != batchesToRetainTag {
			return
		}
		present = true
		if len(val) != 4 {
			err = fmt.Errorf("tag 1 has %d bytes, want 4 (int32)", len(val))
			return
		}
		n = int32(binary.BigEndian.Uint32(val))
	})
	return n, present, err
}

// testProbeProduceResponseTag1 sends an idempotent batch at the highest
// Produce version Kafka 4.4 offers and reports whether the response
// carries KIP-1269's ProducerStateBatchesToRetain (tag 1). It also checks
// the real broker's duplicate handling that longhaul relies on: a retried
// batch is answered with its original offset, not appended again.
func testProbeProduceResponseTag1(t *testing.T, c *Cluster) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const topic = "probe-tag1"
	c.CreateTopic(t, topic, 1, 1, nil)
	av, err := APIVersions(ctx, c.DirectAddr(0))
	if err != nil {
		t.Fatal(err)
	}
	_, maxV, _ := VersionRange(av, produceKey)

	conn, err := Dial(ctx, c.DirectAddr(0))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	pid, epoch, err := InitProducerID(ctx, c.DirectAddr(0))
	if err != nil {
		t.Fatal(err)
	}

	id := c.TopicID(t, topic)
	batch := IdempotentBatch(pid, epoch, 0, [][]byte{[]byte("a"), []byte("b"), []byte("c")})
	first := produceOnce(t, ctx, conn, maxV, topic, id, batch)
	if err := kerr.ErrorForCode(first.ErrorCode); err != nil {
		t.Fatalf("Produce v%d: %v", maxV, err)
	}
	// protocol.BatchesToRetain is what longhaul uses; the raw look at the
	// unknown tags also catches a tag 1 sent below v14.
	pn, ppresent, err := protocol.BatchesToRetain(maxV, &first)
	if err != nil {
		t.Fatal(err)
	}
	n, present, err := batchesToRetain(first)
	if err != nil {
		t.Fatal(err)
	}
	if ppresent != present || (present && pn != n) {
		t.Errorf("protocol.BatchesToRetain = %d, %v; raw tag 1 = %d, %v", pn, ppresent, n, present)
	}
	if !ppresent && pn != 5 {
		t.Errorf("protocol.BatchesToRetain without the field = %d, want the default 5", pn)
	}
	var tags []uint32
	first.UnknownTags.Each(func(tag uint32, _ []byte) { tags = append(tags, tag) })
	if present {
		t.Logf("Kafka %s Produce v%d response CARRIES tag 1 (KIP-1269 ProducerStateBatchesToRetain) = %d", Version, maxV, n)
		if n < 5 {
			t.Errorf("ProducerStateBatchesToRetain = %d, KIP-1269 says at least 5", n)
		}
	} else {
		t.Logf("Kafka %s Produce v%d response has NO tag 1 (KIP-1269 not implemented): limit stays 5; unknown tags %v, CurrentLeader %+v",
			Version, maxV, tags, first.CurrentLeader)
		if maxV >= 14 {
			t.Errorf("broker offers Produce v%d but omits tag 1", maxV)
		}
	}

	// The retry must be a duplicate: same base offset, nothing appended.
	again := produceOnce(t, ctx, conn, maxV, topic, id, batch)
	if err := kerr.ErrorForCode(again.ErrorCode); err != nil {
		t.Fatalf("retried batch: %v", err)
	}
	if again.BaseOffset != first.BaseOffset {
		t.Fatalf("retried batch got offset %d, first try %d: appended twice", again.BaseOffset, first.BaseOffset)
	}
	next := produceOnce(t, ctx, conn, maxV, topic, id, IdempotentBatch(pid, epoch, 3, [][]byte{[]byte("d")}))
	if next.ErrorCode != 0 || next.BaseOffset != first.BaseOffset+3 {
		t.Fatalf("next batch: error %d offset %d, want offset %d", next.ErrorCode, next.BaseOffset, first.BaseOffset+3)
	}
	gap := produceOnce(t, ctx, conn, maxV, topic, id, IdempotentBatch(pid, epoch, 10, [][]byte{[]byte("x")}))
	if !isCode(gap.ErrorCode, kerr.OutOfOrderSequenceNumber) {
		t.Fatalf("sequence gap answered with %v, want OUT_OF_ORDER_SEQUENCE_NUMBER", kerr.ErrorForCode(gap.ErrorCode))
	}

	// Does 4.4 know KIP-1269's topic config? Unknown configs are rejected.
	err = c.createTopic("probe-retain-20", 1, 1, map[string]string{"producer.state.batches.to.retain": "20"})
	t.Logf("CreateTopics with producer.state.batches.to.retain=20: %v", errOrOK(err))
}

func isCode(code int16, want error) bool { return kerr.ErrorForCode(code) == want }

func errOrOK(err error) string {
	if err == nil {
		return "accepted"
	}
	return "rejected: " + err.Error()
}
