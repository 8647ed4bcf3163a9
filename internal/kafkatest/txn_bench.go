package kafkatest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// StableOffsets returns the last stable offset of partitions
// 0..partitions-1 of topic (ListOffsets latest with isolation
// read_committed, asked of each leader): how far a read_committed consumer
// reads, which moves past a transaction's records and its marker when the
// marker is written. So a benchmark counts another process's committed
// transactional records. Leaders not yet in place are asked again every
// 50 ms until ctx ends, as in [Cluster.SumEndOffsets].
func (c *Cluster) StableOffsets(ctx context.Context, topic string, partitions int32) ([]int64, error) {
	for {
		offs, err := c.stableOffsets(ctx, topic, partitions)
		if err == nil || !(errors.Is(err, kerr.NotLeaderForPartition) || errors.Is(err, kerr.LeaderNotAvailable)) {
			return offs, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (c *Cluster) stableOffsets(ctx context.Context, topic string, partitions int32) ([]int64, error) {
	up := c.running()
	if len(up) == 0 {
		return nil, errors.New("kafkatest: no node running")
	}
	mt, err := c.topicMetadata(ctx, up[0].directAddr, topic)
	if err != nil {
		return nil, err
	}
	byLeader := map[int32][]int32{}
	for _, p := range mt.Partitions {
		if p.Partition >= partitions {
			continue
		}
		if p.Leader < 0 || int(p.Leader) >= len(c.nodes) {
			return nil, fmt.Errorf("kafkatest: %s/%d has no leader (%d)", topic, p.Partition, p.Leader)
		}
		byLeader[p.Leader] = append(byLeader[p.Leader], p.Partition)
	}
	out := make([]int64, partitions)
	seen := int32(0)
	for leader, parts := range byLeader {
		req := latestOffsetsRequest(topic, parts...)
		req.IsolationLevel = 1 // read_committed: the last stable offset
		resp, err := requestNode(ctx, c.nodes[leader].directAddr, req)
		if err != nil {
			return nil, fmt.Errorf("kafkatest: ListOffsets %s: %w", topic, err)
		}
		for _, tr := range resp.(*kmsg.ListOffsetsResponse).Topics {
			for _, pr := range tr.Partitions {
				if pr.ErrorCode != 0 {
					return nil, &ResponseError{Op: "ListOffsets", Resource: fmt.Sprintf("%s/%d", topic, pr.Partition), Err: kerr.ErrorForCode(pr.ErrorCode)}
				}
				if pr.Partition >= 0 && pr.Partition < partitions {
					out[pr.Partition] = pr.Offset
					seen++
				}
			}
		}
	}
	if seen != partitions {
		return nil, fmt.Errorf("kafkatest: ListOffsets %s answered %d of %d partitions", topic, seen, partitions)
	}
	return out, nil
}
