package broker

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/longhaul-kafka/longhaul/internal/memnet"
	"github.com/longhaul-kafka/longhaul/protocol"
)

// quotaCluster starts a one-node cluster with a 10 ms round trip on an
// in-memory network (call inside a bubble) and dials it twice: at the
// newest Produce version and at v5.
func quotaCluster(t *testing.T) (c *Cluster, conn, conn5 *protocol.Conn) {
	n := memnet.New()
	c, err := Start(Config{RTT: 10 * time.Millisecond, Listen: n.Listen, Topics: []TopicConfig{{Name: "t", Partitions: 1}}})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	for _, cfg := range []protocol.DialConfig{{Dial: n.Dial}, {Dial: n.Dial, MaxVersions: map[int16]int16{0: 5}}} {
		cn, err := protocol.Dial(context.Background(), c.Addr(), cfg)
		require.NoError(t, err)
		t.Cleanup(func() { cn.Close() })
		if conn == nil {
			conn = cn
		} else {
			conn5 = cn
		}
	}
	return c, conn, conn5
}

// TestProduceQuotaMutesAsKafka: over its produce quota a node answers
// with the time the excess takes to drain (whole milliseconds) and then,
// from Produce v6 (KIP-219), reads nothing more from the connection for
// that long: a request sent at once waits out the mute and is counted by
// MutedSends; one sent once the throttle has passed is not, and takes one
// round trip. Below v6 the answer itself waits for the throttle, and the
// connection is not muted. SetProduceQuota(0) stops throttling.
func TestProduceQuotaMutesAsKafka(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, conn14, conn5 := quotaCluster(t)
		ctx := context.Background()
		c.SetProduceQuota(0, 10_000) // 1,000 bytes of burst
		value := make([]byte, 2000)
		produce := func(version int16) (throttle, took time.Duration) {
			conn := conn14
			if version < 6 {
				conn = conn5
			}
			start := time.Now()
			resp, err := conn.Do(ctx, produceReq(c, version, "t", 0, bigBatch(t, value)))
			require.NoError(t, err)
			pr := resp.(*kmsg.ProduceResponse)
			require.Zero(t, pr.Topics[0].Partitions[0].ErrorCode)
			return time.Duration(pr.ThrottleMillis) * time.Millisecond, time.Since(start)
		}
		throttle, took := produce(14)
		require.Greater(t, throttle, 90*time.Millisecond, "about 1,000 bytes past the burst at 10,000 a second")
		require.Equal(t, 10*time.Millisecond, took, "answered at once")
		n, _ := c.MutedSends()
		require.Zero(t, n)

		time.Sleep(time.Millisecond)
		throttle2, took := produce(14) // sent into the mute
		require.Equal(t, throttle-time.Millisecond+10*time.Millisecond, took, "read only once the mute ended")
		n, first := c.MutedSends()
		require.Equal(t, int64(1), n)
		require.Contains(t, first[0], "after a throttled answer")

		time.Sleep(throttle2) // waited out: not muted
		_, took = produce(14)
		require.Equal(t, 10*time.Millisecond, took)
		n, _ = c.MutedSends()
		require.Equal(t, int64(1), n)

		time.Sleep(time.Second) // the budget drains
		throttle, took = produce(5)
		require.Positive(t, throttle)
		require.Equal(t, throttle+10*time.Millisecond, took, "below v6 the answer waits for the throttle")
		throttle, took = produce(5)
		require.Equal(t, throttle+10*time.Millisecond, took, "the connection was not muted: read at once, answered after its own throttle")
		n, _ = c.MutedSends()
		require.Equal(t, int64(1), n)
		time.Sleep(time.Second)

		c.SetProduceQuota(0, 0)
		throttle, _ = produce(14)
		require.Zero(t, throttle)
		throttle, took = produce(14)
		require.Zero(t, throttle)
		require.Equal(t, 10*time.Millisecond, took)
		n, _ = c.MutedSends()
		require.Equal(t, int64(1), n)
	})
}

// TestScriptedLeaderHint: a Refuse answer of NOT_LEADER_OR_FOLLOWER with a
// Hint carries that CurrentLeader, and the answer's NodeEndpoints list the
// hinted node only when the cluster has it; without a Hint the real
// leader and epoch.
func TestScriptedLeaderHint(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := memnet.New()
		c, err := Start(Config{Nodes: 2, Listen: n.Listen, Topics: []TopicConfig{{Name: "t", Partitions: 1}}})
		require.NoError(t, err)
		defer c.Close()
		conn, err := protocol.Dial(context.Background(), c.Addr(), protocol.DialConfig{Dial: n.Dial})
		require.NoError(t, err)
		defer conn.Close()
		nl := kerr.NotLeaderForPartition.Code
		c.ScriptAnswers("t", 0, Answer{Code: nl, Hint: &LeaderHint{Leader: 9, Epoch: 7}},
			Answer{Code: nl, Hint: &LeaderHint{Leader: 1, Epoch: -1}}, Answer{Code: nl})
		for i, want := range []struct {
			leader, epoch int32
			endpoints     []int32
		}{{9, 7, nil}, {1, -1, []int32{1}}, {0, 0, []int32{0}}} {
			resp, err := conn.Do(context.Background(), produceReq(c, 14, "t", 0, bigBatch(t, []byte("v"))))
			require.NoError(t, err)
			pr := resp.(*kmsg.ProduceResponse)
			sp := pr.Topics[0].Partitions[0]
			require.Equal(t, nl, sp.ErrorCode, "answer %d", i)
			require.Equal(t, [2]int32{want.leader, want.epoch}, [2]int32{sp.CurrentLeader.LeaderID, sp.CurrentLeader.LeaderEpoch}, "answer %d", i)
			var ids []int32
			for _, b := range pr.Brokers {
				ids = append(ids, b.NodeID)
			}
			require.Equal(t, want.endpoints, ids, "answer %d", i)
		}
		require.Empty(t, c.Records("t", 0), "refused answers append nothing")
	})
}
