package producertest_test

// Tests that every Cluster method is safe for concurrent use while
// producers are connected.

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/longhaul-kafka/longhaul/producer"
	"github.com/longhaul-kafka/longhaul/producer/producertest"
)

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
