package producer

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/longhaul-kafka/longhaul/internal/broker"
)

// stuckNodeRun produces keyless records to a topic of parts partitions over
// 2 nodes (node 1 leads the odd ones) while node 1 stops answering
// (an hour's round trip) after 100 ms until the end, and returns how many records were
// placed on node 1's partitions from 200 ms on, and how many in all; a
// keyed record produced at the end is placed by its key.
func stuckNodeRun(t *testing.T, parts int32, opts ...Opt) (late, all int) {
	synctest.Test(t, func(t *testing.T) {
		c, n := memCluster(t, broker.Config{Nodes: 2, RTT: 5 * time.Millisecond,
			Topics: []broker.TopicConfig{{Name: "a", Partitions: parts}}})
		p := memProducer(t, c, n, append([]Opt{BatchSize(1024), Linger(time.Millisecond),
			MaxInFlightRequestsPerConnection(2), RequestTimeout(2 * time.Hour), DeliveryTimeout(3 * time.Hour)}, opts...)...)
		ctx := context.Background()
		require.NoError(t, p.ProduceSync(ctx, &Record{Topic: "a", Value: []byte("warm")}).FirstErr())
		start := time.Now()
		value := make([]byte, 100)
		stuck, primed := false, false
		for i := range 6000 {
			if i%10 == 0 {
				time.Sleep(time.Millisecond)
			}
			since := time.Since(start)
			if !stuck && since >= 100*time.Millisecond {
				c.SetRTT(1, time.Hour)
				stuck = true
			}
			if !primed && since >= 120*time.Millisecond {
				// By now node 1's connection has its 2 requests stuck, so
				// what is queued there stays queued: one record on each of
				// its partitions gives each a queue that waits from now on.
				// A partition with nothing queued shows nothing and may
				// still be picked, and with 32 partitions the 8 sampled
				// ones need not have been picked since the stall.
				primed = true
				for part := int32(1); part < parts; part += 2 {
					r := &Record{Topic: "a", Value: value}
					r.SetPartition(part)
					p.Produce(ctx, r, func(_ *Record, err error) { assert.NoError(t, err) })
				}
			}
			r := &Record{Topic: "a", Value: value}
			p.Produce(ctx, r, func(_ *Record, err error) { assert.NoError(t, err) })
			if part := r.Partition(); part%2 == 1 && since >= 200*time.Millisecond {
				late++
			}
			all++
		}
		c.SetRTT(1, 5*time.Millisecond) // what is sent from now on is answered; the stuck requests in an hour
		key := []byte("k")
		r := &Record{Topic: "a", Key: key, Value: value}
		require.NoError(t, p.ProduceSync(ctx, r).FirstErr(), "a keyed record waits for its partition's leader")
		require.Equal(t, keyPartition(key, parts), r.Partition(), "keyed records are untouched")
		require.NoError(t, p.Flush(ctx))
	})
	return late, all
}

// TestAvailabilityTimeoutSkipsStuckPartitions (KIP-794): with
// partitioner.availability.timeout.ms 50 ms, once node 1 stops answering
// no keyless record goes to its partitions (the queue of each has waited
// past the timeout with nothing sent), while with the default 0 adaptive
// partitioning alone still puts records there whenever their queues are
// no longer than the healthy node's; keyed records go where their key
// says either way, and every record is written.
func TestAvailabilityTimeoutSkipsStuckPartitions(t *testing.T) {
	// 4 partitions: the adaptive partitioner looks at all; 32: at 8
	// sampled ones, and at all when each sampled one is unavailable.
	for _, parts := range []int32{4, 32} {
		t.Run(fmt.Sprint(parts), func(t *testing.T) {
			late, all := stuckNodeRun(t, parts, Property("partitioner.availability.timeout.ms", "50"))
			t.Logf("timeout 50 ms: %d of %d records placed on the stuck node's partitions after 200 ms", late, all)
			assert.Zero(t, late)
			late, all = stuckNodeRun(t, parts)
			t.Logf("timeout 0: %d of %d records placed on the stuck node's partitions after 200 ms", late, all)
			assert.Positive(t, late, "negative control: without the timeout the stuck partitions still get records")
			late, all = stuckNodeRun(t, parts, Property("partitioner.availability.timeout.ms", "50"), Property("partitioner.adaptive.partitioning.enable", "false"))
			t.Logf("timeout 50 ms, adaptive off: %d of %d records placed on the stuck node's partitions after 200 ms", late, all)
			assert.Positive(t, late, "the timeout applies only with adaptive partitioning, as in Java")
		})
	}
}

// TestAvailabilityTimeoutAllStuck: when every partition of the topic is
// unavailable, keyless records are still placed (on the least queued, as
// without the timeout), and written once the broker answers again.
func TestAvailabilityTimeoutAllStuck(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, n := memCluster(t, broker.Config{RTT: 5 * time.Millisecond, Topics: []broker.TopicConfig{{Name: "a", Partitions: 2}}})
		p := memProducer(t, c, n, BatchSize(1024), MaxInFlightRequestsPerConnection(1), RequestTimeout(2*time.Hour),
			DeliveryTimeout(3*time.Hour), Property("partitioner.availability.timeout.ms", "10"))
		ctx := context.Background()
		require.NoError(t, p.ProduceSync(ctx, &Record{Topic: "a", Value: []byte("warm")}).FirstErr())
		c.SetRTT(0, time.Hour)
		placed := map[int32]int{}
		for i := range 2000 {
			if i%10 == 0 {
				time.Sleep(time.Millisecond)
			}
			r := &Record{Topic: "a", Value: make([]byte, 100)}
			p.Produce(ctx, r, func(_ *Record, err error) { assert.NoError(t, err) })
			placed[r.Partition()]++
		}
		c.SetRTT(0, 5*time.Millisecond)
		require.NoError(t, p.Flush(ctx))
		t.Logf("records per partition: %v", placed)
		assert.Positive(t, placed[0])
		assert.Positive(t, placed[1])
		assert.Equal(t, 2001, len(c.Records("a", 0))+len(c.Records("a", 1)))
	})
}
