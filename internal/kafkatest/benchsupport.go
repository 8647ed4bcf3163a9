package kafkatest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// This file serves benchmark drivers outside this package (examples/bench
// --target kafka): the broker's process id for its CPU, a topic's end
// offsets in one request per leader, topic deletion, and a
// ProducerPerformance process that runs until stopped.

// NodePID returns the process id of node i's running JVM, or 0 when the
// node is not running. A benchmark reads the broker's CPU from
// /proc/<pid>/stat with it.
func (c *Cluster) NodePID(i int) int {
	n := c.nodes[i]
	n.mu.Lock()
	cmd, exited := n.cmd, n.exited
	n.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return 0
	}
	select {
	case <-exited:
		return 0
	default:
		return cmd.Process.Pid
	}
}

// SumEndOffsets returns the sum of the log end offsets of partitions
// 0..partitions-1 of topic, asking each leader once with ListOffsets
// (latest, read_uncommitted: the high watermark). With acks=all on a fresh
// topic that is the number of records acknowledged so far, whichever
// client wrote them, so it measures clients that run in another process.
//
// A partition whose leader has not yet taken over (NOT_LEADER_OR_FOLLOWER
// or LEADER_NOT_AVAILABLE, which a topic answers for a moment after its
// metadata already names the leader) is asked again every 50 ms until ctx
// ends; any other error is returned at once.
func (c *Cluster) SumEndOffsets(ctx context.Context, topic string, partitions int32) (int64, error) {
	for {
		sum, err := c.sumEndOffsets(ctx, topic, partitions)
		if err == nil || !(errors.Is(err, kerr.NotLeaderForPartition) || errors.Is(err, kerr.LeaderNotAvailable)) {
			return sum, err
		}
		select {
		case <-ctx.Done():
			return 0, err
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (c *Cluster) sumEndOffsets(ctx context.Context, topic string, partitions int32) (int64, error) {
	up := c.running()
	if len(up) == 0 {
		return 0, errors.New("kafkatest: no node running")
	}
	mt, err := c.topicMetadata(ctx, up[0].directAddr, topic)
	if err != nil {
		return 0, err
	}
	byLeader := map[int32][]int32{}
	for _, p := range mt.Partitions {
		if p.Partition >= partitions {
			continue
		}
		if p.Leader < 0 || int(p.Leader) >= len(c.nodes) {
			return 0, fmt.Errorf("kafkatest: %s/%d has no leader (%d)", topic, p.Partition, p.Leader)
		}
		byLeader[p.Leader] = append(byLeader[p.Leader], p.Partition)
	}
	var sum int64
	seen := int32(0)
	for leader, parts := range byLeader {
		resp, err := requestNode(ctx, c.nodes[leader].directAddr, latestOffsetsRequest(topic, parts...))
		if err != nil {
			return 0, fmt.Errorf("kafkatest: ListOffsets %s: %w", topic, err)
		}
		for _, tr := range resp.(*kmsg.ListOffsetsResponse).Topics {
			for _, pr := range tr.Partitions {
				if pr.ErrorCode != 0 {
					return 0, &ResponseError{Op: "ListOffsets", Resource: fmt.Sprintf("%s/%d", topic, pr.Partition), Err: kerr.ErrorForCode(pr.ErrorCode)}
				}
				sum += pr.Offset
				seen++
			}
		}
	}
	if seen != partitions {
		return 0, fmt.Errorf("kafkatest: ListOffsets %s answered %d of %d partitions", topic, seen, partitions)
	}
	return sum, nil
}

// DeleteTopic deletes topic, so a benchmark that writes gigabytes per case
// does not fill the disk. A topic that does not exist is not an error.
func (c *Cluster) DeleteTopic(ctx context.Context, topic string) error {
	req := kmsg.NewPtrDeleteTopicsRequest()
	req.TimeoutMillis = 30000
	rt := kmsg.NewDeleteTopicsRequestTopic()
	rt.Topic = &topic
	req.Topics = append(req.Topics, rt)
	req.TopicNames = append(req.TopicNames, topic)
	resp, err := c.request(ctx, req)
	if err != nil {
		return fmt.Errorf("kafkatest: DeleteTopics %s: %w", topic, err)
	}
	for _, tr := range resp.(*kmsg.DeleteTopicsResponse).Topics {
		if tr.ErrorCode != 0 && tr.ErrorCode != kerr.UnknownTopicOrPartition.Code {
			return &ResponseError{Op: "DeleteTopics", Resource: topic, Err: kerr.ErrorForCode(tr.ErrorCode), Message: deref(tr.ErrorMessage)}
		}
	}
	return nil
}

// JavaPerfProcess is a running ProducerPerformance JVM started by
// [Cluster.StartJavaPerf].
type JavaPerfProcess struct {
	cmd      *exec.Cmd
	out, err bytes.Buffer
	done     chan struct{}
	waitErr  error
	stopOnce sync.Once
}

// StartJavaPerf starts ProducerPerformance with args (see [JavaPerf.Args])
// like [Cluster.RunJavaPerf], but returns at once: the caller measures it
// from outside (its pid's CPU, the topic's end offsets) and ends it with
// [JavaPerfProcess.Stop]. The JVM dies with this process (parent-death
// signal on Linux).
func (c *Cluster) StartJavaPerf(args ...string) (*JavaPerfProcess, error) {
	p := &JavaPerfProcess{done: make(chan struct{})}
	p.cmd = exec.Command("java", c.javaPerfArgs(args)...)
	setDeathSignal(p.cmd)
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.err
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("kafkatest: start %s: %w", perfMainClass, err)
	}
	go func() {
		p.waitErr = p.cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// Pid returns the JVM's process id.
func (p *JavaPerfProcess) Pid() int { return p.cmd.Process.Pid }

// Exited reports whether the JVM has exited (finished its records or
// failed) and, if so, how, with the tail of its stderr.
func (p *JavaPerfProcess) Exited() (bool, error) {
	select {
	case <-p.done:
		if p.waitErr != nil {
			return true, fmt.Errorf("kafkatest: %s: %w\n%s", perfMainClass, p.waitErr, tail(p.err.String(), 20))
		}
		return true, nil
	default:
		return false, nil
	}
}

// Stop kills the JVM if it still runs, waits for it and returns its
// stdout.
func (p *JavaPerfProcess) Stop() string {
	p.stopOnce.Do(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
		}
	})
	<-p.done
	return p.out.String()
}
