package producertest_test

// Tests of what Cluster.Records gives back: nulls as nil, and -1 producer
// fields for records any Kafka client wrote without idempotence.

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/longhaul-kafka/longhaul/producer"
	"github.com/longhaul-kafka/longhaul/producer/producertest"
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
