package producertest_test

// Promises of package producertest's docs that no test checked: any Kafka
// client can use the cluster, Record's nil-when-null and -1 for
// non-idempotent producers, MoveLeader's NOT_LEADER_OR_FOLLOWER from the
// old leader, ExpireProducerIDs forgetting the deduplication state, and
// every method being safe for concurrent use while producers are connected.

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/longhaul-kafka/longhaul/producer"
	"github.com/longhaul-kafka/longhaul/producer/producertest"
	"github.com/longhaul-kafka/longhaul/protocol"
)

// TestNullsStayNull: the producer's nil Key, Value and header Value are
// nulls, and Cluster.Records gives them back as nil, while empty ones stay
// empty (non-nil): "Key and Value are nil when null", "nil is a null key",
// "nil is a null value", "A nil Value is a null header value".
func TestNullsStayNull(t *testing.T) {
	c := producertest.NewCluster(t, 1, producertest.Topic{Name: "t"})
	p := newProducer(t, c)
	null := &producer.Record{Topic: "t", Headers: []producer.Header{{Key: "h"}}}
	empty := &producer.Record{Topic: "t", Key: []byte{}, Value: []byte{}, Headers: []producer.Header{{Key: "h", Value: []byte{}}}}
	require.NoError(t, p.ProduceSync(t.Context(), null, empty).FirstErr())
	rs := c.Records("t", 0)
	require.Len(t, rs, 2)
	assert.Nil(t, rs[0].Key)
	assert.Nil(t, rs[0].Value)
	require.Len(t, rs[0].Headers, 1)
	assert.Nil(t, rs[0].Headers[0].Value)
	assert.NotNil(t, rs[1].Key)
	assert.Empty(t, rs[1].Key)
	assert.NotNil(t, rs[1].Value)
	assert.Empty(t, rs[1].Value)
	require.Len(t, rs[1].Headers, 1)
	assert.NotNil(t, rs[1].Headers[0].Value)
}

// TestAnyKafkaClient: the package doc says any Kafka client can use the
// cluster, and Record says ProducerID, ProducerEpoch and Sequence are -1
// for records of non-idempotent producers: franz-go's kgo, idempotence
// off, writes records that read back that way.
func TestAnyKafkaClient(t *testing.T) {
	c := producertest.NewCluster(t, 2, producertest.Topic{Name: "t", Partitions: 2})
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addr()), kgo.DisableIdempotentWrite(),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	require.NoError(t, err)
	defer cl.Close()
	for part := range int32(2) {
		res := cl.ProduceSync(t.Context(), &kgo.Record{Topic: "t", Partition: part, Value: []byte(fmt.Sprint("v", part))})
		require.NoError(t, res.FirstErr())
	}
	for part := range int32(2) {
		rs := c.Records("t", part)
		require.Len(t, rs, 1, "partition %d", part)
		assert.Equal(t, fmt.Sprint("v", part), string(rs[0].Value))
		assert.Equal(t, int64(-1), rs[0].ProducerID)
		assert.Equal(t, int16(-1), rs[0].ProducerEpoch)
		assert.Equal(t, int32(-1), rs[0].Sequence)
	}
}

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

// TestConcurrentUse: "Every Cluster method is safe for concurrent use,
// also while producers are connected" (run with -race): every method is
// called from its own goroutine while a producer writes, and the records
// it got acknowledged are in the log once each, in order.
func TestConcurrentUse(t *testing.T) {
	c := producertest.NewCluster(t, 2, producertest.Topic{Name: "t", Partitions: 2, Window: 20})
	p := newProducer(t, c)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	calls := []func(i int){
		func(int) { c.Addr(); c.Addrs() },
		func(int) { c.Records("t", 0); c.Records("t", 1) },
		func(int) { c.Leader("t", 1); c.Window("t") },
		func(i int) { _ = c.SetWindow("t", 5+i%30) },
		func(i int) { c.SetRTT(int32(i%2), time.Duration(i%3)*time.Millisecond) },
		func(i int) { _ = c.MoveLeader("t", 1, int32(i%2)) },
		func(int) { c.InjectError("t", 0, kerr.NotEnoughReplicas.Code, 1) },
		func(i int) { c.DropProduceResponses(int32(i%2), 1) },
		func(i int) { c.DropConnections(int32(i % 2)) },
		func(i int) { _ = c.CreateTopic(producertest.Topic{Name: fmt.Sprint("x", i)}) },
	}
	for _, call := range calls {
		wg.Go(func() {
			// Ten rounds each: faults that never stop would keep any
			// producer from delivering.
			for i := range 10 {
				select {
				case <-stop:
					return
				case <-time.After(20 * time.Millisecond):
				}
				call(i)
			}
		})
	}
	var want []string
	for i := range 40 {
		v := fmt.Sprint(i)
		if err := produce(t, p, "t", 1, v); err == nil {
			want = append(want, v)
		} else {
			require.True(t, !producer.IsFateUnknown(err), "record %d: %v", i, err)
		}
	}
	close(stop)
	wg.Wait()
	c.SetRTT(0, 0)
	c.SetRTT(1, 0)
	require.NotEmpty(t, want)
	assert.Equal(t, want, values(c.Records("t", 1)))
	require.NoError(t, c.Close())
}
