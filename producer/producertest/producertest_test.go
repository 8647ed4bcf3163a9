package producertest_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/longhaul-kafka/longhaul/producer"
	"github.com/longhaul-kafka/longhaul/producer/producertest"
)

func newProducer(t *testing.T, c *producertest.Cluster, opts ...producer.Opt) *producer.Producer {
	t.Helper()
	p, err := producer.New(append([]producer.Opt{producer.BootstrapServers(c.Addr()), producer.Linger(time.Millisecond),
		producer.RetryBackoff(5 * time.Millisecond), producer.RequestTimeout(time.Second)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() { p.Close(context.Background()) })
	return p
}

func produce(t *testing.T, p *producer.Producer, topic string, partition int32, values ...string) error {
	t.Helper()
	recs := make([]*producer.Record, len(values))
	for i, v := range values {
		recs[i] = &producer.Record{Topic: topic, Key: []byte("k"), Value: []byte(v),
			Headers: []producer.Header{{Key: "h", Value: []byte(v)}}}
		recs[i].SetPartition(partition)
	}
	return p.ProduceSync(context.Background(), recs...).FirstErr()
}

func values(rs []producertest.Record) []string {
	var out []string
	for _, r := range rs {
		out = append(out, string(r.Value))
	}
	return out
}

func TestStartDefaultsAndRecords(t *testing.T) {
	c := producertest.NewCluster(t, 0, producertest.Topic{Name: "a"}, producertest.Topic{Name: "b", Partitions: 3, Window: 50})
	require.Len(t, c.Addrs(), 1, "0 nodes means 1")
	assert.Equal(t, c.Addrs()[0], c.Addr())
	assert.Equal(t, 5, c.Window("a"), "window 0 means 5")
	assert.Equal(t, 50, c.Window("b"))
	assert.Zero(t, c.Window("nope"))
	assert.Nil(t, c.Records("a", 1), "a has 1 partition")
	assert.Nil(t, c.Records("nope", 0))
	assert.Equal(t, int32(-1), c.Leader("nope", 0))

	p := newProducer(t, c)
	before := time.Now().Add(-time.Second)
	require.NoError(t, produce(t, p, "b", 2, "x", "y"))
	assert.Equal(t, 50, p.InFlightLimit("b", 2), "the producer learned the window")
	rs := c.Records("b", 2)
	require.Len(t, rs, 2)
	assert.Equal(t, []string{"x", "y"}, values(rs))
	for i, r := range rs {
		assert.Equal(t, int64(i), r.Offset)
		assert.Equal(t, int32(i), r.Sequence)
		assert.Equal(t, p.Stats().ProducerID, r.ProducerID)
		assert.Equal(t, []byte("k"), r.Key)
		assert.Equal(t, []producertest.Header{{Key: "h", Value: r.Value}}, r.Headers)
		assert.True(t, r.Timestamp.After(before), "timestamp %v", r.Timestamp)
	}
	// A copy: changing it leaves the log alone.
	rs[0].Value[0] = 'z'
	assert.Equal(t, "x", string(c.Records("b", 2)[0].Value))

	require.Error(t, c.CreateTopic(producertest.Topic{Name: "b"}), "exists")
	require.Error(t, c.CreateTopic(producertest.Topic{Name: "w", Window: 3}), "windows 1-4 are invalid")
	require.NoError(t, c.CreateTopic(producertest.Topic{Name: "c", Partitions: 2, Window: 20}))
	require.NoError(t, produce(t, p, "c", 1, "c1"))
	assert.Equal(t, []string{"c1"}, values(c.Records("c", 1)))

	_, err := producertest.Start(1, producertest.Topic{Name: "bad", Window: 2})
	require.Error(t, err)
	require.NoError(t, c.Close())
	require.NoError(t, c.Close(), "later calls return nil")
}

func TestFaults(t *testing.T) {
	c := producertest.NewCluster(t, 2, producertest.Topic{Name: "t", Partitions: 2, Window: 20})
	assert.Equal(t, int32(0), c.Leader("t", 0))
	assert.Equal(t, int32(1), c.Leader("t", 1), "partition p led by node p % nodes")
	p := newProducer(t, c)
	require.NoError(t, produce(t, p, "t", 0, "0"))

	// A non-retriable error reaches the record.
	c.InjectError("t", 0, kerr.InvalidRecord.Code, 1)
	require.ErrorIs(t, produce(t, p, "t", 0, "bad"), kerr.InvalidRecord)
	// A retriable one is retried; n <= 0 clears what is left.
	c.InjectError("t", 0, kerr.NotEnoughReplicas.Code, 1000)
	c.InjectError("t", 0, 0, 0)
	require.NoError(t, produce(t, p, "t", 0, "1"))

	// Dropped responses: appended once, retried, deduplicated.
	c.DropProduceResponses(0, 1)
	require.NoError(t, produce(t, p, "t", 0, "2"))
	c.DropConnections(0)
	require.NoError(t, produce(t, p, "t", 0, "3"))

	// Leader moves; the producer follows.
	require.NoError(t, c.MoveLeader("t", 0, 1))
	assert.Equal(t, int32(1), c.Leader("t", 0))
	require.NoError(t, produce(t, p, "t", 0, "4"))
	require.Error(t, c.MoveLeader("t", 0, 7), "no node 7")

	c.ExpireProducerIDs()
	c.SetRTT(1, 20*time.Millisecond)
	require.NoError(t, produce(t, p, "t", 0, "5"))
	c.SetRTT(1, 0)

	require.NoError(t, c.SetWindow("t", 40))
	assert.Equal(t, 40, c.Window("t"))
	require.NoError(t, produce(t, p, "t", 0, "6"))
	assert.Equal(t, 40, p.InFlightLimit("t", 0))

	assert.Equal(t, []string{"0", "1", "2", "3", "4", "5", "6"}, values(c.Records("t", 0)), "each record once, in order")
}

// A test of code that produces: start a cluster, point the producer at it,
// read back what landed.
func Example() {
	c, err := producertest.Start(1, producertest.Topic{Name: "orders", Partitions: 1, Window: 50})
	if err != nil {
		panic(err)
	}
	defer c.Close()

	p, err := producer.New(producer.BootstrapServers(c.Addr()),
		producer.RequestTimeout(time.Second)) // retry a lost answer soon
	if err != nil {
		panic(err)
	}
	defer p.Close(context.Background())

	// Lose the first answer: the producer retries, the broker deduplicates.
	c.DropProduceResponses(0, 1)
	r := &producer.Record{Topic: "orders", Value: []byte("order-1")}
	if err := p.ProduceSync(context.Background(), r).FirstErr(); err != nil {
		panic(err)
	}
	for _, rec := range c.Records("orders", 0) {
		fmt.Println(rec.Offset, string(rec.Value))
	}
	fmt.Println("window:", p.InFlightLimit("orders", 0))
	// Output:
	// 0 order-1
	// window: 50
}
