package producer

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-kafka/longhaul/internal/broker"
)

// Rack-aware partitioning (KIP-1123): client.rack and partitioner.rack.aware.

// rackCluster is three nodes in racks a, b and c, with a 12-partition
// topic "t": partition p is led by node p%3, so partitions 1, 4, 7 and 10
// are led in rack b.
func rackCluster(t *testing.T) *broker.Cluster {
	t.Helper()
	c, err := broker.Start(broker.Config{Nodes: 3, Racks: map[int32]string{0: "a", 1: "b", 2: "c"},
		Topics: []broker.TopicConfig{{Name: "t", Partitions: 12}}})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// keylessPartitions produces rounds*20 keyless records of 100 bytes (a
// batch.size of 1000 moves the sticky partition every few records) and
// returns how many went to each partition.
func keylessPartitions(t *testing.T, p *Producer, rounds int) map[int32]int {
	t.Helper()
	got := map[int32]int{}
	for i := range rounds {
		rs := make([]*Record, 20)
		for j := range rs {
			rs[j] = &Record{Topic: "t", Value: fmt.Appendf(make([]byte, 0, 100), "%0100d", i*20+j)}
		}
		require.NoError(t, p.ProduceSync(context.Background(), rs...).FirstErr())
		for _, r := range rs {
			got[r.Partition()]++
		}
	}
	return got
}

func rackProducer(t *testing.T, c *broker.Cluster, props map[string]string) *Producer {
	opts := []Opt{BatchSize(1000)}
	for k, v := range props {
		opts = append(opts, Property(k, v))
	}
	return newTestProducer(t, c, opts...)
}

// TestRackAwareKeyless: with partitioner.rack.aware and client.rack, every
// keyless record goes to a partition led in the client's rack, and the
// sticky partition still moves among them. The negative controls: the same
// records without partitioner.rack.aware, with it but no client.rack (as
// in Java, it is then off), and with client.rack alone all reach the other
// racks' partitions too.
func TestRackAwareKeyless(t *testing.T) {
	c := rackCluster(t)
	p := rackProducer(t, c, map[string]string{"client.rack": "b", "partitioner.rack.aware": "true"})
	got := keylessPartitions(t, p, 20)
	for part := range got {
		require.Equal(t, int32(1), part%3, "partition %d is led outside rack b: %v", part, got)
	}
	require.Greater(t, len(got), 1, "the sticky partition moves among rack b's partitions: %v", got)

	for name, props := range map[string]map[string]string{
		"not rack aware":      {"client.rack": "b"},
		"no client.rack":      {"partitioner.rack.aware": "true"},
		"rack aware disabled": {"client.rack": "b", "partitioner.rack.aware": "false"},
	} {
		got := keylessPartitions(t, rackProducer(t, c, props), 20)
		outside := 0
		for part, n := range got {
			if part%3 != 1 {
				outside += n
			}
		}
		require.NotZero(t, outside, "%s: records reach other racks: %v", name, got)
	}
}

// TestRackAwareNoPartitionInRack: a client.rack no leader is in leaves
// keyless records spread over every partition, as without the property.
func TestRackAwareNoPartitionInRack(t *testing.T) {
	c := rackCluster(t)
	p := rackProducer(t, c, map[string]string{"client.rack": "elsewhere", "partitioner.rack.aware": "true"})
	got := keylessPartitions(t, p, 20)
	racks := map[int32]bool{}
	for part := range got {
		racks[part%3] = true
	}
	require.Len(t, racks, 3, "records reach every rack: %v", got)
}

// TestRackAwareKeyedUntouched: keyed records keep murmur2(key) mod
// partitions with rack awareness on, in any rack.
func TestRackAwareKeyedUntouched(t *testing.T) {
	c := rackCluster(t)
	p := rackProducer(t, c, map[string]string{"client.rack": "b", "partitioner.rack.aware": "true"})
	rs := make([]*Record, 200)
	for i := range rs {
		rs[i] = &Record{Topic: "t", Key: fmt.Appendf(nil, "key-%d", i), Value: []byte("v")}
	}
	require.NoError(t, p.ProduceSync(context.Background(), rs...).FirstErr())
	outside := 0
	for _, r := range rs {
		require.Equal(t, keyPartition(r.Key, 12), r.Partition())
		if r.Partition()%3 != 1 {
			outside++
		}
	}
	require.NotZero(t, outside)
}

// TestRackAwareStickyPartitionFromPartitioner: a Partitioner returning
// StickyPartition gets a partition led in the client's rack.
func TestRackAwareStickyPartitionFromPartitioner(t *testing.T) {
	c := rackCluster(t)
	p := newTestProducer(t, c, BatchSize(1000), Property("client.rack", "c"), Property("partitioner.rack.aware", "true"),
		RecordPartitioner(PartitionerFunc(func(*Record, int32) (int32, error) { return StickyPartition, nil })))
	got := keylessPartitions(t, p, 10)
	for part := range got {
		require.Equal(t, int32(2), part%3, "partition %d is led outside rack c: %v", part, got)
	}
}

// TestRackAwareLeaderLeavesRack: once the producer learns that a
// partition's leader moved to another rack, keyless records leave it,
// the sticky partition included.
func TestRackAwareLeaderLeavesRack(t *testing.T) {
	c := rackCluster(t)
	p := rackProducer(t, c, map[string]string{"client.rack": "b", "partitioner.rack.aware": "true"})
	keylessPartitions(t, p, 5)
	p.acc.mu.Lock()
	sticky := p.acc.topics["t"].sticky.current
	p.acc.mu.Unlock()
	require.Equal(t, int32(1), sticky%3)
	require.NoError(t, c.MoveLeader("t", sticky, 0))
	probe := &Record{Topic: "t", Value: []byte("probe")}
	probe.SetPartition(sticky)
	require.NoError(t, p.ProduceSync(context.Background(), probe).FirstErr())
	waitFor(t, "the producer learns the new leader", func() bool {
		for _, ps := range p.Stats().Partitions {
			if ps.Partition == sticky {
				return ps.Leader == 0
			}
		}
		return false
	})
	got := keylessPartitions(t, p, 20)
	require.Zero(t, got[sticky], "records still go to partition %d, now led in rack a: %v", sticky, got)
	for part := range got {
		require.Equal(t, int32(1), part%3, "partition %d is led outside rack b: %v", part, got)
	}
}

// TestRackAwareRackLearned: a broker's rack comes from metadata; a
// producer whose brokers name none behaves as without the property.
func TestRackAwareRackLearned(t *testing.T) {
	c, err := broker.Start(broker.Config{Nodes: 3, Topics: []broker.TopicConfig{{Name: "t", Partitions: 12}}})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	p := rackProducer(t, c, map[string]string{"client.rack": "b", "partitioner.rack.aware": "true"})
	got := keylessPartitions(t, p, 20)
	racks := map[int32]bool{}
	for part := range got {
		racks[part%3] = true
	}
	require.Len(t, racks, 3, "records reach every node: %v", got)
	p.acc.mu.Lock()
	defer p.acc.mu.Unlock()
	require.Empty(t, p.acc.racks)
}
