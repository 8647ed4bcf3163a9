package kafkatest

import (
	"math/rand/v2"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/longhaul-kafka/longhaul/producer"
)

// soakDuration is how long TestAgentSoak produces: LONGHAUL_KAFKA_SOAK (a
// Go duration), 2 minutes by default.
func soakDuration(t *testing.T) time.Duration {
	s := os.Getenv("LONGHAUL_KAFKA_SOAK")
	if s == "" {
		return 2 * time.Minute
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 10*time.Second {
		t.Fatalf("LONGHAUL_KAFKA_SOAK=%q: want a Go duration of at least 10s", s)
	}
	return d
}

// soakFaults counts what TestAgentSoak did to the cluster.
type soakFaults struct{ kills, pauses, cuts, quotas int }

// TestAgentSoak is a soak on Apache Kafka 4.4: 3 nodes with the KIP-1269
// agent, 6 partitions at window 50, replication 3 and min.insync.replicas
// 2, 50 ms of round trip through the link proxies, and 1,000 records a
// second for LONGHAUL_KAFKA_SOAK (2 minutes by default) while, every 5 to
// 15 s, one of: a random broker killed (SIGKILL) and restarted 3-10 s
// later, a random broker frozen (SIGSTOP) for 2-10 s, every connection
// through a random proxy cut, or a 16 KiB/s producer_byte_rate quota (a
// quarter of what the records need) for 10-20 s. Every acknowledged record is in the log once, in order; records
// failed with their fate unknown may be there once; nothing is stuck:
// every record is called back, and acknowledgements never stop for longer
// than the delivery of a record may honestly take after a fault (2
// minutes). Only with LONGHAUL_LONG=1: it takes minutes.
func TestAgentSoak(t *testing.T) {
	if os.Getenv("LONGHAUL_LONG") != "1" {
		t.Skip("LONGHAUL_LONG=1 runs the soak on Kafka (LONGHAUL_KAFKA_SOAK=30m for the long one)")
	}
	const (
		topic      = "soak-w50"
		partitions = 6
		perSecond  = 1000
	)
	d := soakDuration(t)
	c := Start(t, Options{Nodes: 3, Agent: AgentOnAll})
	c.CreateTopic(t, topic, partitions, 3, map[string]string{windowConfig: "50", "min.insync.replicas": "2"})
	c.SetDelay(25 * time.Millisecond)
	t.Cleanup(func() { c.SetDelay(0) })
	p := newLonghaul(t, c.ProxiedBootstrap(), nil, producer.MaxInFlightRequestsPerConnection(64))
	n := int(d.Seconds() * perSecond)
	began := time.Now()
	run := startLonghaul(p, topic, n, partitions, perSecond/100)

	// Progress: the longest stretch without a new acknowledgement while
	// records were outstanding.
	var longestStall atomic.Int64
	stopWatch := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		last, lastAt := int64(-1), time.Now()
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stopWatch:
				return
			case now := <-tick.C:
				if a := run.acked.Load() + run.failed.Load(); a != last {
					last, lastAt = a, now
				} else if s := now.Sub(lastAt); int64(s) > longestStall.Load() {
					longestStall.Store(int64(s))
				}
			}
		}
	}()

	rng := rand.New(rand.NewPCG(1269, 30))
	var f soakFaults
	between := func() time.Duration { return 5*time.Second + time.Duration(rng.Int64N(int64(10*time.Second))) }
	wait := func(dur time.Duration) bool {
		select {
		case <-run.done:
			return false
		case <-time.After(dur):
			return true
		}
	}
	for wait(between()) {
		node := rng.IntN(c.Nodes())
		switch rng.IntN(4) {
		case 0:
			c.KillNode(node)
			f.kills++
			down := 3*time.Second + time.Duration(rng.Int64N(int64(7*time.Second)))
			t.Logf("%v: SIGKILL node %d for %v (%d acked)", time.Since(began).Round(time.Second), node, down, run.acked.Load())
			time.Sleep(down)
			c.RestartNode(t, node)
		case 1:
			c.PauseNode(t, node)
			f.pauses++
			frozen := 2*time.Second + time.Duration(rng.Int64N(int64(8*time.Second)))
			t.Logf("%v: SIGSTOP node %d for %v (%d acked)", time.Since(began).Round(time.Second), node, frozen, run.acked.Load())
			time.Sleep(frozen)
			c.ResumeNode(t, node)
		case 2:
			cut := c.Proxy(node).CutAll()
			f.cuts++
			t.Logf("%v: cut %d connections to node %d", time.Since(began).Round(time.Second), cut, node)
		case 3:
			c.SetProducerByteRate(t, 16<<10)
			f.quotas++
			on := 10*time.Second + time.Duration(rng.Int64N(int64(10*time.Second)))
			t.Logf("%v: 16 KiB/s producer_byte_rate quota for %v", time.Since(began).Round(time.Second), on)
			time.Sleep(on)
			c.SetProducerByteRate(t, 0)
		}
	}
	sent := run.wait(t, 15*time.Minute)
	took := time.Since(began)
	close(stopWatch)
	<-watched
	st := p.Stats()
	rep := checkLog(t, c, topic, partitions, sent)
	t.Logf("soak: %d records in %v on 3 nodes at window 50 over 50 ms: %d acked, %d failed (%d fate unknown: %d in the log, %d not), %d not written; %d kills, %d SIGSTOPs, %d cuts, %d quota periods; %d batches sent, %d retried, %d epoch bumps, %d throttled answers (%v); longest stretch without an acknowledgement %v; failures: %s",
		n, took.Round(time.Second), run.acked.Load(), run.failed.Load(), rep.MaybePresent+rep.MaybeAbsent, rep.MaybePresent, rep.MaybeAbsent, rep.NotWritten,
		f.kills, f.pauses, f.cuts, f.quotas, st.BatchesSent, st.BatchesRetried, st.EpochBumps, st.Throttles, st.ThrottledTime.Round(time.Millisecond),
		time.Duration(longestStall.Load()).Round(100*time.Millisecond), run.failures())
	require.Equal(t, int64(n), run.acked.Load()+run.failed.Load(), "every record called back")
	assert.Positive(t, f.kills+f.pauses+f.cuts+f.quotas, "faults happened")
	assert.Less(t, time.Duration(longestStall.Load()), 2*time.Minute, "acknowledgements stopped for too long")
	assert.Zero(t, rep.NotWritten, "no record failed as not written (10-minute delivery timeout)")
}
