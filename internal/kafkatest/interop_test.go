package kafkatest

import (
	"context"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// seqProducer produces n records with franz-go's idempotent producer in
// the background, record i to partition i%partitions with value "<i>", at
// most perTick records every 10 ms so that faults injected meanwhile land
// while records are in flight.
type seqProducer struct {
	acked atomic.Int64
	done  chan struct{}
	// Set before done is closed.
	want     map[int32][][]byte
	firstErr error
}

func startSeq(cl *kgo.Client, topic string, n, partitions, perTick int) *seqProducer {
	s := &seqProducer{done: make(chan struct{}), want: make(map[int32][][]byte)}
	go func() {
		defer close(s.done)
		var (
			mu sync.Mutex
			wg sync.WaitGroup
		)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for i := range n {
			if i > 0 && i%perTick == 0 {
				<-tick.C
			}
			p := int32(i % partitions)
			v := []byte(strconv.Itoa(i))
			s.want[p] = append(s.want[p], v)
			wg.Add(1)
			cl.Produce(context.Background(), &kgo.Record{Topic: topic, Partition: p, Value: v}, func(_ *kgo.Record, err error) {
				defer wg.Done()
				if err != nil {
					mu.Lock()
					if s.firstErr == nil {
						s.firstErr = err
					}
					mu.Unlock()
					return
				}
				s.acked.Add(1)
			})
		}
		wg.Wait()
	}()
	return s
}

// waitAcked waits until k records are acknowledged or producing ended.
func (s *seqProducer) waitAcked(k int64) {
	for s.acked.Load() < k {
		select {
		case <-s.done:
			return
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// wait waits for every callback and returns the acknowledged values per
// partition, failing the test on any produce error (kgo retries until its
// delivery timeout, so an error is a failed run).
func (s *seqProducer) wait(t *testing.T) map[int32][][]byte {
	t.Helper()
	<-s.done
	if s.firstErr != nil {
		t.Fatalf("kgo produce: %v", s.firstErr)
	}
	return s.want
}

// initProducerID makes cl fetch its producer id with one record to a side
// topic, so that connection cuts start on an idempotent session (kgo gives
// up on InitProducerId after a few failed requests).
func initProducerID(t *testing.T, c *Cluster, cl *kgo.Client) {
	t.Helper()
	c.CreateTopic(t, "warmup", 1, int16(c.Nodes()), nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "warmup", Value: []byte("w")}).FirstErr(); err != nil {
		t.Fatalf("warm-up produce: %v", err)
	}
}

// testKgoIdempotentThroughProxyWithCuts is the harness sanity test: franz-go's
// idempotent producer writes through the proxies (2 ms one-way delay) while
// connections are cut at random, and an independent direct consumer must
// read every record exactly once, in order.
func testKgoIdempotentThroughProxyWithCuts(t *testing.T, c *Cluster) {
	const topic, n, partitions = "kgo-cuts", 10000, 3
	c.CreateTopic(t, topic, partitions, 1, nil)
	c.SetDelay(2 * time.Millisecond)
	t.Cleanup(func() { c.SetDelay(0) })
	prod := c.Client(t,
		kgo.SeedBrokers(strings.Split(c.ProxiedBootstrap(), ",")...),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(time.Millisecond),
		kgo.ProducerBatchMaxBytes(4<<10), // many small batches in flight
	)
	initProducerID(t, c, prod)
	stop, err := c.Proxy(0).CutRandomly(rand.New(rand.NewPCG(8, 8)), 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	sp := startSeq(prod, topic, n, partitions, 50) // >= 2 s of producing
	<-sp.done
	stop()
	want := sp.wait(t)
	st := c.Proxy(0).Stats()
	t.Logf("proxy: %d connections accepted, %d cut, %d bytes to broker", st.Accepted, st.Cuts, st.BytesToTarget)
	if st.Cuts == 0 {
		t.Fatalf("no connection was cut: the test did not exercise retries")
	}
	got := c.Consume(t, topic, n, time.Minute)
	if err := CheckExactlyOnceInOrder(want, got); err != nil {
		t.Fatal(err)
	}
}

// TestThreeNode runs the checks that need a 3-voter KRaft cluster on one
// cluster (three JVMs take 20-40 s to start on a shared 2-core machine).
// Each subtest uses its own topic.
func TestThreeNode(t *testing.T) {
	c := Start(t, Options{Nodes: 3})
	t.Run("KgoLeaderMovesWhileProducing", func(t *testing.T) { testKgoLeaderMovesWhileProducing(t, c) })
	t.Run("LonghaulLeaderMovesWhileProducing", func(t *testing.T) { testLonghaulLeaderMovesWhileProducing(t, c) })
}

// testKgoLeaderMovesWhileProducing moves the leader of partition 0 twice
// while franz-go produces to it, and checks exactly once, in order, plus
// the leader epoch bumps.
func testKgoLeaderMovesWhileProducing(t *testing.T, c *Cluster) {
	const topic, n, partitions = "moves", 20000, 3
	c.CreateTopic(t, topic, partitions, 3, map[string]string{"min.insync.replicas": "2"})
	before := c.Partition(t, topic, 0)
	prod := c.Client(t,
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(time.Millisecond),
		kgo.ProducerBatchMaxBytes(4<<10),
	)
	initProducerID(t, c, prod)
	sp := startSeq(prod, topic, n, partitions, 50) // >= 4 s of producing
	var epochs, moved []int32
	leader := before.Leader
	for _, at := range []int64{n / 4, n / 2} {
		sp.waitAcked(at)
		to := (leader + 1) % 3
		epochs = append(epochs, c.MoveLeader(t, topic, 0, to))
		moved = append(moved, to)
		leader = to
		select {
		case <-sp.done:
			t.Logf("producing finished before the move to %d completed", to)
		default:
		}
	}
	want := sp.wait(t)
	after := c.Partition(t, topic, 0)
	t.Logf("partition 0: leader %d epoch %d -> moves to %v with epochs %v -> leader %d epoch %d",
		before.Leader, before.LeaderEpoch, moved, epochs, after.Leader, after.LeaderEpoch)
	if len(moved) != 2 || after.Leader != moved[1] || after.LeaderEpoch < before.LeaderEpoch+2 {
		t.Fatalf("leadership did not move twice: moves %v, final leader %d epoch %d", moved, after.Leader, after.LeaderEpoch)
	}
	got := c.Consume(t, topic, n, time.Minute)
	if err := CheckExactlyOnceInOrder(want, got); err != nil {
		t.Fatal(err)
	}
}
