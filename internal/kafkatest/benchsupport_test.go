package kafkatest

import (
	"context"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
)

// testBenchSupport checks the helpers examples/bench --target kafka
// measures with: the broker's pid, the end-offset sum as the count of
// acknowledged records, topic deletion, and a ProducerPerformance process
// that finishes on its own or is stopped.
func testBenchSupport(t *testing.T, c *Cluster) {
	pid := c.NodePID(0)
	require.Positive(t, pid)
	if runtime.GOOS == "linux" {
		_, err := os.Stat("/proc/" + strconv.Itoa(pid) + "/stat")
		require.NoError(t, err, "the broker's /proc entry, where bench reads its CPU")
	}

	const topic, parts, n = "bench-support", 3, 3000
	c.CreateTopic(t, topic, parts, 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sum, err := c.SumEndOffsets(ctx, topic, parts)
	require.NoError(t, err)
	require.Zero(t, sum, "fresh topic")

	cl := c.Client(t, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	rs := make([]*kgo.Record, n)
	for i := range rs {
		rs[i] = &kgo.Record{Value: []byte(strconv.Itoa(i))}
	}
	require.NoError(t, cl.ProduceSync(ctx, rs...).FirstErr())
	sum, err = c.SumEndOffsets(ctx, topic, parts)
	require.NoError(t, err)
	require.EqualValues(t, n, sum, "end offsets sum to the records acknowledged")
	_, err = c.SumEndOffsets(ctx, topic, parts+1)
	require.Error(t, err, "a partition the topic lacks is an error, not a zero")

	// A short run finishes on its own and its records land.
	jp, err := c.StartJavaPerf(JavaPerf{Topic: topic, NumRecords: 2000, RecordSize: 100}.Args(c)...)
	require.NoError(t, err)
	require.Positive(t, jp.Pid())
	require.Eventually(t, func() bool { done, _ := jp.Exited(); return done }, 2*time.Minute, 100*time.Millisecond)
	done, err := jp.Exited()
	require.True(t, done)
	require.NoError(t, err)
	out := jp.Stop()
	s, err := ParsePerfSummary(out)
	require.NoError(t, err, out)
	assert.EqualValues(t, 2000, s.Records)
	sum, err = c.SumEndOffsets(ctx, topic, parts)
	require.NoError(t, err)
	assert.EqualValues(t, n+2000, sum)

	// An endless run is ended by Stop.
	jp, err = c.StartJavaPerf(JavaPerf{Topic: topic, NumRecords: 1 << 40, RecordSize: 100}.Args(c)...)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		s, err := c.SumEndOffsets(ctx, topic, parts)
		return err == nil && s > n+2000
	}, 2*time.Minute, 100*time.Millisecond, "the endless run produces")
	done, _ = jp.Exited()
	require.False(t, done)
	jp.Stop()
	done, _ = jp.Exited()
	require.True(t, done, "Stop waits for the JVM")

	require.NoError(t, c.DeleteTopic(ctx, topic))
	require.Eventually(t, func() bool {
		_, err := c.SumEndOffsets(ctx, topic, parts)
		return err != nil
	}, time.Minute, 100*time.Millisecond, "deleted topic")
	require.NoError(t, c.DeleteTopic(ctx, topic), "deleting a missing topic is not an error")
}
