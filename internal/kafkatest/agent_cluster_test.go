package kafkatest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/longhaul-kafka/longhaul/producer"
)

// createWindowTopic creates a topic with a window on a cluster where some
// nodes run stock Kafka. Only the active controller validates topic
// configs, and a stock one rejects KIP-1269's as unknown: then the stock
// nodes are restarted one by one until an agent node leads the quorum.
func createWindowTopic(t *testing.T, c *Cluster, topic string, partitions int32, rf int16, configs map[string]string) {
	t.Helper()
	for attempt := 0; ; attempt++ {
		err := c.createTopic(topic, partitions, rf, configs)
		if err == nil {
			return
		}
		if !errors.Is(err, kerr.InvalidConfig) || attempt >= 2*c.Nodes() {
			t.Fatalf("kafkatest: %v", err)
		}
		stock := attempt % c.Nodes()
		for c.AgentNode(stock) {
			stock = (stock + 1) % c.Nodes()
		}
		t.Logf("CreateTopics %s refused (%v): the active controller runs stock Kafka; restarting stock node %d", topic, err, stock)
		c.StopNode(stock)
		c.RestartNode(t, stock)
	}
}

// TestAgentThreeNode runs the multi-node KIP-1269 checks on one 3-node
// cluster that starts in the middle of a rolling upgrade (nodes 0 and 1
// with the agent, node 2 stock Kafka, agent argument tag=always), then
// completes it and kills a leader.
func TestAgentThreeNode(t *testing.T) {
	c := Start(t, Options{Nodes: 3, Agent: func(i int) bool { return i != 2 }, AgentArgs: "tag=always"})
	t.Run("RollingUpgrade", func(t *testing.T) { testAgentRollingUpgrade(t, c) })
	t.Run("CompleteUpgrade", func(t *testing.T) { testAgentCompleteUpgrade(t, c) })
	t.Run("KillLeader", func(t *testing.T) { testAgentKillLeader(t, c) })
}

// testAgentRollingUpgrade is KIP-1269's compatibility case, a cluster in
// the middle of a rolling upgrade: nodes 0 and 1 run the agent, node 2
// stock Kafka 4.4, one partition with replication 3 and window 20. While
// longhaul produces through the proxies at 50 ms RTT, the leader moves
// agent -> stock -> agent -> stock -> agent. Under a stock leader the
// limit is 5 and at most 5 batches are on the wire (Produce v13); under an
// agent leader it is learned back to 20 (v14). Nothing acknowledged is
// lost, duplicated or reordered.
//
// Records may end with an unknown fate when leadership moves to the stock
// node while more than 5 batches are in flight: its producer state, built
// by replication, retains only the last 5 batches, so a retry of an older
// batch that the agent leader had appended is answered
// OUT_OF_ORDER_SEQUENCE_NUMBER, and the producer cannot know whether it is
// in the log. The test counts them; the log check allows them absent or
// present once.
func testAgentRollingUpgrade(t *testing.T, c *Cluster) {
	const topic, stockNode = "upgrade-w20", 2
	createWindowTopic(t, c, topic, 1, 3, map[string]string{windowConfig: "20", "min.insync.replicas": "2"})

	// tag=always: an agent leader announces even the default window.
	c.CreateTopic(t, "upgrade-w5", 1, 3, nil)
	c.MoveLeader(t, "upgrade-w5", 0, 0)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pid, epoch, err := InitProducerID(ctx, c.DirectAddr(0))
	require.NoError(t, err)
	conn, err := Dial(ctx, c.DirectAddr(0))
	require.NoError(t, err)
	r := produceOnce(t, ctx, conn, 14, "upgrade-w5", c.TopicID(t, "upgrade-w5"), IdempotentBatch(pid, epoch, 0, [][]byte{[]byte("x")}))
	conn.Close()
	n, present, err := batchesToRetain(r)
	require.NoError(t, err)
	require.True(t, present && n == 5, "tag=always: tag 1 = %d (present %v), want 5", n, present)
	av, err := APIVersions(ctx, c.DirectAddr(stockNode))
	require.NoError(t, err)
	_, stockMax, _ := VersionRange(av, produceKey)
	require.EqualValues(t, 13, stockMax, "the stock node must offer Produce up to v13")

	c.MoveLeader(t, topic, 0, 0)
	c.SetDelay(25 * time.Millisecond)
	t.Cleanup(func() { c.SetDelay(0) })
	tap := newWireTap(map[string][16]byte{topic: c.TopicID(t, topic)})
	p := agentProducer(t, c, tap, producer.BufferMemory(1<<20))
	stop := watchWindows(p, time.Millisecond, func(string) int { return 20 })
	run := startTopicRun(p, topic, 1_000_000, 1024)
	plan := []int32{0, stockNode, 1, stockNode, 0}
	for i, to := range plan {
		if i > 0 {
			c.MoveLeader(t, topic, 0, to)
		}
		want := 20
		if to == stockNode {
			want = 5
		}
		// Hold each leader until the producer follows it and has
		// produced at its limit for a while.
		deadline := time.Now().Add(time.Minute)
		for time.Now().Before(deadline) {
			st := partitionStats(p, topic, 0)
			if st.Leader == to && st.Limit == want && !st.Gated {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		before := run.ackedCount()
		time.Sleep(1500 * time.Millisecond)
		st := partitionStats(p, topic, 0)
		t.Logf("leader %d (agent %v): limit %d, %d records acknowledged in 1.5 s", to, c.AgentNode(int(to)), st.Limit, run.ackedCount()-before)
		require.Equal(t, to, st.Leader, "producer did not follow the leader to %d", to)
		require.Equal(t, want, st.Limit, "limit under leader %d", to)
	}
	run.stop()
	sent := run.wait(t, 5*time.Minute)
	w := stop()
	st := p.Stats()
	maxBy, versionsBy := tap.byAddr()
	t.Logf("stats: %v", w)
	t.Logf("per leader, limits seen: %v; leader order %v", w.leaderLimits[tp{topic, 0}], w.leaderOrder[tp{topic, 0}])
	t.Logf("wire per broker: max in flight %v, Produce versions %v", maxBy, versionsBy)
	t.Logf("producer: %d batches sent, %d retried, %d epoch bumps; failures: %s", st.BatchesSent, st.BatchesRetried, st.EpochBumps, run.failures())
	assert.Empty(t, w.violations)
	assert.Equal(t, plan, w.leaderOrder[tp{topic, 0}], "leaders seen in Stats")
	for leader, limits := range w.leaderLimits[tp{topic, 0}] {
		if leader == stockNode {
			for l := range limits {
				assert.LessOrEqual(t, l, 5, "limit %d under the stock leader", l)
			}
		} else if leader >= 0 {
			assert.Contains(t, limits, 20, "limit 20 never learned under agent leader %d", leader)
		}
	}
	for i := range c.Nodes() {
		addr, k := c.ProxiedAddr(i), tp{topic, 0}
		if i == stockNode {
			assert.LessOrEqual(t, maxBy[addr][k], 5, "batches in flight to the stock node")
			assert.Equal(t, []int16{13}, slices.Sorted(mapsKeys(versionsBy[addr])), "Produce versions to the stock node")
		} else {
			assert.Greater(t, maxBy[addr][k], 5, "window 20 not used beyond 5 on agent node %d", i)
			assert.LessOrEqual(t, maxBy[addr][k], 20, "batches in flight to agent node %d", i)
			assert.Equal(t, []int16{14}, slices.Sorted(mapsKeys(versionsBy[addr])), "Produce versions to agent node %d", i)
		}
	}
	rep := checkLog(t, c, topic, 1, sent)
	t.Logf("fate unknown: %d present, %d absent (a stock leader retains 5 batches: a retry further back is OUT_OF_ORDER_SEQUENCE_NUMBER with the batch in the log)", rep.MaybePresent, rep.MaybeAbsent)
	assert.Zero(t, rep.NotWritten, "records failed as not written: %s", run.failures())
}

// partitionStats returns the producer's Stats of one partition.
func partitionStats(p *producer.Producer, topic string, partition int32) producer.PartitionStats {
	for _, ps := range p.Stats().Partitions {
		if ps.Topic == topic && ps.Partition == partition {
			return ps
		}
	}
	return producer.PartitionStats{Leader: -1}
}

// testAgentCompleteUpgrade finishes the rolling upgrade: stock node 2 is
// stopped and restarted with the agent (the harness checks it patched
// every class), offers Produce v14, and a window-20 partition it leads is
// learned at 20.
func testAgentCompleteUpgrade(t *testing.T, c *Cluster) {
	const topic, node = "upgraded-w20", 2
	require.False(t, c.AgentNode(node))
	c.StopNode(node)
	c.SetAgent(t, node, true)
	c.RestartNode(t, node)
	require.True(t, c.AgentNode(node))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	av, err := APIVersions(ctx, c.DirectAddr(node))
	require.NoError(t, err)
	_, maxV, _ := VersionRange(av, produceKey)
	require.EqualValues(t, 14, maxV, "upgraded node's Produce max version")
	c.CreateTopic(t, topic, 1, 3, map[string]string{windowConfig: "20", "min.insync.replicas": "2"})
	c.MoveLeader(t, topic, 0, node)
	c.SetDelay(25 * time.Millisecond)
	t.Cleanup(func() { c.SetDelay(0) })
	tap := newWireTap(map[string][16]byte{topic: c.TopicID(t, topic)})
	p := agentProducer(t, c, tap)
	run := startTopicRun(p, topic, 2000, 1024)
	sent := run.wait(t, 5*time.Minute)
	assert.Empty(t, run.failures())
	assert.Equal(t, 20, p.InFlightLimit(topic, 0), "window learned from the upgraded leader")
	maxBy, versionsBy := tap.byAddr()
	addr := c.ProxiedAddr(node)
	t.Logf("upgraded node %d: Produce versions %v, max batches in flight %v", node, versionsBy[addr], maxBy[addr])
	assert.Equal(t, []int16{14}, slices.Sorted(mapsKeys(versionsBy[addr])), "Produce versions to the upgraded node")
	assert.Greater(t, maxBy[addr][tp{topic, 0}], 5, "window 20 not used beyond 5 on the upgraded node")
	rep := checkLog(t, c, topic, 1, sent)
	assert.Equal(t, 2000, rep.Acked)
}

// testAgentKillLeader kills the partition leader with SIGKILL (a real
// process kill) in the now all-agent 3-node cluster, replication 3,
// min.insync.replicas 2, window 50, while longhaul produces to 3
// partitions through the proxies with random cuts; then restarts it and
// waits until it is back in the ISR of every partition. Producing is
// paced so that it outlasts the kill and the restart. No acknowledged
// record may be lost or duplicated, order kept. A million records with
// LONGHAUL_LONG=1 (or LONGHAUL_INTEROP_RECORDS), 200,000 otherwise, to
// keep CI inside its budget.
func testAgentKillLeader(t *testing.T, c *Cluster) {
	for i := range c.Nodes() {
		require.True(t, c.AgentNode(i), "node %d must run the agent", i)
	}
	const topic, partitions = "kill-w50", 3
	c.CreateTopic(t, topic, partitions, 3, map[string]string{windowConfig: "50", "min.insync.replicas": "2"})
	n := 200_000
	if os.Getenv("LONGHAUL_LONG") == "1" || os.Getenv("LONGHAUL_INTEROP_RECORDS") != "" {
		n = millionRecords(t)
	}
	c.SetDelay(time.Millisecond)
	t.Cleanup(func() { c.SetDelay(0) })
	p := newLonghaul(t, c.ProxiedBootstrap(), nil, producer.MaxInFlightRequestsPerConnection(64))
	var stops []func()
	for i := range c.Nodes() {
		s, err := c.Proxy(i).CutRandomly(rand.New(rand.NewPCG(1269, uint64(i))), 500*time.Millisecond)
		require.NoError(t, err)
		stops = append(stops, s)
	}
	watch := watchWindows(p, time.Millisecond, func(string) int { return 50 })
	began := time.Now()
	// At most 100 records per 10 ms per 200k (5,000/s in CI, 25,000/s
	// for a million): the run outlasts the kill and the restart (10-30
	// s), so the node rejoins while records are still produced.
	run := startLonghaul(p, topic, n, partitions, n/2000)
	run.waitAcked(int64(n / 4))
	victim := c.Partition(t, topic, 0).Leader
	c.KillNode(int(victim))
	killedAt := run.acked.Load()
	t.Logf("SIGKILL node %d (leader of %s/0) after %d records acknowledged", victim, topic, killedAt)
	c.RestartNode(t, int(victim))
	t.Logf("node %d restarted and registered after %d records acknowledged (of %d)", victim, run.acked.Load(), n)
	sent := run.wait(t, 10*time.Minute)
	took := time.Since(began)
	for _, s := range stops {
		s()
	}
	w := watch()
	st := p.Stats()
	t.Logf("%d records in %v; %d acked, %d failed; %d batches sent, %d retried, %d epoch bumps", n, took.Round(time.Millisecond), run.acked.Load(), run.failed.Load(), st.BatchesSent, st.BatchesRetried, st.EpochBumps)
	t.Logf("stats: %v", w)
	if f := run.failures(); f != "" {
		t.Logf("failures: %s", f)
	}
	assert.Empty(t, w.violations)
	// The restarted node rejoins: back in the ISR of every partition.
	deadline := time.Now().Add(3 * time.Minute)
	for p := range int32(partitions) {
		for {
			info := c.Partition(t, topic, p)
			if slices.Contains(info.ISR, victim) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("node %d not back in the ISR of %s/%d: %+v", victim, topic, p, info)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	rep := checkLog(t, c, topic, partitions, sent)
	t.Logf("fate unknown: %d present, %d absent", rep.MaybePresent, rep.MaybeAbsent)
	assert.Zero(t, rep.NotWritten, "records failed as not written: %s", run.failures())
	assert.Equal(t, fmt.Sprint(n), fmt.Sprint(rep.Acked+rep.MaybePresent+rep.MaybeAbsent))
}
