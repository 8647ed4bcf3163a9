package kfaketest

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/longhaul-kafka/longhaul/producer"
)

// TestAgainstKfake produces to franz-go's kfake, an independent broker
// without KIP-1269, and reads the topic back with kgo: the producer stays at
// 5 and everything arrives once, in order.
func TestAgainstKfake(t *testing.T) {
	const perPartition = 2000
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "t"))
	require.NoError(t, err)
	defer c.Close()
	addrs := c.ListenAddrs()
	p, err := producer.New(producer.BootstrapServers(addrs...), producer.Linger(time.Millisecond),
		producer.BatchSize(1024), producer.MaxInFlightRequestsPerConnection(20))
	require.NoError(t, err)

	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		failed []error
	)
	value := make([]byte, 100)
	for seq := range perPartition {
		for part := range int32(2) {
			r := &producer.Record{Topic: "t", Value: fmt.Appendf(nil, "%d-%d-%s", part, seq, value)}
			r.SetPartition(part)
			wg.Add(1)
			p.Produce(context.Background(), r, func(_ *producer.Record, err error) {
				if err != nil {
					mu.Lock()
					failed = append(failed, err)
					mu.Unlock()
				}
				wg.Done()
			})
		}
	}
	wg.Wait()
	for part := range int32(2) {
		assert.Equal(t, 5, p.InFlightLimit("t", part), "partition %d: limit against kfake", part)
	}
	require.NoError(t, p.Close(t.Context()))
	require.Empty(t, failed)

	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.ConsumeTopics("t"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	next := map[int32]int{}
	total := 0
	for total < 2*perPartition {
		fs := cl.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "read %d of %d records back", total, 2*perPartition)
		fs.EachRecord(func(r *kgo.Record) {
			fields := strings.SplitN(string(r.Value), "-", 3)
			require.Len(t, fields, 3, "record %q", r.Value)
			part, err1 := strconv.Atoi(fields[0])
			seq, err2 := strconv.Atoi(fields[1])
			require.True(t, err1 == nil && err2 == nil && int32(part) == r.Partition,
				"unexpected record %q on partition %d", r.Value, r.Partition)
			require.Equal(t, next[r.Partition], seq, "partition %d: lost, duplicated or reordered", r.Partition)
			next[r.Partition]++
			total++
		})
	}
}
