package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/longhaul-kafka/longhaul/internal/cli"
	"github.com/longhaul-kafka/longhaul/internal/kafkatest"
	"github.com/longhaul-kafka/longhaul/producer"
	"github.com/longhaul-kafka/longhaul/producer/producertest"
)

func TestBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-commit-every", "0"},
		{"-commit-interval", "0s"},
		{"-input", "x", "-output", "x"},
		{"-transactional-id", ""},
		{"-partitions", "0"},
		{"-window", "4"},
		{"-idle-exit", "-1s"},
		{"extra"},
	} {
		var stderr bytes.Buffer
		status := run(context.Background(), args, io.Discard, &stderr)
		assert.Equal(t, cli.ExitUsage, status, "%v: %s", args, stderr.String())
	}
}

// TestCompareOutputFindsEachFault is the checker's negative control: a
// duplicate, a lost record, a reordering and a record too many are each
// reported, and the exact transform is not.
func TestCompareOutputFindsEachFault(t *testing.T) {
	in := map[int32][]*kgo.Record{0: {
		{Partition: 0, Offset: 0, Value: []byte("a")},
		{Partition: 0, Offset: 1, Value: []byte("b")},
		{Partition: 0, Offset: 2, Value: []byte("c")},
	}}
	out := func(idx ...int) map[int32][]*kgo.Record {
		var recs []*kgo.Record
		for i, k := range idx {
			recs = append(recs, &kgo.Record{Partition: 0, Offset: int64(i), Value: transform(in[0][k])})
		}
		return map[int32][]*kgo.Record{0: recs}
	}
	require.NoError(t, compareOutput(in, out(0, 1, 2)))
	for name, o := range map[string]map[int32][]*kgo.Record{
		"duplicate": out(0, 1, 1, 2),
		"lost":      out(0, 2),
		"reordered": out(0, 2, 1),
		"too many":  out(0, 1, 2, 2),
		"missing":   out(0, 1),
	} {
		assert.Error(t, compareOutput(in, o), name)
	}
	assert.Error(t, compareOutput(in, map[int32][]*kgo.Record{0: out(0, 1, 2)[0], 1: {{Partition: 1, Value: []byte("x")}}}), "output partition without input")
	assert.Equal(t, "RECORD 7 @2:41", string(transform(&kgo.Record{Partition: 2, Offset: 41, Value: []byte("record 7")})))
}

// TestEmbeddedDemo runs the program as README shows it: the embedded
// broker in-process, its own input, its own check.
func TestEmbeddedDemo(t *testing.T) {
	var stdout, stderr bytes.Buffer
	status := run(context.Background(), []string{"-records", "500", "-idle-exit", "1s"}, &stdout, &stderr)
	require.Equal(t, cli.ExitOK, status, "stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	assert.Contains(t, stdout.String(), "output checked read_committed: the transform of each of the 500 input records, once, in order")
	assert.Contains(t, stdout.String(), "committed transaction 1: ")
}

// TestExactlyOnceThroughKillsEmbedded runs the built program as a child
// process against the embedded broker (in the test's process, so the data
// outlives the child), kills it with SIGKILL twice mid-run, each time after
// it reported some committed transactions, and lets a third instance
// finish the input. The output read read_committed must be the transform
// of the input exactly once, in order per partition, and the group's
// committed offsets the end of the input. Each kill lands inside an open
// transaction with records in the output's log: before it the
// coordinators answer COORDINATOR_LOAD_IN_PROGRESS (so the open
// transaction can neither send its offsets nor end) until the coordinator
// has the transaction Ongoing and some output partition holds records at
// or above its last stable offset; the next instance's InitTransactions
// must then fence and abort it, so the coordinator counts two fenced
// transactions and the output's log holds records no read_committed
// reader sees.
func TestExactlyOnceThroughKillsEmbedded(t *testing.T) {
	const topicIn, topicOut, parts = "in", "out", 3
	c := producertest.NewCluster(t, 1,
		producertest.Topic{Name: topicIn, Partitions: parts},
		producertest.Topic{Name: topicOut, Partitions: parts, Window: 50})
	bootstrap := []string{c.Addr()}
	plan := killPlan{
		before: func(ctx context.Context) {
			c.InjectCoordinatorError(kerr.CoordinatorLoadInProgress.Code, math.MaxInt32)
			for !openWithRecords(c, "eos-1", topicOut, parts) {
				select {
				case <-ctx.Done():
					t.Fatalf("no open transaction with records in %s: %v", topicOut, ctx.Err())
				case <-time.After(5 * time.Millisecond):
				}
			}
		},
		after: func() { c.InjectCoordinatorError(0, 0) },
	}
	n := testExactlyOnceThroughKills(t, bootstrap, topicIn, topicOut, 6000, plan)
	for p := range int32(parts) {
		off, ok := c.CommittedOffset("eos", topicIn, p)
		assert.True(t, ok, "no committed offset for %s/%d", topicIn, p)
		assert.Equal(t, int64(len(c.Records(topicIn, p))), off, "committed offset of %s/%d", topicIn, p)
	}
	st := c.TransactionStats()
	aborted := 0
	for p := range int32(parts) {
		aborted += len(c.Records(topicOut, p)) - len(c.CommittedRecords(topicOut, p))
	}
	t.Logf("coordinator: %d committed, %d aborted, %d fenced, %d CONCURRENT_TRANSACTIONS; %d input records; %d records of aborted transactions in the output's log", st.Committed, st.Aborted, st.Fenced, st.ConcurrentTransactions, n, aborted)
	assert.Equal(t, int64(2), st.Fenced, "each kill left an open transaction that the next instance fenced")
	assert.Positive(t, aborted, "records of the killed instances' open transactions are in the log, aborted")
}

// openWithRecords reports whether the transactional id's transaction is
// Ongoing at its coordinator and some partition of topic holds a record
// at or above its last stable offset (a record of that transaction).
func openWithRecords(c *producertest.Cluster, txnID, topic string, parts int32) bool {
	if x, ok := c.Transaction(txnID); !ok || x.State != "Ongoing" {
		return false
	}
	for p := range parts {
		recs := c.Records(topic, p)
		if len(recs) > 0 && recs[len(recs)-1].Offset >= c.LastStableOffset(topic, p) {
			return true
		}
	}
	return false
}

// TestExactlyOnceThroughKillsOnKafka is the same on Apache Kafka 4.4 (one
// node, harness defaults; it skips without Java and Maven, see
// kafkatest.Start).
//
//	go test ./examples/eos/ -run OnKafka -v
func TestExactlyOnceThroughKillsOnKafka(t *testing.T) {
	c := kafkatest.Start(t, kafkatest.Options{})
	const topicIn, topicOut = "in", "out"
	c.CreateTopic(t, topicIn, 3, 1, nil)
	c.CreateTopic(t, topicOut, 3, 1, nil)
	// Into the next transaction (commits come every 50 ms or 50
	// records): most kills land with one open.
	testExactlyOnceThroughKills(t, strings.Split(c.Bootstrap(), ","), topicIn, topicOut, 6000,
		killPlan{before: func(context.Context) { time.Sleep(30 * time.Millisecond) }})
}

// killPlan says when a kill lands: before runs once the child reported
// its commits and returns when SIGKILL is to be sent; after, if set, runs
// once the child is dead.
type killPlan struct {
	before func(ctx context.Context)
	after  func()
}

// testExactlyOnceThroughKills writes n input records, runs the program
// three times (the first two SIGKILLed after some commits, as plan says)
// and checks the output and the group's committed offsets. It returns n.
func testExactlyOnceThroughKills(t *testing.T, bootstrap []string, topicIn, topicOut string, n int, plan killPlan) int {
	bin := filepath.Join(t.TempDir(), "eos")
	build := exec.Command("go", "build", "-o", bin, ".")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "go build: %s", out)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	writeInput(t, ctx, bootstrap, topicIn, n)
	args := []string{"-brokers", strings.Join(bootstrap, ","), "-input", topicIn, "-output", topicOut,
		"-commit-every", "50", "-commit-interval", "50ms", "-idle-exit", "5s"}
	for i, killAfter := range []int{10, 10, 0} {
		lines, killed := runChild(t, ctx, bin, args, killAfter, plan)
		t.Logf("instance %d: %d lines, killed %v; last: %q", i+1, len(lines), killed, lines[max(0, len(lines)-1):])
		require.Equal(t, killAfter > 0, killed, "instance %d must be killed mid-run only when asked (did the input run out first?)", i+1)
		require.NotEmpty(t, lines)
		assert.Contains(t, lines[0], "initialized; any previous instance is fenced", "instance %d", i+1)
	}
	in, err := readAll(ctx, bootstrap, topicIn, n)
	require.NoError(t, err)
	outRecs, err := readAll(ctx, bootstrap, topicOut, n)
	require.NoError(t, err)
	require.NoError(t, compareOutput(in, outRecs))
	committed, err := committedOffsets(ctx, bootstrap, "eos", topicIn, int32(len(in)))
	require.NoError(t, err)
	for p, recs := range in {
		end := recs[len(recs)-1].Offset + 1 // the input is not transactional: no markers
		assert.Equal(t, end, committed[p], "group eos's committed offset of %s/%d: the input's end", topicIn, p)
	}
	return n
}

// committedOffsets fetches group's committed offsets of partitions 0 to
// parts-1 of topic (OffsetFetch with RequireStable: offsets of a
// transaction still completing are waited for), -1 for none.
func committedOffsets(ctx context.Context, bootstrap []string, group, topic string, parts int32) (map[int32]int64, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap...))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group, req.RequireStable = group, true
	rt := kmsg.NewOffsetFetchRequestTopic()
	rt.Topic = topic
	for p := range parts {
		rt.Partitions = append(rt.Partitions, p)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, fmt.Errorf("OffsetFetch %s: %w", group, err)
	}
	out := map[int32]int64{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return nil, fmt.Errorf("OffsetFetch %s %s/%d: %w", group, t.Topic, p.Partition, err)
			}
			out[p.Partition] = p.Offset
		}
	}
	return out, nil
}

// writeInput writes n keyed records (idempotently) to topic.
func writeInput(t *testing.T, ctx context.Context, bootstrap []string, topic string, n int) {
	p, err := producer.New(producer.BootstrapServers(bootstrap...), producer.ClientID("eos-test-input"))
	require.NoError(t, err)
	defer p.Close(ctx)
	recs := make([]*producer.Record, n)
	for i := range recs {
		recs[i] = &producer.Record{Topic: topic, Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "record %d", i)}
	}
	require.NoError(t, p.ProduceSync(ctx, recs...).FirstErr())
}

// runChild runs bin with args, reading its stdout by line. With
// killAfter > 0 it sends SIGKILL once the child printed killAfter
// "committed transaction" lines and plan.before returned, and reports
// killed; otherwise the child must exit 0 by itself.
func runChild(t *testing.T, ctx context.Context, bin string, args []string, killAfter int, plan killPlan) (lines []string, killed bool) {
	cmd := exec.CommandContext(ctx, bin, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	commits := 0
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if strings.HasPrefix(sc.Text(), "committed transaction ") {
			commits++
		}
		if killAfter > 0 && commits == killAfter && !killed {
			plan.before(ctx)
			require.NoError(t, cmd.Process.Kill()) // SIGKILL
			killed = true
		}
	}
	err = cmd.Wait()
	if killed && plan.after != nil {
		plan.after()
	}
	if killed {
		var ee *exec.ExitError
		require.ErrorAs(t, err, &ee, "stderr:\n%s", stderr.String())
		return lines, !ee.Exited() // ended by the signal, not by itself
	}
	require.NoError(t, err, "stdout:\n%s\nstderr:\n%s", strings.Join(lines, "\n"), stderr.String())
	return lines, false
}
