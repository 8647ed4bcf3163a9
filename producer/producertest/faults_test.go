package producertest_test

// Tests of the Cluster's faults as a raw Kafka client sees them:
// MoveLeader's NOT_LEADER_OR_FOLLOWER from the old leader, and
// ExpireProducerIDs forgetting the deduplication state.

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/longhaul-kafka/longhaul/producer/producertest"
	"github.com/longhaul-kafka/longhaul/protocol"
)

// produceRaw sends one idempotent batch of one record to node for t/0 and
// returns the partition's error code.
func produceRaw(t *testing.T, cl *kgo.Client, node int32, id int64, epoch int16, seq int32) int16 {
	t.Helper()
	var b protocol.BatchBuilder
	b.Reset()
	b.Append(time.Now().UnixMilli(), nil, []byte(fmt.Sprint("seq", seq)), nil)
	batch, err := b.Build(nil, protocol.BatchHeader{ProducerID: id, ProducerEpoch: epoch, BaseSequence: seq})
	require.NoError(t, err)
	req := kmsg.NewPtrProduceRequest()
	req.Acks = -1
	req.TimeoutMillis = 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "t"
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(t.Context(), cl.Broker(int(node)))
	require.NoError(t, err)
	require.Len(t, resp.Topics, 1)
	require.Len(t, resp.Topics[0].Partitions, 1)
	return resp.Topics[0].Partitions[0].ErrorCode
}

// TestMoveLeaderAndExpiry: after MoveLeader the old leader answers
// NOT_LEADER_OR_FOLLOWER and the new one appends; a sequence gap is
// OUT_OF_ORDER_SEQUENCE_NUMBER until ExpireProducerIDs forgets the
// producer's state, after which the broker accepts any sequence (what
// Kafka does with no state, KIP-854).
func TestMoveLeaderAndExpiry(t *testing.T) {
	c := producertest.NewCluster(t, 2, producertest.Topic{Name: "t"})
	// Produce v9 at most: topics by name.
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addr()), kgo.MaxVersions(kversion.V2_8_0()))
	require.NoError(t, err)
	defer cl.Close()
	initReq := kmsg.NewPtrInitProducerIDRequest()
	initReq.TransactionTimeoutMillis = -1
	init, err := initReq.RequestWith(t.Context(), cl)
	require.NoError(t, err)
	require.Zero(t, init.ErrorCode)
	id, epoch := init.ProducerID, init.ProducerEpoch

	require.Zero(t, produceRaw(t, cl, 0, id, epoch, 0))
	require.NoError(t, c.MoveLeader("t", 0, 1))
	assert.Equal(t, kerr.NotLeaderForPartition.Code, produceRaw(t, cl, 0, id, epoch, 1), "old leader")
	require.Zero(t, produceRaw(t, cl, 1, id, epoch, 1), "new leader")
	assert.Equal(t, kerr.OutOfOrderSequenceNumber.Code, produceRaw(t, cl, 1, id, epoch, 7), "a gap, state kept")
	c.ExpireProducerIDs()
	require.Zero(t, produceRaw(t, cl, 1, id, epoch, 7), "no state: any sequence is accepted")
	var seqs []int32
	for _, r := range c.Records("t", 0) {
		seqs = append(seqs, r.Sequence)
	}
	assert.Equal(t, []int32{0, 1, 7}, seqs)
}
