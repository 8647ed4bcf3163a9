package kafkatest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/longhaul-kafka/longhaul/producer"
	"github.com/longhaul-kafka/longhaul/protocol"
)

// txnMatrixCluster is one cluster of the transactions matrix: a release,
// the transaction version it is formatted at (0: the release's own, for
// releases before the feature), and the windows of its topics (one
// transactional producer each, all at once; windows above 5 need the
// KIP-1269 agent).
type txnMatrixCluster struct {
	release  Release
	tv       int
	features map[string]int
	windows  []int
}

func (m txnMatrixCluster) name() string {
	return fmt.Sprintf("%s-TV%d", m.release.version(), m.tv)
}

// txnMatrix returns the clusters to run. In CI all of them, each for a
// protocol difference: Kafka 4.4 with the agent under transaction version
// 2 (windows 5, 20, 50) and under version 1 (Produce capped at v11 below
// the agent's v14: every window stays at 5), and the compatibility
// releases under version 1: 4.0 (formatted at version 1: it offers
// Produce v12, EndTxn v5 and TxnOffsetCommit v5, which version 1 must not
// use), 3.9 (KRaft; the partition verification of KIP-890 part 1, from
// 3.6; Produce v11, InitProducerId v5), 2.8 (ZooKeeper; AddPartitionsToTxn
// v3, the first flexible one, and InitProducerId v4: PRODUCER_FENCED,
// KIP-588) and 2.4 (ZooKeeper; AddPartitionsToTxn v1, EndTxn v1, Produce
// v8, and InitProducerId v2: no epoch bump before KIP-360, and
// INVALID_PRODUCER_EPOCH where later releases answer PRODUCER_FENCED). LONGHAUL_TXN_RELEASES (comma-separated
// versions, "4.4.0" running both of its clusters, or cluster names as the
// subtests have them, "4.4.0-TV1") runs only those; LONGHAUL_LONG=1 makes
// each run longer (txnRecords).
func txnMatrix(t *testing.T) []txnMatrixCluster {
	tv1 := map[string]int{protocol.FeatureTransactionVersion: 1}
	all := []txnMatrixCluster{
		{release: Kafka44, tv: 2, windows: []int{5, 20, 50}},
		{release: Kafka44, tv: 1, features: tv1, windows: []int{5, 20, 50}},
		{release: Kafka40, tv: 1, features: tv1, windows: []int{5}},
		{release: Kafka39, tv: 1, windows: []int{5}},
		{release: Kafka28, tv: 1, windows: []int{5}},
		{release: Kafka24, tv: 1, windows: []int{5}},
	}
	want := map[string]bool{}
	switch s := os.Getenv("LONGHAUL_TXN_RELEASES"); {
	case s != "":
		for _, v := range strings.Split(s, ",") {
			want[strings.TrimSpace(v)] = true
		}
	default:
		return all
	}
	var out []txnMatrixCluster
	for _, m := range all {
		if want[m.release.version()] || want[m.name()] {
			out = append(out, m)
		}
	}
	require.NotEmpty(t, out, "LONGHAUL_TXN_RELEASES selects no release")
	return out
}

// txnRecords is the size of each scenario's run: records per transaction
// and transactions after the last fault. LONGHAUL_LONG=1 makes both
// larger.
func txnRecords() (perTxn, tail int) {
	if os.Getenv("LONGHAUL_LONG") == "1" {
		return 4000, 20
	}
	return 1600, 3
}

// TestTxnMatrix runs transactional longhaul producers on 3-node clusters
// of each release of txnMatrix: transactions of many records over 16
// partitions (replication 3, min.insync.replicas 2) through the proxies
// with random connection cuts, one transaction in four aborted on
// purpose, a leader move of a quarter of the partitions (each read back
// from Metadata: a new leader at a higher leader epoch), and
// SIGKILL of the broker that is the transaction coordinator of the first
// producer, restarted while the producers go on. Then an independent
// read_committed kgo consumer must find each committed transaction once,
// complete and in order, nothing of an aborted one, and a transaction
// whose commit outcome is unknown either complete or absent. Last, a
// second producer with the first one's transactional id fences it: the
// first's next transaction ends in ErrProducerFenced (at its commit, or
// at the abort a record refused for its old epoch calls for, as Java has
// it), the second commits.
//
// On agent clusters the topic windows 5, 20 and 50 each get their own
// producer; Stats sampled every millisecond never show more batches in
// flight than the learned window. Under transaction version 2 windows 20
// and 50 are used past 5 inside transactions; under version 1 every
// producer stays at 5: its transactions send Produce v11 at most, below
// the agent's v14 that announces the window.
//
//	go test ./internal/kafkatest/ -run TestTxnMatrix -v
//	LONGHAUL_LONG=1 go test ./internal/kafkatest/ -run TestTxnMatrix -v -timeout 60m
func TestTxnMatrix(t *testing.T) {
	for _, m := range txnMatrix(t) {
		t.Run(m.name(), func(t *testing.T) {
			began := time.Now()
			testTxnMatrixCluster(t, m)
			t.Logf("%s: done in %v", m.name(), time.Since(began).Round(time.Second))
		})
	}
}

const txnMatrixPartitions = 16

// txnMatrixTimeout is the transactions' timeout (transaction.timeout.ms,
// and the brokers' transaction.max.timeout.ms): longer than any wait of
// the test (waitDone's 10 minutes). A transaction open longer than its
// timeout is aborted by the coordinator under a bumped epoch, which under
// transaction version 1 fences the producer holding the old one: its next
// record fails INVALID_PRODUCER_EPOCH and its abort PRODUCER_FENCED, as
// Java's producer sees it. With 5 minutes that happened once on a loaded
// machine, where the killed broker took about 7 minutes to restart and the
// transaction open across the kill did not end before.
const txnMatrixTimeout = 20 * time.Minute

// txnOutcome is what the producer reported for one transaction.
type txnOutcome int

const (
	txnCommitted txnOutcome = iota
	txnAborted              // on purpose, or after an abortable error
	txnUnknown              // ErrCommitUnknown: complete or absent
)

// txnRun is one transactional producer's run on one topic: transaction k
// writes records "<topic>-t<k>-<i>", record i to partition i%16.
type txnRun struct {
	topic    string
	window   int
	txnID    string
	p        *producer.Producer
	perTxn   int
	outcomes []txnOutcome // by transaction
	mu       sync.Mutex
	errs     map[string]int // abortable errors seen, by text
	done     atomic.Int64   // transactions ended
	longest  time.Duration  // the longest transaction, begin to end (mu)
	stop     atomic.Bool
	finished chan struct{}
	fatal    error
}

// txnValue is record i of transaction k, padded with '.' to 100 bytes so
// that a transaction's records fill about 11 batches of 1 KiB per
// partition.
func txnValue(topic string, k, i int) string {
	v := fmt.Sprintf("%s-t%d-%d", topic, k, i)
	return v + strings.Repeat(".", max(0, 100-len(v)))
}

// parseTxnValue returns the transaction and record index of a value.
func parseTxnValue(topic, v string) (k, i int, ok bool) {
	rest, found := strings.CutPrefix(strings.TrimRight(v, "."), topic+"-t")
	if !found {
		return 0, 0, false
	}
	ks, is, found := strings.Cut(rest, "-")
	if !found {
		return 0, 0, false
	}
	k, err1 := strconv.Atoi(ks)
	i, err2 := strconv.Atoi(is)
	return k, i, err1 == nil && err2 == nil
}

func (r *txnRun) run(ctx context.Context) {
	defer close(r.finished)
	for k := 0; !r.stop.Load(); k++ {
		began := time.Now()
		out, err := r.one(ctx, k)
		took := time.Since(began)
		if err != nil {
			r.fatal = fmt.Errorf("transaction %d (after %v): %w", k, took.Round(time.Millisecond), err)
			return
		}
		r.mu.Lock()
		r.outcomes = append(r.outcomes, out)
		r.longest = max(r.longest, took)
		r.mu.Unlock()
		r.done.Add(1)
	}
}

// one runs transaction k: commits it, or aborts it when k%4 == 3 or an
// abortable error came. Fenced and fatal errors end the run.
func (r *txnRun) one(ctx context.Context, k int) (txnOutcome, error) {
	if err := r.p.BeginTransaction(); err != nil {
		return 0, fmt.Errorf("begin: %w", err)
	}
	for i := range r.perTxn {
		rec := &producer.Record{Topic: r.topic, Value: []byte(txnValue(r.topic, k, i))}
		rec.SetPartition(int32(i % txnMatrixPartitions))
		r.p.Produce(ctx, rec, nil)
	}
	var err error
	if k%4 == 3 {
		err = r.p.AbortTransaction(ctx)
		if err != nil {
			return 0, fmt.Errorf("abort: %w", err)
		}
		return txnAborted, nil
	}
	err = r.p.CommitTransaction(ctx)
	switch {
	case err == nil:
		return txnCommitted, nil
	case errors.Is(err, producer.ErrTransactionAbortable):
		r.mu.Lock()
		r.errs[err.Error()]++
		r.mu.Unlock()
		if aerr := r.p.AbortTransaction(ctx); aerr != nil {
			return 0, fmt.Errorf("abort after %v: %w", err, aerr)
		}
		return txnAborted, nil
	case errors.Is(err, producer.ErrCommitUnknown):
		r.mu.Lock()
		r.errs[err.Error()]++
		r.mu.Unlock()
		// The next InitTransactions (lazily, at the next begin) settles
		// what is left.
		return txnUnknown, nil
	default:
		return 0, fmt.Errorf("commit: %w", err)
	}
}

// waitDone waits until the run ended at least n transactions.
func (r *txnRun) waitDone(t *testing.T, n int64, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for r.done.Load() < n {
		select {
		case <-r.finished:
			t.Fatalf("%s: run ended after %d transactions: %v", r.topic, r.done.Load(), r.fatal)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: only %d of %d transactions ended after %v", r.topic, r.done.Load(), n, timeout)
		}
	}
}

func testTxnMatrixCluster(t *testing.T, m txnMatrixCluster) {
	agent := m.windows[len(m.windows)-1] > 5
	// The transactions' timeout outlasts every wait of the test, so a
	// transaction that stalls fails the test as a stall (waitDone), not as
	// the coordinator's timeout abort fencing the producer.
	o := Options{Nodes: 3, Release: m.release, Features: m.features,
		BrokerConfig: map[string]string{"transaction.max.timeout.ms": strconv.Itoa(int(txnMatrixTimeout.Milliseconds()))}}
	if !m.release.KRaft() {
		// A killed broker's registration lasts until its ZooKeeper
		// session expires; it cannot restart before (below).
		o.BrokerConfig["zookeeper.session.timeout.ms"] = "6000"
	}
	if agent {
		o.Agent = AgentOnAll
	}
	c := Start(t, o)
	keepTxnServerLogs(t, c, m.name())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	if m.release.KRaft() && major(m.release.version()) >= 4 {
		av, err := APIVersions(ctx, c.DirectAddr(0))
		require.NoError(t, err)
		level := int16(-1)
		for _, f := range av.FinalizedFeatures {
			if f.Name == protocol.FeatureTransactionVersion {
				level = f.MaxVersionLevel
			}
		}
		require.EqualValues(t, m.tv, level, "finalized transaction.version")
	}
	perTxn, tail := txnRecords()
	c.SetDelay(5 * time.Millisecond) // 10 ms round trips: batches pile up in flight
	t.Cleanup(func() { c.SetDelay(0) })

	var runs []*txnRun
	maxWindow := map[string]int{}
	for _, w := range m.windows {
		topic := fmt.Sprintf("txn-w%d", w)
		cfg := MergeConfig(windowTopic(w), map[string]string{"min.insync.replicas": "2"})
		if m.release.KRaft() {
			c.CreateTopic(t, topic, txnMatrixPartitions, 3, cfg)
		} else {
			createTopicAtController(t, ctx, c, topic, cfg)
		}
		// Under version 1 a transaction's Produce stays at v11 (from v12
		// a broker adds the partition itself, which version 1 must not
		// have), below KIP-1269's v14: no window is announced, 5 it is.
		maxWindow[topic] = w
		if m.tv < 2 {
			maxWindow[topic] = 5
		}
		r := &txnRun{topic: topic, window: w, txnID: "matrix-" + topic, perTxn: perTxn, errs: map[string]int{}, finished: make(chan struct{})}
		r.p = newLonghaul(t, c.ProxiedBootstrap(), nil, append(txnDebugLog(t, m.name()+"-"+r.txnID),
			producer.TransactionalID(r.txnID),
			producer.TransactionTimeout(txnMatrixTimeout),
			producer.BatchSize(1024), // about 9 records a batch: 11 batches per partition and transaction
			producer.Linger(time.Millisecond),
			producer.MaxInFlightRequestsPerConnection(64),
		)...)
		runs = append(runs, r)
	}
	for _, r := range runs {
		ictx, icancel := context.WithTimeout(ctx, 3*time.Minute)
		require.NoError(t, r.p.InitTransactions(ictx), "%s: InitTransactions", r.txnID)
		icancel()
	}
	watches := make([]func() *windowWatch, len(runs))
	for i, r := range runs {
		watches[i] = watchWindows(r.p, time.Millisecond, func(topic string) int { return maxWindow[topic] })
	}
	var stops []func()
	for i := range c.Nodes() {
		s, err := c.Proxy(i).CutRandomly(rand.New(rand.NewPCG(31, uint64(i))), 700*time.Millisecond)
		require.NoError(t, err)
		stops = append(stops, s)
	}
	stopCuts := func() {
		for _, s := range stops {
			s()
		}
		stops = nil
	}
	defer func() { stopCuts() }()
	for _, r := range runs {
		go r.run(ctx)
	}
	waitAll := func(more int64) {
		targets := make([]int64, len(runs))
		for i, r := range runs {
			targets[i] = r.done.Load() + more
		}
		for i, r := range runs {
			r.waitDone(t, targets[i], 10*time.Minute)
		}
	}
	waitAll(2)

	// A leader move: a quarter of each topic's partitions to the next node,
	// on every release (ZooKeeper ones through their controller).
	moveBegan := time.Now()
	var moves []string
	for _, r := range runs {
		for p := int32(0); p < txnMatrixPartitions; p += 4 {
			before := c.Partition(t, r.topic, p)
			to := (before.Leader + 1) % int32(c.Nodes())
			c.MoveLeader(t, r.topic, p, to)
			after := c.Partition(t, r.topic, p)
			require.Equal(t, to, after.Leader, "%s/%d: leader after the move (was %d)", r.topic, p, before.Leader)
			require.Greater(t, after.LeaderEpoch, before.LeaderEpoch, "%s/%d: leader epoch after the move", r.topic, p)
			moves = append(moves, fmt.Sprintf("%s/%d %d->%d (epoch %d->%d)", r.topic, p, before.Leader, after.Leader, before.LeaderEpoch, after.LeaderEpoch))
		}
	}
	t.Logf("moved leaders in %v: %s", time.Since(moveBegan).Round(time.Millisecond), strings.Join(moves, ", "))
	waitAll(2)

	// SIGKILL of the first producer's coordinator, restarted meanwhile.
	coord := txnCoordinator(t, ctx, c, runs[0].txnID)
	c.KillNode(int(coord))
	killed := time.Now()
	t.Logf("SIGKILL node %d, transaction coordinator of %s, after %d transactions", coord, runs[0].txnID, runs[0].done.Load())
	if !m.release.KRaft() {
		waitUnregistered(t, ctx, c, coord)
	}
	c.RestartNode(t, int(coord))
	t.Logf("node %d restarted %v after the SIGKILL, after %d transactions", coord, time.Since(killed).Round(time.Millisecond), runs[0].done.Load())
	waitAll(int64(tail))
	stopCuts()
	for _, r := range runs {
		r.stop.Store(true)
	}
	for i, r := range runs {
		select {
		case <-r.finished:
		case <-time.After(10 * time.Minute):
			t.Fatalf("%s: the last transaction did not end", r.topic)
		}
		require.NoError(t, r.fatal, "%s", r.topic)
		w := watches[i]()
		t.Logf("%s (window %d): %s; abortable or unknown: %v; longest transaction %v", r.topic, r.window, w, r.errs, r.longest.Round(time.Millisecond))
		assert.Empty(t, w.violations, "%s: more batches in flight than the learned window", r.topic)
		if maxWindow[r.topic] > 5 {
			most := 0
			for k, v := range w.maxInFlight {
				if k.topic == r.topic {
					most = max(most, v)
				}
			}
			assert.Greater(t, most, 5, "%s: window %d never used past 5 inside transactions", r.topic, r.window)
		}
	}
	for _, r := range runs {
		checkTxnLog(t, c, r)
	}
	checkFencing(t, ctx, c, runs[0])
}

// txnDebugLog returns a Logger option writing the producer's debug log
// (each transactional request and answer, each failed batch) to
// $LONGHAUL_TXN_LOG/name.log when that directory is set, none otherwise.
func txnDebugLog(t testing.TB, name string) []producer.Opt {
	dir := os.Getenv("LONGHAUL_TXN_LOG")
	if dir == "" {
		return nil
	}
	f, err := os.Create(filepath.Join(dir, name+".log"))
	require.NoError(t, err)
	t.Cleanup(func() { f.Close() })
	return []producer.Opt{producer.Logger(slog.New(slog.NewTextHandler(f, &slog.HandlerOptions{Level: slog.LevelDebug})))}
}

// keepTxnServerLogs copies every node's server.log to
// $LONGHAUL_TXN_LOG/<name>-node<i>-server.log when the test fails and that
// directory is set (the cluster's own directory goes with the test).
func keepTxnServerLogs(t *testing.T, c *Cluster, name string) {
	dir := os.Getenv("LONGHAUL_TXN_LOG")
	if dir == "" {
		return
	}
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for i, n := range c.nodes {
			if data, err := os.ReadFile(n.logPath()); err == nil {
				os.WriteFile(filepath.Join(dir, fmt.Sprintf("%s-node%d-server.log", name, i)), data, 0o644)
			}
		}
	})
}

// createTopicAtController creates a topic of txnMatrixPartitions
// partitions, replication 3, through a kgo client, which sends CreateTopics
// to the controller as a ZooKeeper-mode broker requires (KRaft brokers
// forward it themselves), and waits until every partition has a leader.
func createTopicAtController(t *testing.T, ctx context.Context, c *Cluster, topic string, cfg map[string]string) {
	t.Helper()
	cl := c.Client(t)
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 30000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, txnMatrixPartitions, 3
	for k, v := range cfg {
		rc := kmsg.NewCreateTopicsRequestTopicConfig()
		rc.Name, rc.Value = k, kmsg.StringPtr(v)
		rt.Configs = append(rt.Configs, rc)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	require.NoError(t, err, "CreateTopics %s", topic)
	for _, tr := range resp.Topics {
		require.Zero(t, tr.ErrorCode, "CreateTopics %s: %v", topic, kerr.ErrorForCode(tr.ErrorCode))
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		mt, err := c.topicMetadata(ctx, c.DirectAddr(0), topic)
		led := 0
		if err == nil {
			for _, p := range mt.Partitions {
				if p.Leader >= 0 {
					led++
				}
			}
		}
		if led == txnMatrixPartitions {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d of %d partitions with a leader after 2 minutes (%v)", topic, led, txnMatrixPartitions, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitUnregistered waits until the running nodes no longer list killed
// node, in ZooKeeper mode when its session expired: a broker restarted
// before that finds its old registration and exits.
func waitUnregistered(t *testing.T, ctx context.Context, c *Cluster, killed int32) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	other := c.DirectAddr(int((killed + 1) % int32(c.Nodes())))
	for {
		n, err := brokerCount(ctx, other)
		if err == nil && n == c.Nodes()-1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %d still registered 2 minutes after SIGKILL (%d brokers, %v)", killed, n, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// txnCoordinator asks a running node for the transaction coordinator of
// id, retrying while it is not known.
func txnCoordinator(t *testing.T, ctx context.Context, c *Cluster, id string) int32 {
	t.Helper()
	for {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorType = 1
		req.CoordinatorKey = id
		req.CoordinatorKeys = []string{id}
		resp, err := c.request(ctx, req)
		if err == nil {
			r := resp.(*kmsg.FindCoordinatorResponse)
			node, code := r.NodeID, r.ErrorCode
			if len(r.Coordinators) > 0 {
				node, code = r.Coordinators[0].NodeID, r.Coordinators[0].ErrorCode
			}
			if code == 0 {
				return node
			}
			err = kerr.ErrorForCode(code)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("FindCoordinator %s: %v", id, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// checkTxnLog reads r's topic read_committed and checks every partition
// against r's outcomes.
func checkTxnLog(t *testing.T, c *Cluster, r *txnRun) {
	t.Helper()
	r.mu.Lock()
	outcomes := append([]txnOutcome(nil), r.outcomes...)
	r.mu.Unlock()
	want := 0
	counts := map[txnOutcome]int{}
	for _, o := range outcomes {
		counts[o]++
		if o == txnCommitted {
			want += r.perTxn
		}
	}
	got := readCommittedTopic(t, c, r.topic, want)
	err := checkTxnPartitions(r.topic, r.perTxn, outcomes, got)
	t.Logf("%s: %d transactions committed, %d aborted, %d unknown; %d committed records expected", r.topic, counts[txnCommitted], counts[txnAborted], counts[txnUnknown], want)
	require.NoError(t, err, "%s: the read_committed log", r.topic)
	require.Positive(t, counts[txnCommitted])
	require.Positive(t, counts[txnAborted])
}

// checkTxnPartitions checks that each partition holds, in order, the
// records of each committed transaction (and of each unknown one found
// at all) for that partition, once, and nothing of the others. A value
// written by no transaction of the run is an error too.
func checkTxnPartitions(topic string, perTxn int, outcomes []txnOutcome, got map[int32][]string) error {
	present := map[int]bool{} // unknown transactions with any record read
	for _, vs := range got {
		for _, v := range vs {
			if k, _, ok := parseTxnValue(topic, v); ok && k < len(outcomes) && outcomes[k] == txnUnknown {
				present[k] = true
			}
		}
	}
	var errs []error
	for p := range int32(txnMatrixPartitions) {
		var want []string
		for k, o := range outcomes {
			if o != txnCommitted && !(o == txnUnknown && present[k]) {
				continue
			}
			for i := int(p); i < perTxn; i += txnMatrixPartitions {
				want = append(want, txnValue(topic, k, i))
			}
		}
		have := got[p]
		for i := range max(len(want), len(have)) {
			switch {
			case i >= len(have):
				errs = append(errs, fmt.Errorf("partition %d: %d records missing from %q on", p, len(want)-i, want[i]))
			case i >= len(want):
				errs = append(errs, fmt.Errorf("partition %d: %d records too many from %q on", p, len(have)-i, have[i]))
			case have[i] != want[i]:
				errs = append(errs, fmt.Errorf("partition %d, record %d: %q, want %q", p, i, have[i], want[i]))
			default:
				continue
			}
			break
		}
	}
	for p := range got {
		if p < 0 || p >= txnMatrixPartitions {
			errs = append(errs, fmt.Errorf("records in partition %d", p))
		}
	}
	return errors.Join(errs...)
}

// readCommittedTopic reads topic from the start with an independent
// read_committed kgo consumer until it has want records and 3 s more
// passed with nothing new (a record too many would show), or 5 minutes.
func readCommittedTopic(t *testing.T, c *Cluster, topic string, want int) map[int32][]string {
	t.Helper()
	cl := c.Client(t, kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	defer cl.Close()
	out := map[int32][]string{}
	n := 0
	deadline := time.Now().Add(5 * time.Minute)
	quiet := time.Time{}
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		fs := cl.PollFetches(ctx)
		cancel()
		k := 0
		fs.EachRecord(func(r *kgo.Record) {
			out[r.Partition] = append(out[r.Partition], string(r.Value))
			k++
		})
		n += k
		if n < want || k > 0 {
			quiet = time.Time{}
			continue
		}
		if quiet.IsZero() {
			quiet = time.Now()
		}
		if time.Since(quiet) >= 3*time.Second {
			break
		}
	}
	return out
}

// checkFencing starts a second producer with r's transactional id: its
// InitTransactions fences r's producer, whose next transaction must fail
// with ErrProducerFenced (at commit, or at the abort that a record
// refused for its old epoch calls for), and the second producer's
// transaction commits and is read.
func checkFencing(t *testing.T, ctx context.Context, c *Cluster, r *txnRun) {
	t.Helper()
	p2 := newLonghaul(t, c.ProxiedBootstrap(), nil, producer.TransactionalID(r.txnID), producer.TransactionTimeout(5*time.Minute))
	ictx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	require.NoError(t, p2.InitTransactions(ictx), "second producer's InitTransactions")

	err := r.p.BeginTransaction()
	var produceErr, commitErr error
	if err == nil {
		rec := &producer.Record{Topic: r.topic, Value: []byte("zombie")}
		rec.SetPartition(0)
		res := r.p.ProduceSync(ictx, rec)
		produceErr = res.FirstErr()
		commitErr = r.p.CommitTransaction(ictx)
		err = commitErr
		// A partition leader answers the old epoch INVALID_PRODUCER_EPOCH,
		// which leaves the transaction abortable (KIP-588, as in Java):
		// the abort it calls for meets the coordinator's PRODUCER_FENCED.
		if errors.Is(err, producer.ErrTransactionAbortable) {
			err = r.p.AbortTransaction(ictx)
		}
	}
	t.Logf("fenced producer: record %v; commit %v; then %v", produceErr, commitErr, err)
	require.ErrorIs(t, err, producer.ErrProducerFenced, "the older producer's transaction after the newer InitTransactions")
	// Only Close is left: a new transaction is refused with the same error.
	assert.ErrorIs(t, r.p.BeginTransaction(), producer.ErrProducerFenced, "begin after fencing")

	require.NoError(t, p2.BeginTransaction())
	rec := &producer.Record{Topic: r.topic, Value: []byte("successor")}
	rec.SetPartition(1)
	p2.Produce(ictx, rec, nil)
	require.NoError(t, p2.CommitTransaction(ictx), "the newer producer commits")
	got := readCommittedTopic(t, c, r.topic, 1)
	var zombie, successor int
	for _, vs := range got {
		for _, v := range vs {
			switch v {
			case "zombie":
				zombie++
			case "successor":
				successor++
			}
		}
	}
	assert.Zero(t, zombie, "the fenced producer's record is read")
	assert.Equal(t, 1, successor, "the newer producer's record, read once")
}

// TestCheckTxnPartitionsFindsEachFault is the log checker's negative
// control (no Kafka): a record of an aborted transaction, a committed
// one missing, duplicated or out of order, a partial unknown transaction
// and a stray value are each reported; the exact log, and an unknown
// transaction found complete or absent, are not.
func TestCheckTxnPartitionsFindsEachFault(t *testing.T) {
	const topic, perTxn = "x", 2 * txnMatrixPartitions
	outcomes := []txnOutcome{txnCommitted, txnAborted, txnUnknown, txnCommitted}
	log := func(txns ...int) map[int32][]string {
		got := map[int32][]string{}
		for _, k := range txns {
			for i := range perTxn {
				p := int32(i % txnMatrixPartitions)
				got[p] = append(got[p], txnValue(topic, k, i))
			}
		}
		return got
	}
	require.NoError(t, checkTxnPartitions(topic, perTxn, outcomes, log(0, 3)), "unknown absent")
	require.NoError(t, checkTxnPartitions(topic, perTxn, outcomes, log(0, 2, 3)), "unknown complete")
	for name, got := range map[string]map[int32][]string{
		"aborted visible":    log(0, 1, 3),
		"committed missing":  log(0),
		"committed twice":    log(0, 3, 3),
		"out of order":       log(3, 0),
		"partial unknown":    func() map[int32][]string { g := log(0, 2, 3); g[5] = log(0, 3)[5]; return g }(),
		"stray value":        func() map[int32][]string { g := log(0, 3); g[7] = append(g[7], "other"); return g }(),
		"outside partitions": func() map[int32][]string { g := log(0, 3); g[txnMatrixPartitions] = []string{"x"}; return g }(),
	} {
		assert.Error(t, checkTxnPartitions(topic, perTxn, outcomes, got), name)
	}
	k, i, ok := parseTxnValue(topic, txnValue(topic, 12, 345))
	assert.True(t, ok)
	assert.Equal(t, [2]int{12, 345}, [2]int{k, i})
}
