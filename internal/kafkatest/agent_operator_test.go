package kafkatest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// agentJar builds (or finds) the agent jar for a test, skipping without
// the JDK and Maven unless LONGHAUL_REQUIRE_KAFKA=1.
func agentJar(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), jarTimeout)
	defer cancel()
	jar, err := EnsureAgent(ctx, CacheDir(), t.Logf)
	if err != nil {
		if errors.Is(err, ErrMissingTools) && !required() {
			t.Skipf("%v (LONGHAUL_REQUIRE_KAFKA=1 makes this a failure)", err)
		}
		t.Fatalf("kafkatest: %v", err)
	}
	return jar
}

// TestAgentRefusesOtherKafka checks what docs/kip1269-agent.md promises
// about versions: the agent stops a JVM whose Kafka is not 4.4.x (here
// 4.0.1's jars) or that has no Kafka at all, with exit status 1 and one
// FAILED line, before Kafka's main runs; on 4.4 (the control, same jar
// and main class) it patches every class and Kafka's main runs (it
// prints its usage, given no properties file).
func TestAgentRefusesOtherKafka(t *testing.T) {
	jar := agentJar(t)
	ctx, cancel := context.WithTimeout(context.Background(), jarTimeout)
	defer cancel()
	libs40, err := Kafka40.EnsureJars(ctx, t.Logf)
	if err != nil {
		if errors.Is(err, ErrMissingTools) && !required() {
			t.Skipf("%v (LONGHAUL_REQUIRE_KAFKA=1 makes this a failure)", err)
		}
		t.Fatal(err)
	}
	libs44, err := EnsureJars(ctx, CacheDir(), t.Logf)
	require.NoError(t, err)
	run := func(classpath string) (string, int) {
		cmd := exec.CommandContext(ctx, "java", AgentFlag(jar, ""), "-cp", classpath, "kafka.Kafka")
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatalf("java: %v", err)
		}
		return out.String(), cmd.ProcessState.ExitCode()
	}

	out, code := run(filepath.Join(libs40, "*"))
	require.Equal(t, 1, code, "Kafka 4.0.1 with the agent:\n%s", out)
	require.Contains(t, out, AgentLogPrefix+"FAILED refusing to start on Kafka 4.0.1: this agent patches Kafka 4.4.x only\n")
	require.NotContains(t, out, "will patch")
	require.NotContains(t, out, "USAGE", "Kafka's main must not run")

	out, code = run(t.TempDir())
	require.Equal(t, 1, code, "no Kafka with the agent:\n%s", out)
	require.Contains(t, out, AgentLogPrefix+"FAILED refusing to start: no kafka/kafka-version.properties on the class path")

	out, code = run(filepath.Join(libs44, "*"))
	require.Contains(t, out, AgentLogPrefix+"Kafka "+Version+"\n")
	require.NoError(t, checkAgentLog(out, true), "Kafka 4.4 with the agent:\n%s", out)
	require.Contains(t, out, "USAGE", "Kafka's main must run on 4.4 (exit %d)", code)
}

// histogram is what jcmd GC.class_histogram reports after its full GC.
type histogram struct {
	bytes     int64 // live heap, all classes
	instances map[string]int64
}

var histoLine = regexp.MustCompile(`^\s*\d+:\s+(\d+)\s+(\d+)\s+(\S+)`)
var histoTotal = regexp.MustCompile(`^Total\s+(\d+)\s+(\d+)`)

// liveHeap runs jcmd GC.class_histogram on the broker JVM: a full
// collection (as System.gc), then the live objects per class.
func liveHeap(t testing.TB, pid int) histogram {
	t.Helper()
	out, err := exec.Command("jcmd", strconv.Itoa(pid), "GC.class_histogram").CombinedOutput()
	require.NoError(t, err, "jcmd: %s", out)
	h := histogram{instances: map[string]int64{}}
	for _, l := range strings.Split(string(out), "\n") {
		if m := histoLine.FindStringSubmatch(l); m != nil {
			n, _ := strconv.ParseInt(m[1], 10, 64)
			h.instances[m[3]] += n
		} else if m := histoTotal.FindStringSubmatch(l); m != nil {
			h.bytes, _ = strconv.ParseInt(m[2], 10, 64)
		}
	}
	require.NotZero(t, h.bytes, "no Total line in jcmd output:\n%s", tail(string(out), 20))
	return h
}

// BenchmarkAgentStateMemory measures the broker heap that the KIP-1269
// agent's windows cost, on Apache Kafka 4.4 with the agent: for each
// window N in 5, 20, 50 and 200 a fresh 16-partition topic, then K
// producer ids (K = 12800/N, so every window sends 12,800 requests) each
// sending N one-record batches to every partition, which fills each
// producer-partition state to its window. The live heap (jcmd
// GC.class_histogram, after its full GC) before and after, divided by
// the K x 16 states, is the cost of one producer's state on one
// partition replica. The BatchMetadata count must grow by exactly
// states x N: each state holds a full window, no more.
//
//	go test -run '^$' -bench BenchmarkAgentStateMemory -benchtime 1x -timeout 30m ./internal/kafkatest
func BenchmarkAgentStateMemory(b *testing.B) {
	if _, err := exec.LookPath("jcmd"); err != nil && !required() {
		b.Skip("jcmd (JDK) not found")
	}
	const (
		partitions = 16
		requests   = 12800
		workers    = 4
		batchMeta  = "org.apache.kafka.storage.internals.log.BatchMetadata"
	)
	c := Start(b, Options{Agent: AgentOnAll, HeapMB: 1024})
	pid := c.nodes[0].cmd.Process.Pid
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	var t strings.Builder
	t.WriteString("| window N | producer ids | states (ids x 16 partitions) | live heap added | bytes per state | bytes per retained batch |\n|---:|---:|---:|---:|---:|---:|\n")
	for i := range b.N {
		for _, w := range []int{5, 20, 50, 200} {
			topic := fmt.Sprintf("mem-w%d-%d", w, i)
			c.CreateTopic(b, topic, partitions, 1, windowTopic(w))
			id := c.TopicID(b, topic)
			ids := requests / w
			before := liveHeap(b, pid)
			var wg sync.WaitGroup
			errs := make(chan error, workers)
			for wk := range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if err := fillStates(ctx, c.DirectAddr(0), topic, id, partitions, w, ids/workers+boolInt(wk < ids%workers)); err != nil {
						errs <- err
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				b.Fatal(err)
			}
			after := liveHeap(b, pid)
			states := int64(ids * partitions)
			if got := after.instances[batchMeta] - before.instances[batchMeta]; got != states*int64(w) {
				b.Fatalf("window %d: %d BatchMetadata added, want %d states x %d", w, got, states, w)
			}
			added := after.bytes - before.bytes
			perState := float64(added) / float64(states)
			fmt.Fprintf(&t, "| %d | %d | %d | %.1f MiB | %.0f | %.1f |\n", w, ids, states, float64(added)/(1<<20), perState, perState/float64(w))
			b.ReportMetric(perState, fmt.Sprintf("B/state-w%d", w))
		}
	}
	b.Logf("Kafka %s + KIP-1269 agent, one node, -Xmx1024m, %s:\n%s", Version, javaVersion(), t.String())
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// fillStates gets n producer ids and sends each w batches (sequences
// 0..w-1) to every partition of topic, one request per sequence.
func fillStates(ctx context.Context, addr, topic string, id [16]byte, partitions, w, n int) error {
	conn, err := Dial(ctx, addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	for range n {
		pid, epoch, err := InitProducerID(ctx, addr)
		if err != nil {
			return err
		}
		for seq := range w {
			req := kmsg.NewPtrProduceRequest()
			req.Version, req.Acks, req.TimeoutMillis = 13, 1, 30000
			rt := kmsg.NewProduceRequestTopic()
			rt.Topic, rt.TopicID = topic, id
			for p := range partitions {
				rp := kmsg.NewProduceRequestTopicPartition()
				rp.Partition = int32(p)
				rp.Records = IdempotentBatch(pid, epoch, int32(seq), [][]byte{[]byte("v")})
				rt.Partitions = append(rt.Partitions, rp)
			}
			req.Topics = append(req.Topics, rt)
			resp, err := conn.Request(ctx, req)
			if err != nil {
				return err
			}
			for _, t := range resp.(*kmsg.ProduceResponse).Topics {
				for _, p := range t.Partitions {
					if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
						return fmt.Errorf("producer %d seq %d partition %d: %w", pid, seq, p.Partition, err)
					}
				}
			}
		}
	}
	return nil
}

// javaVersion is the first line of java -version.
func javaVersion() string {
	out, _ := exec.Command("java", "-version").CombinedOutput()
	return firstLine(strings.TrimSpace(string(out)))
}
