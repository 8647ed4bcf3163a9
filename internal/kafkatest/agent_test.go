package kafkatest

import (
	"archive/zip"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/fstest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/longhaul-kafka/longhaul/producer"
)

// TestAgentLog covers the start-up check that makes a Kafka upgrade which
// renames a patched method fail loudly: every class patched, none failed,
// and no agent output from a node started without it.
func TestAgentLog(t *testing.T) {
	var all strings.Builder
	for _, c := range AgentPatchedClasses {
		all.WriteString(AgentLogPrefix + "patched " + c + "\n")
	}
	require.NoError(t, checkAgentLog("x\n"+all.String()+"y\n", true))
	require.NoError(t, checkAgentLog("plain Kafka output\n", false))

	missing := strings.Replace(all.String(), AgentLogPrefix+"patched "+AgentPatchedClasses[8]+"\n", "", 1)
	err := checkAgentLog(missing, true)
	require.Error(t, err)
	assert.Contains(t, err.Error(), AgentPatchedClasses[8])

	failed := all.String() + AgentLogPrefix + "FAILED org.apache.kafka.storage.internals.log.ProducerStateEntry: no method [addBatchMetadata]\n"
	err = checkAgentLog(failed, true)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "addBatchMetadata")

	require.Error(t, checkAgentLog(all.String(), false), "agent output on a node meant to run stock Kafka")
	require.Error(t, checkAgentLog("", true), "no agent output at all")
}

// TestAgentSingleNode runs the KIP-1269 checks that need one Kafka 4.4
// broker with the agent, started once.
func TestAgentSingleNode(t *testing.T) {
	c := Start(t, Options{Agent: AgentOnAll})
	t.Run("ProduceV14Window", func(t *testing.T) { testAgentProduceV14Window(t, c) })
	t.Run("TopicCommandWithAgent", func(t *testing.T) { testAgentTopicCommand(t, c) })
	t.Run("LearnWindows", func(t *testing.T) { testAgentLearnWindows(t, c) })
	t.Run("IndependentLimits", func(t *testing.T) { testAgentIndependentLimits(t, c) })
	t.Run("DedupAcrossWindowWithCuts", func(t *testing.T) { testAgentDedupAcrossWindowWithCuts(t, c) })
	t.Run("RuntimeConfigChange", func(t *testing.T) { testAgentRuntimeConfigChange(t, c) })
	t.Run("MillionAtWindow50WithCuts", func(t *testing.T) { testAgentMillionWithCuts(t, c) })
}

// testAgentProduceV14Window checks the broker side on the wire: Produce
// v14 advertised and accepted, tag 1 = N at v14 only and omitted at 5,
// values below 5 rejected, and Kafka's own deduplication reaching exactly
// N batches back: after N batches a retry of the first is a duplicate;
// after N+1 it is OUT_OF_ORDER_SEQUENCE_NUMBER while the second still is
// a duplicate. The window-5 topic is the control: stock Kafka's edge.
// Lowering the window from 20 to 5 leaves only the last 5 batches
// retained once the next batch is appended.
func testAgentProduceV14Window(t *testing.T, c *Cluster) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, addr := range []string{c.DirectAddr(0), c.ProxiedAddr(0)} {
		av, err := APIVersions(ctx, addr)
		require.NoError(t, err)
		_, maxV, ok := VersionRange(av, produceKey)
		require.True(t, ok)
		require.EqualValues(t, 14, maxV, "Produce max version via %s", addr)
	}
	err := c.createTopic("edge-w4", 1, 1, windowTopic(4))
	require.ErrorIs(t, err, kerr.InvalidConfig, "window 4 must be rejected")
	t.Logf("window 4: %v", err)

	pid, epoch, err := InitProducerID(ctx, c.DirectAddr(0))
	require.NoError(t, err)
	conn, err := Dial(ctx, c.DirectAddr(0))
	require.NoError(t, err)
	defer conn.Close()
	for _, w := range []int{5, 20} {
		topic := fmt.Sprintf("edge-w%d", w)
		c.CreateTopic(t, topic, 1, 1, windowTopic(w))
		id := c.TopicID(t, topic)
		batch := func(seq int) []byte {
			return IdempotentBatch(pid, epoch, int32(seq), [][]byte{[]byte(fmt.Sprintf("%s-%d", topic, seq))})
		}
		offsets := make([]int64, w+2)
		for seq := range w {
			r := produceOnce(t, ctx, conn, 14, topic, id, batch(seq))
			require.NoError(t, kerr.ErrorForCode(r.ErrorCode), "%s seq %d", topic, seq)
			offsets[seq] = r.BaseOffset
			n, present, err := batchesToRetain(r)
			require.NoError(t, err)
			if w == 5 {
				require.False(t, present, "tag 1 must be omitted at the default 5 (got %d)", n)
			} else {
				require.True(t, present, "tag 1 missing at window %d", w)
				require.EqualValues(t, w, n)
			}
		}
		again := produceOnce(t, ctx, conn, 14, topic, id, batch(0))
		require.True(t, isDuplicateAnswer(again.ErrorCode, again.BaseOffset, offsets[0]),
			"%s: retry of seq 0 after %d batches: %v offset %d, want a duplicate of offset %d", topic, w, kerr.ErrorForCode(again.ErrorCode), again.BaseOffset, offsets[0])
		r := produceOnce(t, ctx, conn, 14, topic, id, batch(w))
		require.NoError(t, kerr.ErrorForCode(r.ErrorCode))
		offsets[w] = r.BaseOffset
		old := produceOnce(t, ctx, conn, 14, topic, id, batch(0))
		require.ErrorIs(t, kerr.ErrorForCode(old.ErrorCode), kerr.OutOfOrderSequenceNumber,
			"%s: seq 0 after %d batches has left the window", topic, w+1)
		second := produceOnce(t, ctx, conn, 14, topic, id, batch(1))
		require.True(t, isDuplicateAnswer(second.ErrorCode, second.BaseOffset, offsets[1]),
			"%s: retry of seq 1 after %d batches: %v offset %d, want a duplicate of offset %d", topic, w+1, kerr.ErrorForCode(second.ErrorCode), second.BaseOffset, offsets[1])
		// The tag is a v14 field: a v13 response never carries it.
		v13 := produceOnce(t, ctx, conn, 13, topic, id, batch(w+1))
		require.NoError(t, kerr.ErrorForCode(v13.ErrorCode))
		offsets[w+1] = v13.BaseOffset
		_, present, _ := batchesToRetain(v13)
		require.False(t, present, "tag 1 in a v13 response")
		require.EqualValues(t, w+2, c.EndOffsets(t, topic, 1)[0], "%s: duplicates must not be appended", topic)
		if w > 5 {
			// A lowered window evicts down on the next batch: after it,
			// only the last 5 batches are duplicates.
			c.AlterTopicConfig(t, topic, map[string]string{windowConfig: "5"})
			seq, present := w+2, true
			deadline := time.Now().Add(time.Minute)
			for ; present; seq++ {
				require.True(t, time.Now().Before(deadline), "tag 1 still present a minute after lowering the window")
				r := produceOnce(t, ctx, conn, 14, topic, id, batch(seq))
				require.NoError(t, kerr.ErrorForCode(r.ErrorCode))
				offsets = append(offsets, r.BaseOffset)
				_, present, _ = batchesToRetain(r)
			}
			last := seq - 1
			gone := produceOnce(t, ctx, conn, 14, topic, id, batch(last-5))
			require.ErrorIs(t, kerr.ErrorForCode(gone.ErrorCode), kerr.OutOfOrderSequenceNumber, "seq %d, 6th from the last after lowering the window to 5", last-5)
			kept := produceOnce(t, ctx, conn, 14, topic, id, batch(last-4))
			require.True(t, isDuplicateAnswer(kept.ErrorCode, kept.BaseOffset, offsets[last-4]),
				"seq %d, 5th from the last after lowering the window: %v offset %d, want a duplicate of %d", last-4, kerr.ErrorForCode(kept.ErrorCode), kept.BaseOffset, offsets[last-4])
		}
		t.Logf("%s: retry of seq 0 deduplicated after %d batches, OUT_OF_ORDER after %d; tag 1 %v", topic, w, w+1, map[bool]string{true: "omitted (5)", false: fmt.Sprint(w)}[w == 5])
	}
}

// testAgentTopicCommand: Kafka's own kafka-topics tool validates topic
// configs in its JVM, so it refuses the window config without the agent
// and creates the topic with it (what the README tells users to do).
func testAgentTopicCommand(t *testing.T, c *Cluster) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	run := func(withAgent bool, topic string) (string, error) {
		args := []string{"-Xmx256m", "-Dlog4j2.configurationFile=" + c.toolLog, "-cp", c.Classpath()}
		if withAgent {
			args = append([]string{AgentFlag(c.AgentJar(), "")}, args...)
		}
		args = append(args, "org.apache.kafka.tools.TopicCommand", "--bootstrap-server", c.Bootstrap(),
			"--create", "--topic", topic, "--partitions", "1", "--replication-factor", "1",
			"--config", windowConfig+"=50")
		cmd := exec.CommandContext(ctx, "java", args...)
		setDeathSignal(cmd)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := run(false, "cli-stock")
	require.Error(t, err, "kafka-topics without the agent accepted %s:\n%s", windowConfig, out)
	t.Logf("without the agent: %s", firstLine(strings.TrimSpace(out[max(0, strings.Index(out, "Error")):])))
	out, err = run(true, "cli-w50")
	require.NoError(t, err, "kafka-topics with the agent:\n%s", out)

	pid, epoch, err := InitProducerID(ctx, c.DirectAddr(0))
	require.NoError(t, err)
	conn, err := Dial(ctx, c.DirectAddr(0))
	require.NoError(t, err)
	defer conn.Close()
	r := produceOnce(t, ctx, conn, 14, "cli-w50", c.TopicID(t, "cli-w50"), IdempotentBatch(pid, epoch, 0, [][]byte{[]byte("x")}))
	n, present, err := batchesToRetain(r)
	require.NoError(t, err)
	require.True(t, present && n == 50, "topic created by kafka-topics: tag 1 = %d (present %v), want 50", n, present)
}

// agentProducer is a longhaul producer for the agent tests: proxied,
// small batches so that many are in flight, 64 requests per connection.
func agentProducer(t *testing.T, c *Cluster, tap *wireTap, opts ...producer.Opt) *producer.Producer {
	all := []producer.Opt{
		producer.BatchSize(4096),
		producer.MaxInFlightRequestsPerConnection(64),
	}
	if tap != nil {
		all = append(all, producer.Dialer(tap.dial))
	}
	return newLonghaul(t, c.ProxiedBootstrap(), nil, append(all, opts...)...)
}

// testAgentLearnWindows: windows 5, 20 and 50 learned from Kafka's own
// v14 responses, per partition, at 50 ms RTT; more than 5 batches in
// flight on the wire where the window allows it, never more than the
// window.
func testAgentLearnWindows(t *testing.T, c *Cluster) {
	windows := map[string]int{"learn-w5": 5, "learn-w20": 20, "learn-w50": 50}
	ids := map[string][16]byte{}
	for topic, w := range windows {
		c.CreateTopic(t, topic, 1, 1, windowTopic(w))
		ids[topic] = c.TopicID(t, topic)
	}
	c.SetDelay(25 * time.Millisecond)
	t.Cleanup(func() { c.SetDelay(0) })
	tap := newWireTap(ids)
	p := agentProducer(t, c, tap)
	stop := watchWindows(p, time.Millisecond, func(topic string) int { return windows[topic] })
	runs := map[string]*topicRun{}
	for topic := range windows {
		runs[topic] = startTopicRun(p, topic, 3000, 1024)
	}
	sent := map[string]map[int32][]Sent{}
	for topic, r := range runs {
		sent[topic] = r.wait(t, 5*time.Minute)
		assert.Empty(t, r.failures(), topic)
	}
	w := stop()
	maxIn, _, versions, derr := tap.snapshot()
	require.NoError(t, derr)
	t.Logf("stats: %v", w)
	t.Logf("wire: Produce versions %v, max batches in flight %v", versions, maxIn)
	assert.Empty(t, w.violations)
	require.Equal(t, []int16{14}, slices.Sorted(mapsKeys(versions)), "only Produce v14 on the wire")
	for topic, win := range windows {
		k := tp{topic, 0}
		assert.Equal(t, win, p.InFlightLimit(topic, 0), "%s learned limit", topic)
		assert.LessOrEqual(t, maxIn[k], win, "%s: batches in flight on the wire", topic)
		assert.Contains(t, w.limits[k], win, "%s: limit %d never seen in Stats", topic, win)
		if win > 5 {
			assert.Greater(t, maxIn[k], 5, "%s: window %d never used beyond 5 on the wire", topic, win)
		}
		checkLog(t, c, topic, 1, sent[topic])
	}
}

func mapsKeys[K comparable, V any](m map[K]V) func(func(K) bool) {
	return func(yield func(K) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// testAgentIndependentLimits is the KIP's integration test plan: topics
// with windows 5 and 20 on one broker, produced together with
// max.in.flight.requests.per.connection 1, 20 and 100: each partition
// stays within its own window (Stats and the wire), the connection within
// max.in.flight, and the window-20 partition goes past 5 whenever the
// connection allows it.
func testAgentIndependentLimits(t *testing.T, c *Cluster) {
	windows := map[string]int{"ind-w5": 5, "ind-w20": 20}
	for _, mif := range []int{1, 20, 100} {
		t.Run(fmt.Sprintf("max.in.flight=%d", mif), func(t *testing.T) {
			ids := map[string][16]byte{}
			names := map[string]int{}
			for topic, w := range windows {
				name := fmt.Sprintf("%s-mif%d", topic, mif)
				c.CreateTopic(t, name, 1, 1, windowTopic(w))
				ids[name] = c.TopicID(t, name)
				names[name] = w
			}
			c.SetDelay(25 * time.Millisecond)
			t.Cleanup(func() { c.SetDelay(0) })
			tap := newWireTap(ids)
			p := agentProducer(t, c, tap, producer.MaxInFlightRequestsPerConnection(mif))
			stop := watchWindows(p, time.Millisecond, func(topic string) int { return names[topic] })
			n := 2000
			if mif == 1 {
				n = 300 // one request per RTT: keep it short
			}
			runs := map[string]*topicRun{}
			for name := range names {
				runs[name] = startTopicRun(p, name, n, 1024)
			}
			for name, r := range runs {
				sent := r.wait(t, 5*time.Minute)
				assert.Empty(t, r.failures(), name)
				checkLog(t, c, name, 1, sent)
			}
			w := stop()
			maxIn, maxConn, _, derr := tap.snapshot()
			require.NoError(t, derr)
			t.Logf("stats: %v", w)
			t.Logf("wire: max batches in flight %v, max requests in flight on one connection %d", maxIn, maxConn)
			assert.Empty(t, w.violations)
			assert.LessOrEqual(t, maxConn, mif, "requests in flight on one connection")
			for name, win := range names {
				k := tp{name, 0}
				assert.LessOrEqual(t, maxIn[k], min(win, mif), "%s on the wire", name)
				assert.Equal(t, win, p.InFlightLimit(name, 0), "%s learned limit", name)
				if win > 5 && mif > 5 {
					assert.Greater(t, maxIn[k], 5, "%s: window %d not used beyond 5 with max.in.flight %d", name, win, mif)
				}
			}
		})
	}
}

// testAgentDedupAcrossWindowWithCuts: at window 50 and 50 ms RTT, cut
// every connection whenever more than 20 batches are in flight, so the
// responses of batches appended by Kafka are lost and the producer
// retries all of them: Kafka's ProducerStateManager must recognise every
// one, up to 50 back, as a duplicate. Exactly once and in order, and no
// record may end with an unknown fate (a retry that fell out of the
// window would: OUT_OF_ORDER_SEQUENCE_NUMBER for a batch in the log).
// The window-5 edge in ProduceV14Window is the control showing stock
// Kafka's window would not reach.
func testAgentDedupAcrossWindowWithCuts(t *testing.T, c *Cluster) {
	const topic = "dedup-w50"
	c.CreateTopic(t, topic, 1, 1, windowTopic(50))
	c.SetDelay(25 * time.Millisecond)
	t.Cleanup(func() { c.SetDelay(0) })
	p := agentProducer(t, c, nil)
	r := startTopicRun(p, topic, 15000, 1024)
	var cuts, deepCuts, maxAtCut atomic.Int64
	quit := make(chan struct{})
	cutterDone := make(chan struct{})
	go func() {
		defer close(cutterDone)
		for cuts.Load() < 12 {
			select {
			case <-quit:
				return
			case <-time.After(time.Millisecond):
			}
			inflight := 0
			for _, ps := range p.Stats().Partitions {
				if ps.Topic == topic {
					inflight = ps.InFlight
				}
			}
			if inflight <= 20 {
				continue
			}
			if c.Proxy(0).CutAll() > 0 {
				cuts.Add(1)
				deepCuts.Add(1)
				maxAtCut.Store(max(maxAtCut.Load(), int64(inflight)))
			}
			time.Sleep(300 * time.Millisecond)
		}
	}()
	sent := r.wait(t, 5*time.Minute)
	close(quit)
	<-cutterDone
	st := p.Stats()
	t.Logf("%d cuts with more than 20 batches in flight (max %d); batches sent %d, retried %d, epoch bumps %d; failures: %s",
		deepCuts.Load(), maxAtCut.Load(), st.BatchesSent, st.BatchesRetried, st.EpochBumps, r.failures())
	require.GreaterOrEqual(t, deepCuts.Load(), int64(3), "too few cuts with a deep window: the test did not exercise retries across the window")
	assert.Greater(t, st.BatchesRetried, int64(20))
	rep := checkLog(t, c, topic, 1, sent)
	assert.Equal(t, 0, rep.MaybePresent+rep.MaybeAbsent+rep.NotWritten, "no record may fail when Kafka deduplicates across the whole window: %s", r.failures())
	assert.Zero(t, st.EpochBumps, "an epoch bump means a retry was not recognised as a duplicate")
}

// testAgentRuntimeConfigChange changes a topic's window while producing,
// 20 -> 50 and 20 -> 5: the producer's limit follows (seen in Stats in
// that order), never exceeds what the broker announces, and everything
// arrives exactly once, in order.
func testAgentRuntimeConfigChange(t *testing.T, c *Cluster) {
	for _, to := range []int{50, 5} {
		t.Run(fmt.Sprintf("20to%d", to), func(t *testing.T) {
			topic := fmt.Sprintf("change-20-%d", to)
			c.CreateTopic(t, topic, 1, 1, windowTopic(20))
			c.SetDelay(25 * time.Millisecond)
			t.Cleanup(func() { c.SetDelay(0) })
			p := agentProducer(t, c, nil)
			var changed atomic.Bool
			stop := watchWindows(p, time.Millisecond, func(string) int {
				if changed.Load() {
					return max(20, to)
				}
				return 20
			})
			const n = 4000
			r := startTopicRun(p, topic, n, 1024)
			for r.ackedCount() < n/4 {
				time.Sleep(5 * time.Millisecond)
			}
			require.Equal(t, 20, p.InFlightLimit(topic, 0))
			acked := r.ackedCount()
			changed.Store(true)
			c.AlterTopicConfig(t, topic, map[string]string{windowConfig: fmt.Sprint(to)})
			deadline := time.Now().Add(time.Minute)
			for p.InFlightLimit(topic, 0) != to && time.Now().Before(deadline) {
				time.Sleep(5 * time.Millisecond)
			}
			t.Logf("window changed 20 -> %d after %d records acknowledged; limit now %d", to, acked, p.InFlightLimit(topic, 0))
			sent := r.wait(t, 5*time.Minute)
			w := stop()
			t.Logf("stats: %v", w)
			assert.Empty(t, r.failures())
			assert.Empty(t, w.violations)
			assert.Equal(t, to, p.InFlightLimit(topic, 0))
			order := w.limitOrder[tp{topic, 0}]
			i := slices.Index(order, 20)
			assert.True(t, i >= 0 && slices.Contains(order[i+1:], to), "limit order %v: want 20, later %d", order, to)
			rep := checkLog(t, c, topic, 1, sent)
			assert.Equal(t, n, rep.Acked)
		})
	}
}

// testAgentMillionWithCuts: a million records at window 50 through the
// proxy (1 ms one-way) while it cuts a random connection every 150 ms on
// average: exactly once, in order; fate-unknown records may be absent or
// present once and are counted.
func testAgentMillionWithCuts(t *testing.T, c *Cluster) {
	const topic, partitions = "agent-million-w50", 1
	n := millionRecords(t)
	c.CreateTopic(t, topic, partitions, 1, windowTopic(50))
	c.SetDelay(time.Millisecond)
	t.Cleanup(func() { c.SetDelay(0) })
	p := newLonghaul(t, c.ProxiedBootstrap(), nil, producer.MaxInFlightRequestsPerConnection(64))
	warm := &producer.Record{Topic: topic, Value: []byte("warm-up")}
	warm.SetPartition(0)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, p.ProduceSync(ctx, warm).FirstErr())
	before := c.Proxy(0).Stats()
	cutStop, err := c.Proxy(0).CutRandomly(rand.New(rand.NewPCG(1269, 50)), 150*time.Millisecond)
	require.NoError(t, err)
	began := time.Now()
	stop := watchWindows(p, time.Millisecond, func(string) int { return 50 })
	run := startLonghaul(p, topic, n, partitions, 0)
	sent := run.wait(t, 8*time.Minute)
	took := time.Since(began)
	cutStop()
	w := stop()
	after := c.Proxy(0).Stats()
	st := p.Stats()
	t.Logf("%d records at window 50 in %v (%.0f rec/s); %d acked, %d failed; %d cuts; %d batches sent, %d retried, %d epoch bumps",
		n, took.Round(time.Millisecond), float64(n)/took.Seconds(), run.acked.Load(), run.failed.Load(), after.Cuts-before.Cuts, st.BatchesSent, st.BatchesRetried, st.EpochBumps)
	t.Logf("stats: %v", w)
	if f := run.failures(); f != "" {
		t.Logf("failures: %s", f)
	}
	require.NotEqual(t, before.Cuts, after.Cuts, "no connection was cut")
	assert.Empty(t, w.violations)
	assert.Equal(t, 50, p.InFlightLimit(topic, 0))
	sent[0] = append([]Sent{{Value: []byte("warm-up"), Outcome: Acked}}, sent[0]...)
	rep := checkLog(t, c, topic, partitions, sent)
	assert.Zero(t, rep.NotWritten, "records failed as not written despite a 10-minute delivery timeout")
}

// TestAgentSourceHash: the cache key of the built jar changes with any
// source byte or file name, so the harness rebuilds after an edit.
func TestAgentSourceHash(t *testing.T) {
	base := fstest.MapFS{"src/A.java": {Data: []byte("class A {}")}, "src/B.java": {Data: []byte("class B {}")}}
	h0, err := sourceHash(base)
	require.NoError(t, err)
	again, err := sourceHash(base)
	require.NoError(t, err)
	require.Equal(t, h0, again)
	edited := fstest.MapFS{"src/A.java": {Data: []byte("class A { }")}, "src/B.java": base["src/B.java"]}
	h1, err := sourceHash(edited)
	require.NoError(t, err)
	require.NotEqual(t, h0, h1, "edited source")
	renamed := fstest.MapFS{"src/C.java": base["src/A.java"], "src/B.java": base["src/B.java"]}
	h2, err := sourceHash(renamed)
	require.NoError(t, err)
	require.NotEqual(t, h0, h2, "renamed source")
	real, err := AgentSourceHash()
	require.NoError(t, err)
	jar, err := AgentJarPath(t.TempDir())
	require.NoError(t, err)
	require.Contains(t, jar, real[:16])
}

// TestWriteAgentJar: the jar has the Premain-Class manifest, the agent's
// classes and Byte Buddy's, without Byte Buddy's manifest, signatures or
// module descriptor (so it loads next to any Kafka installation).
func TestWriteAgentJar(t *testing.T) {
	dir := t.TempDir()
	classes := filepath.Join(dir, "classes")
	require.NoError(t, os.MkdirAll(filepath.Join(classes, "dev/longhaul/kip1269"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(classes, "dev/longhaul/kip1269/Agent.class"), []byte("agent"), 0o644))
	bb := filepath.Join(dir, "bb.jar")
	f, err := os.Create(bb)
	require.NoError(t, err)
	zw := zip.NewWriter(f)
	for _, name := range []string{"META-INF/MANIFEST.MF", "META-INF/BB.SF", "META-INF/versions/9/module-info.class", "net/bytebuddy/ByteBuddy.class", "net/bytebuddy/"} {
		w, err := zw.Create(name)
		require.NoError(t, err)
		fmt.Fprint(w, name)
	}
	require.NoError(t, zw.Close())
	require.NoError(t, f.Close())

	jar := filepath.Join(dir, "agent.jar")
	require.NoError(t, writeAgentJar(jar, classes, bb))
	zr, err := zip.OpenReader(jar)
	require.NoError(t, err)
	defer zr.Close()
	var names []string
	var manifest string
	for _, e := range zr.File {
		names = append(names, e.Name)
		if e.Name == "META-INF/MANIFEST.MF" {
			r, err := e.Open()
			require.NoError(t, err)
			b, err := io.ReadAll(r)
			r.Close()
			require.NoError(t, err)
			manifest = string(b)
		}
	}
	assert.ElementsMatch(t, []string{"META-INF/MANIFEST.MF", "dev/longhaul/kip1269/Agent.class", "net/bytebuddy/ByteBuddy.class"}, names)
	assert.Contains(t, manifest, "Premain-Class: "+agentMainClass+"\r\n")
}

// TestAgentBadArgument: an unknown agent argument stops the JVM before
// Kafka starts, naming the argument and the accepted ones.
func TestAgentBadArgument(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), jarTimeout)
	defer cancel()
	jar, err := EnsureAgent(ctx, CacheDir(), t.Logf)
	if errors.Is(err, ErrMissingTools) && !required() {
		t.Skipf("%v", err)
	}
	require.NoError(t, err)
	cmd := exec.CommandContext(ctx, "java", AgentFlag(jar, "tag=sometimes"), "-cp", filepath.Join(LibDir(CacheDir()), "*"), "kafka.Kafka")
	setDeathSignal(cmd)
	out, err := cmd.CombinedOutput()
	require.Error(t, err, "JVM started with a bad agent argument:\n%s", out)
	assert.Contains(t, string(out), `unknown argument "tag=sometimes" (want tag=always or tag=default)`)
	assert.NotContains(t, string(out), AgentLogPrefix+"patched", "nothing may be patched with a bad argument")
}
