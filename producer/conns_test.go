package producer

import (
	"context"
	"net"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-kafka/longhaul/internal/broker"
)

// Connection edge cases of issue 20 ("also check"); its identity case is in
// idempotence_test.go.

// A bootstrap address that accepts connections and never answers gets its
// own share of the dial budget, not all of it: the first metadata request
// reaches the real broker after it, and the first record is acked sooner
// than a failed request plus a backoff (with one shared budget the black
// holes used it all, the request failed, and the record waited a backoff
// and a retry).
func TestSilentBootstrapAddressDoesNotUseWholeDialBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, n := memCluster(t, broker.Config{Topics: []broker.TopicConfig{{Name: "t", Partitions: 1}}})
		var holes []string
		var mu sync.Mutex
		var held []net.Conn
		for _, addr := range []string{"10.0.0.1:9092", "10.0.0.2:9092"} {
			ln, err := n.Listen("tcp", addr)
			require.NoError(t, err)
			holes = append(holes, addr)
			go func() {
				for {
					nc, err := ln.Accept()
					if err != nil {
						return
					}
					mu.Lock()
					held = append(held, nc) // accepted, never answered
					mu.Unlock()
				}
			}()
			t.Cleanup(func() { ln.Close() })
		}
		t.Cleanup(func() {
			mu.Lock()
			defer mu.Unlock()
			for _, nc := range held {
				nc.Close()
			}
		})
		// controlAddrs rotates the list by one per request: the first
		// request tries 10.0.0.2, then the broker.
		p := memProducer(t, c, n, BootstrapServers(holes[0], holes[1], c.Addr()), RetryBackoff(time.Second), RetryBackoffMax(time.Second))
		start := time.Now()
		require.NoError(t, p.ProduceSync(context.Background(), &Record{Topic: "t", Value: []byte("v")}).FirstErr())
		// Each silent address costs its share of the budget, and the
		// metadata and producer-id requests may each try both (about 1 s
		// at worst); with one shared budget the first request failed
		// after the whole second and the record waited a backoff of at
		// least 0.9 s more.
		require.Less(t, time.Since(start), 1500*time.Millisecond, "acked before a failed request plus a backoff")
	})
}

// A dial that completes after metadata moved the broker to another
// address is not installed: it reached the old address.
func TestDialCompletingAfterAddressChangeIsDropped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, n := memCluster(t, broker.Config{Nodes: 2, Topics: []broker.TopicConfig{{Name: "t", Partitions: 1}}})
		p := memProducer(t, c, n)
		require.NoError(t, p.ProduceSync(context.Background(), &Record{Topic: "t", Value: []byte("v")}).FirstErr())
		done := make(chan struct{})
		p.post(func() {
			s := p.s
			nd := s.node(99)
			nd.addr = c.Addrs()[1]
			s.dial(nd, time.Now())
			nd.addr = c.Addrs()[0] // metadata moved it meanwhile
			close(done)
		})
		<-done
		synctest.Wait()
		time.Sleep(10 * time.Millisecond)
		got := make(chan bool)
		p.post(func() {
			nd := p.s.nodes[99]
			got <- nd.conn == nil && !nd.dialing
		})
		require.True(t, <-got, "the connection to the old address was installed")
	})
}
