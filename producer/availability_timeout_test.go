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
// nodes nodes (partition p led by node p % nodes) while every node but node
// 0 stops answering (an hour's round trip) after 100 ms until the end, and
// returns how many records were placed on the stuck nodes' partitions from
// 200 ms on, and how many in all; a keyed record produced at the end is
// placed by its key.
func stuckNodeRun(t *testing.T, parts, nodes int32, opts ...Opt) (late, all int) {
	synctest.Test(t, func(t *testing.T) {
		c, n := memCluster(t, broker.Config{Nodes: int(nodes), RTT: 5 * time.Millisecond,
			Topics: []broker.TopicConfig{{Name: "a", Partitions: parts}}})
		p := memProducer(t, c, n, append([]Opt{BatchSize(1024), Linger(time.Millisecond),
			MaxInFlightRequestsPerConnection(2), RequestTimeout(2 * time.Hour), DeliveryTimeout(3 * time.Hour)}, opts...)...)
		setStuck := func(rtt time.Duration) {
			for node := int32(1); node < nodes; node++ {
				c.SetRTT(node, rtt)
			}
		}
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
				setStuck(time.Hour)
				stuck = true
			}
			if !primed && since >= 120*time.Millisecond {
				// Three batches on each stuck partition (a record larger
				// than batch.size is a batch of its own): a request
				// carries one batch of a partition and a connection
				// holds 2 requests, so at least one stays queued there
				// from now on, whatever the stuck connections already
				// hold. A partition with nothing queued shows nothing
				// and may still be picked, and with 32 partitions the 8
				// sampled ones need not have been picked since the
				// stall.
				primed = true
				big := make([]byte, 1100)
				for part := range parts {
					if part%nodes == 0 {
						continue
					}
					for range 3 {
						r := &Record{Topic: "a", Value: big}
						r.SetPartition(part)
						p.Produce(ctx, r, func(_ *Record, err error) { assert.NoError(t, err) })
					}
				}
			}
			r := &Record{Topic: "a", Value: value}
			p.Produce(ctx, r, func(_ *Record, err error) { assert.NoError(t, err) })
			if r.Partition()%nodes != 0 && since >= 200*time.Millisecond {
				late++
			}
			all++
		}
		setStuck(5 * time.Millisecond) // what is sent from now on is answered; the stuck requests in an hour
		key := []byte("k")
		r := &Record{Topic: "a", Key: key, Value: value}
		require.NoError(t, p.ProduceSync(ctx, r).FirstErr(), "a keyed record waits for its partition's leader")
		require.Equal(t, keyPartition(key, parts), r.Partition(), "keyed records are untouched")
		require.NoError(t, p.Flush(ctx))
	})
	return late, all
}

// TestAvailabilityTimeoutSkipsStuckPartitions (KIP-794): with
// partitioner.availability.timeout.ms 50 ms, once the stuck nodes stop
// answering no keyless record goes to their partitions (the queue of each
// has waited past the timeout with nothing sent), while with the default 0
// adaptive partitioning alone still puts records there whenever their
// queues are no longer than the others looked at; keyed records go where
// their key says either way, and every record is written.
func TestAvailabilityTimeoutSkipsStuckPartitions(t *testing.T) {
	// 4 partitions over 2 nodes: the adaptive partitioner looks at all.
	// 32 over 4 nodes, 3 of them stuck: it looks at 8 sampled ones, and at
	// all when each sampled one is unavailable. With only half of the 32
	// stuck, the 8 sampled without the timeout were all stuck or queued
	// at about 1 move in 100: a few batches a run went to the stuck
	// partitions, and none in about 1 run of 40, failing the negative
	// control. With 3 of 4 nodes stuck, all 8 sampled are stuck at about
	// 1 move in 11: hundreds of records a run.
	for _, tc := range []struct{ parts, nodes int32 }{{4, 2}, {32, 4}} {
		t.Run(fmt.Sprint(tc.parts), func(t *testing.T) {
			late, all := stuckNodeRun(t, tc.parts, tc.nodes, Property("partitioner.availability.timeout.ms", "50"))
			t.Logf("timeout 50 ms: %d of %d records placed on the stuck nodes' partitions after 200 ms", late, all)
			assert.Zero(t, late)
			late, all = stuckNodeRun(t, tc.parts, tc.nodes)
			t.Logf("timeout 0: %d of %d records placed on the stuck nodes' partitions after 200 ms", late, all)
			assert.Positive(t, late, "negative control: without the timeout the stuck partitions still get records")
			late, all = stuckNodeRun(t, tc.parts, tc.nodes, Property("partitioner.availability.timeout.ms", "50"), Property("partitioner.adaptive.partitioning.enable", "false"))
			t.Logf("timeout 50 ms, adaptive off: %d of %d records placed on the stuck nodes' partitions after 200 ms", late, all)
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
