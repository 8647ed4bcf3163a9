package kafkatest

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/longhaul-kafka/longhaul/producer"
)

// TestClusterMovesOnKafka (KIP-899): on Kafka 4.4 with 3 nodes, a producer
// bootstrapped by a name that resolves to node 0's PROXIED address learns
// the proxied addresses; while it produces, every proxy closes (the
// addresses it knows refuse connections: the cluster has moved) and the
// name resolves to node 1's DIRECT listener instead, whose metadata names
// the direct addresses. The producer finds the cluster again through
// bootstrap.servers (the name dialed again) and every record is read back
// exactly once, in order.
func TestClusterMovesOnKafka(t *testing.T) {
	c := Start(t, Options{Nodes: 3})
	c.CreateTopic(t, "moving", 3, 1, nil)
	const name = "boot.test:9092"
	var mu sync.Mutex
	target := strings.Split(c.ProxiedBootstrap(), ",")[0]
	var dials atomic.Int64
	var d net.Dialer
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		if addr == name {
			dials.Add(1)
			mu.Lock()
			addr = target
			mu.Unlock()
		}
		return d.DialContext(ctx, network, addr)
	}
	p := newLonghaul(t, name, nil, producer.Dialer(dial), producer.Linger(time.Millisecond),
		producer.RequestTimeout(5*time.Second), producer.RetryBackoffMax(200*time.Millisecond))
	want := map[int32][][]byte{}
	var failed atomic.Int64
	const records = 6000
	for i := range records {
		if i == records/3 {
			for n := range c.Nodes() {
				c.Proxy(n).Close()
			}
			mu.Lock()
			target = strings.Split(c.Bootstrap(), ",")[1]
			mu.Unlock()
			t.Logf("proxies closed after %d records; %s now resolves to %s", i, name, target)
		}
		part := int32(i % 3)
		v := fmt.Appendf(nil, "%s-%d", value(i), part)
		want[part] = append(want[part], v)
		r := &producer.Record{Topic: "moving", Value: v}
		r.SetPartition(part)
		p.Produce(context.Background(), r, func(_ *producer.Record, err error) {
			if err != nil && failed.Add(1) == 1 {
				t.Errorf("record: %v", err)
			}
		})
		if i%100 == 0 {
			time.Sleep(time.Millisecond)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := p.Flush(ctx); err != nil {
		t.Fatalf("Flush: %v", err)
	}
	st := p.Stats()
	t.Logf("bootstrap name dialed %d times; %d records sent, %d failed, %d batches retried", dials.Load(), st.RecordsSent, failed.Load(), st.BatchesRetried)
	if dials.Load() < 2 {
		t.Errorf("the bootstrap name was dialed %d times: the producer did not go back to it", dials.Load())
	}
	if err := CheckExactlyOnceInOrder(want, c.Consume(t, "moving", records, time.Minute)); err != nil {
		t.Error(err)
	}
}
