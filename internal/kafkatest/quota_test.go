package kafkatest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/longhaul-kafka/longhaul/producer"
)

// TestAgentQuota: Apache Kafka 4.4 with the KIP-1269 agent, a topic at
// window 50 reached over 50 ms of round trip through the link proxy, and
// a producer_byte_rate quota of 1 MiB/s on the default client-id
// (AlterClientQuotas). Over its quota Kafka answers with throttle_time_ms
// and mutes the connection for that long (KIP-219); longhaul waits the
// throttle out on that connection. Every record is acknowledged exactly
// once, in order, no batch is retried and no record ends with its fate
// unknown (request.timeout.ms 3 s, which pipelining into the muted
// connection used to pass). The throughput is logged next to the quota;
// nothing is asserted of it.
func TestAgentQuota(t *testing.T) {
	const (
		topic = "quota-w50"
		rate  = 1 << 20
		n     = 12000
		size  = 1024
	)
	c := Start(t, Options{Agent: AgentOnAll})
	createWindowTopic(t, c, topic, 1, 1, windowTopic(50))
	c.SetDelay(25 * time.Millisecond)
	t.Cleanup(func() { c.SetDelay(0) })
	c.SetProducerByteRate(t, rate)
	p := agentProducer(t, c, nil, producer.RequestTimeout(3*time.Second))

	// Until the brokers apply the quota, produce a little at a time.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i := 0; p.Stats().Throttles == 0; i++ {
		require.NoError(t, ctx.Err(), "no throttled answer within a minute of setting the quota")
		var recs []*producer.Record
		for j := range 256 {
			r := &producer.Record{Topic: topic, Value: fmt.Appendf(nil, "warm-%d-%d-%0*d", i, j, size, 0)}
			r.SetPartition(0)
			recs = append(recs, r)
		}
		require.NoError(t, p.ProduceSync(ctx, recs...).FirstErr())
	}
	warm := p.Stats()
	const runTopic = "quota-w50-run"
	createWindowTopic(t, c, runTopic, 1, 1, windowTopic(50))
	began := time.Now()
	r := startTopicRun(p, runTopic, n, size)
	sent := r.wait(t, 5*time.Minute)
	took := time.Since(began)
	st := p.Stats()
	retried, throttles := st.BatchesRetried-warm.BatchesRetried, st.Throttles-warm.Throttles
	throttled := st.ThrottledTime - warm.ThrottledTime
	t.Logf("%d records of %d bytes at window 50 behind a %d KiB/s quota in %v: %.0f KiB/s (%.2f of the quota); %d batches sent, %d retried; %d throttled answers, %v throttled; limit %d",
		n, size, rate>>10, took.Round(time.Millisecond), float64(n*size)/took.Seconds()/1024, float64(n*size)/took.Seconds()/rate,
		st.BatchesSent-warm.BatchesSent, retried, throttles, throttled.Round(time.Millisecond), p.InFlightLimit(runTopic, 0))
	assert.Empty(t, r.failures(), "no record failed, none with its fate unknown")
	assert.Zero(t, retried, "no batch retried")
	assert.Zero(t, warm.BatchesRetried, "none while the quota came into force either")
	assert.Positive(t, throttles, "the quota throttled the run")
	rep := checkLog(t, c, runTopic, 1, sent)
	assert.Equal(t, n, rep.Acked, "every record acknowledged, once, in order")
	assert.Zero(t, rep.MaybePresent+rep.MaybeAbsent+rep.NotWritten)
}
