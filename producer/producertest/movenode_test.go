package producertest_test

// Tests of Cluster.MoveNode, one per promise of its doc comment.

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/longhaul-kafka/longhaul/producer"
	"github.com/longhaul-kafka/longhaul/producer/producertest"
)

// TestMoveNodeNewAddress: the node answers at a new port of 127.0.0.1
// that Addrs and Metadata give, its old address refuses connections, the
// partition keeps its leader and log, and a producer that wrote to the
// node before the move finds it again and appends after what it wrote.
func TestMoveNodeNewAddress(t *testing.T) {
	c := producertest.NewCluster(t, 2, producertest.Topic{Name: "t", Partitions: 2})
	require.Equal(t, int32(1), c.Leader("t", 1))
	p := newProducer(t, c)
	require.NoError(t, produce(t, p, "t", 1, "before"))

	old := c.Addrs()[1]
	addr, err := c.MoveNode(1)
	require.NoError(t, err)
	assert.NotEqual(t, old, addr, "a new address")
	host, _, err := net.SplitHostPort(addr)
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1", host)
	assert.Equal(t, addr, c.Addrs()[1], "Addrs gives the new address")
	assert.Equal(t, int32(1), c.Leader("t", 1), "the partition keeps its leader")

	_, err = net.Dial("tcp", old)
	require.Error(t, err, "the old address stops accepting")
	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err, "the new address accepts")
	conn.Close()

	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addr()))
	require.NoError(t, err)
	defer cl.Close()
	md, err := kmsg.NewPtrMetadataRequest().RequestWith(t.Context(), cl)
	require.NoError(t, err)
	var announced []string
	for _, b := range md.Brokers {
		if b.NodeID == 1 {
			announced = append(announced, net.JoinHostPort(b.Host, fmt.Sprint(b.Port)))
		}
	}
	assert.Equal(t, []string{addr}, announced, "Metadata gives the new address")

	require.NoError(t, produce(t, p, "t", 1, "after"), "the producer finds the node again")
	assert.Equal(t, []string{"before", "after"}, values(c.Records("t", 1)), "the log is kept")
}

// moveWithAnswerPending appends one record to t/1 (led by node 1) whose
// answer is lost (DropProduceResponses), moves node 1, and returns the
// partition's log and the record's outcome. The producer's request timeout
// is an hour, so only the move (closing the connection that waits for the
// answer) makes it retry. With expire, the cluster forgets every producer's
// deduplication state before the move: the negative control.
func moveWithAnswerPending(t *testing.T, expire bool) ([]string, error) {
	c := producertest.NewCluster(t, 2, producertest.Topic{Name: "t", Partitions: 2})
	p := newProducer(t, c, producer.RequestTimeout(time.Hour), producer.DeliveryTimeout(2*time.Hour))
	require.NoError(t, produce(t, p, "t", 1, "first")) // the producer id and the connection to node 1

	c.DropProduceResponses(1, 1)
	done := make(chan error, 1)
	r := &producer.Record{Topic: "t", Value: []byte("x")}
	r.SetPartition(1)
	p.Produce(t.Context(), r, func(_ *producer.Record, err error) { done <- err })
	require.Eventually(t, func() bool { return len(c.Records("t", 1)) == 2 }, time.Minute, time.Millisecond,
		"the record is appended, its answer lost")
	if expire {
		c.ExpireProducerIDs()
	}
	_, err := c.MoveNode(1)
	require.NoError(t, err)
	select {
	case err = <-done:
	case <-time.After(time.Minute):
		t.Fatal("no outcome a minute after the move: the connection waiting for the lost answer was not closed")
	}
	return values(c.Records("t", 1)), err
}

// TestMoveNodeKeepsDeduplication: the old process's connections close at
// once, so the answer it never wrote is lost and the producer retries at
// the new address; the new process has the producer's deduplication
// state, so the retry is answered as a duplicate and the record is in the
// log once.
func TestMoveNodeKeepsDeduplication(t *testing.T) {
	log, err := moveWithAnswerPending(t, false)
	require.NoError(t, err)
	assert.Equal(t, []string{"first", "x"}, log, "appended once")
}

// TestMoveNodeKeepsDeduplicationNegativeControl: the same with the state
// forgotten writes the retry again, so TestMoveNodeKeepsDeduplication
// would see a move that lost it.
func TestMoveNodeKeepsDeduplicationNegativeControl(t *testing.T) {
	log, err := moveWithAnswerPending(t, true)
	require.NoError(t, err)
	assert.Equal(t, []string{"first", "x", "x"}, log, "without the state the retry is a second append")
}

// TestMoveNodeEndsDropProduceResponses: answers that DropProduceResponses
// armed on the node would lose are written by the process that takes
// over; with an hour's request timeout a lost answer would leave the
// record without an outcome. (With the drops carried over to the new
// process, as a move of the same process would, this test fails.)
func TestMoveNodeEndsDropProduceResponses(t *testing.T) {
	c := producertest.NewCluster(t, 2, producertest.Topic{Name: "t", Partitions: 2})
	p := newProducer(t, c, producer.RequestTimeout(time.Hour), producer.DeliveryTimeout(2*time.Hour))
	require.NoError(t, produce(t, p, "t", 1, "a"))
	c.DropProduceResponses(1, 3)
	_, err := c.MoveNode(1)
	require.NoError(t, err)
	done := make(chan error, 1)
	r := &producer.Record{Topic: "t", Value: []byte("b")}
	r.SetPartition(1)
	p.Produce(t.Context(), r, func(_ *producer.Record, err error) { done <- err })
	select {
	case err = <-done:
		require.NoError(t, err)
	case <-time.After(time.Minute):
		t.Fatal("no answer a minute after the move: the drops armed on the old process went on")
	}
	assert.Equal(t, []string{"a", "b"}, values(c.Records("t", 1)))
}

// TestMoveNodeErrors: an unknown node, or a closed cluster, is an error
// and moves nothing.
func TestMoveNodeErrors(t *testing.T) {
	c, err := producertest.Start(2, producertest.Topic{Name: "t"})
	require.NoError(t, err)
	addrs := c.Addrs()
	for _, id := range []int32{-1, 2} {
		addr, err := c.MoveNode(id)
		require.Error(t, err, "node %d", id)
		assert.Empty(t, addr)
	}
	assert.Equal(t, addrs, c.Addrs(), "nothing moved")
	conn, err := net.Dial("tcp", addrs[1])
	require.NoError(t, err, "node 1 still accepts at its address")
	conn.Close()

	require.NoError(t, c.Close())
	addr, err := c.MoveNode(1)
	require.Error(t, err, "closed")
	assert.Empty(t, addr)
	assert.Equal(t, addrs, c.Addrs(), "nothing moved after Close")
}

// A failover test: the node leading a partition comes back at another
// address, and the producer carries on there.
func ExampleCluster_MoveNode() {
	c, err := producertest.Start(2, producertest.Topic{Name: "orders", Partitions: 2})
	if err != nil {
		panic(err)
	}
	defer c.Close()

	p, err := producer.New(producer.BootstrapServers(c.Addr()))
	if err != nil {
		panic(err)
	}
	defer p.Close(context.Background())
	send := func(v string) {
		r := &producer.Record{Topic: "orders", Value: []byte(v)}
		r.SetPartition(1) // led by node 1
		if err := p.ProduceSync(context.Background(), r).FirstErr(); err != nil {
			panic(err)
		}
	}

	send("order-1")
	old := c.Addrs()[1]
	if _, err := c.MoveNode(1); err != nil {
		panic(err)
	}
	fmt.Println("node 1 moved:", c.Addrs()[1] != old)
	send("order-2")
	for _, rec := range c.Records("orders", 1) {
		fmt.Println(rec.Offset, string(rec.Value))
	}
	// Output:
	// node 1 moved: true
	// 0 order-1
	// 1 order-2
}
