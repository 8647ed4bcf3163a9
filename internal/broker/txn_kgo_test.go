package broker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// txnClient is a kgo transactional producer on c, closed at the end of
// the test.
func txnClient(t *testing.T, c *Cluster, id string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.Addr()), kgo.TransactionalID(id), kgo.DefaultProduceTopic("t"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0), kgo.TransactionTimeout(time.Minute)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// produceTxn runs one kgo transaction writing values to partitions
// round-robin and ends it with commit.
func produceTxn(ctx context.Context, cl *kgo.Client, parts int, values []string, commit bool) error {
	if err := cl.BeginTransaction(); err != nil {
		return err
	}
	for i, v := range values {
		if err := cl.ProduceSync(ctx, &kgo.Record{Partition: int32(i % parts), Value: []byte(v)}).FirstErr(); err != nil {
			return fmt.Errorf("produce %s: %w", v, err)
		}
	}
	return cl.EndTransaction(ctx, kgo.TransactionEndTry(commit))
}

// readCommitted consumes every partition of topic "t" from the start with
// a kgo read_committed consumer until it holds want records, then a
// little longer to catch extra ones; it returns the values by partition.
func readCommitted(t *testing.T, c *Cluster, parts int, want int) [][]string {
	t.Helper()
	offsets := map[int32]kgo.Offset{}
	for p := range int32(parts) {
		offsets[p] = kgo.NewOffset().AtStart()
	}
	co, err := kgo.NewClient(kgo.SeedBrokers(c.Addr()), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"t": offsets}), kgo.FetchMaxWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer co.Close()
	got := make([][]string, parts)
	n := 0
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	extra := time.Time{}
	for extra.IsZero() || time.Now().Before(extra) {
		pctx, pcancel := context.WithTimeout(ctx, 200*time.Millisecond)
		fs := co.PollFetches(pctx)
		pcancel()
		if ctx.Err() != nil {
			t.Fatalf("read_committed read %d of %d records: %v", n, want, ctx.Err())
		}
		fs.EachError(func(topic string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("fetch %s[%d]: %v", topic, p, err)
			}
		})
		fs.EachRecord(func(r *kgo.Record) {
			got[r.Partition] = append(got[r.Partition], string(r.Value))
			n++
		})
		if n >= want && extra.IsZero() {
			extra = time.Now().Add(300 * time.Millisecond)
		}
	}
	return got
}

// TestKgoTransactions runs franz-go's transactional producer against the
// coordinator under each transaction version: committed transactions are
// read by a kgo read_committed consumer exactly once and in order, aborted
// ones never, and CommittedRecords agrees with it.
func TestKgoTransactions(t *testing.T) {
	for _, tv := range []int16{0, 1, 2} {
		t.Run(fmt.Sprintf("tv%d", tv), func(t *testing.T) {
			const parts = 3
			c := startCluster(t, Config{Nodes: 3, Topics: []TopicConfig{{Name: "t", Partitions: parts}}})
			if err := c.SetTransactionVersion(tv); err != nil {
				t.Fatal(err)
			}
			cl := txnClient(t, c, "tx-"+fmt.Sprint(tv))
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			want := make([][]string, parts)
			total := 0
			for txn := range 8 {
				commit := txn%3 != 1
				var vals []string
				for i := range 9 {
					vals = append(vals, fmt.Sprintf("txn%d-%d-%v", txn, i, commit))
				}
				if err := produceTxn(ctx, cl, parts, vals, commit); err != nil {
					t.Fatalf("transaction %d: %v", txn, err)
				}
				if commit {
					for i, v := range vals {
						want[i%parts] = append(want[i%parts], v)
						total++
					}
				}
			}
			got := readCommitted(t, c, parts, total)
			for p := range parts {
				if !slices.Equal(got[p], want[p]) {
					t.Fatalf("partition %d: read_committed read\n%q\nwant\n%q", p, got[p], want[p])
				}
				var fromLog []string
				for _, r := range c.CommittedRecords("t", int32(p)) {
					fromLog = append(fromLog, string(r.Value))
				}
				if !slices.Equal(fromLog, want[p]) {
					t.Fatalf("partition %d: CommittedRecords\n%q\nwant\n%q", p, fromLog, want[p])
				}
				if all := len(c.Records("t", int32(p))); all != 8*3 {
					t.Fatalf("partition %d: Records has %d records, want all 24 (aborted included, markers not)", p, all)
				}
			}
			st := c.TxnStats()
			if st.Committed < 5 || st.Aborted < 3 {
				t.Fatalf("stats %+v: want at least 5 commits and 3 aborts", st)
			}
			info, _ := c.Transaction("tx-" + fmt.Sprint(tv))
			t.Logf("stats %+v, txn %+v", st, info)
			if tv == 2 && info.ProducerEpoch < 8 {
				t.Fatalf("transaction version 2: epoch %d after 8 transactions, want each end to bump it", info.ProducerEpoch)
			}
			if tv < 2 && info.ProducerEpoch != 0 {
				t.Fatalf("transaction version %d: epoch %d, want 0 (no bump per transaction)", tv, info.ProducerEpoch)
			}
		})
	}
}

// TestKgoTransactionsFencing: a second kgo producer with the same
// transactional id fences the first: its open transaction is aborted, its
// commit fails as fenced, and a read_committed reader sees only the second
// producer's records.
func TestKgoTransactionsFencing(t *testing.T) {
	for _, tv := range []int16{1, 2} {
		t.Run(fmt.Sprintf("tv%d", tv), func(t *testing.T) {
			c := startCluster(t, Config{Nodes: 2, Topics: []TopicConfig{{Name: "t", Partitions: 2}}})
			if err := c.SetTransactionVersion(tv); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			a := txnClient(t, c, "f")
			if err := a.BeginTransaction(); err != nil {
				t.Fatal(err)
			}
			for i := range 4 {
				if err := a.ProduceSync(ctx, &kgo.Record{Partition: int32(i % 2), Value: []byte("zombie")}).FirstErr(); err != nil {
					t.Fatal(err)
				}
			}
			b := txnClient(t, c, "f")
			if err := produceTxn(ctx, b, 2, []string{"b0", "b1", "b2"}, true); err != nil {
				t.Fatalf("the new producer: %v", err)
			}
			err := a.EndTransaction(ctx, kgo.TryCommit)
			if !errors.Is(err, kerr.ProducerFenced) && !errors.Is(err, kerr.InvalidProducerEpoch) {
				t.Fatalf("the fenced producer's commit: %v, want PRODUCER_FENCED or INVALID_PRODUCER_EPOCH", err)
			}
			got := readCommitted(t, c, 2, 3)
			if !slices.Equal(got[0], []string{"b0", "b2"}) || !slices.Equal(got[1], []string{"b1"}) {
				t.Fatalf("read_committed read %q", got)
			}
			if st := c.TxnStats(); st.Fenced != 1 {
				t.Fatalf("stats %+v, want 1 fenced", st)
			}
		})
	}
}

// TestKgoTransactionsSlowMarkers: with markers held after a commit, kgo's
// next transaction meets CONCURRENT_TRANSACTIONS (at its produce under
// version 2, its AddPartitionsToTxn under version 1) and completes once
// the markers are written; nothing is lost or doubled.
func TestKgoTransactionsSlowMarkers(t *testing.T) {
	for _, tv := range []int16{1, 2} {
		t.Run(fmt.Sprintf("tv%d", tv), func(t *testing.T) {
			c := startCluster(t, Config{Topics: []TopicConfig{{Name: "t", Partitions: 2}}})
			if err := c.SetTransactionVersion(tv); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cl := txnClient(t, c, "s", kgo.TransactionTimeout(time.Minute))
			if err := produceTxn(ctx, cl, 2, []string{"a0", "a1"}, true); err != nil {
				t.Fatal(err)
			}
			c.HoldMarkers(true)
			if err := produceTxn(ctx, cl, 2, []string{"b0", "b1"}, true); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- produceTxn(ctx, cl, 2, []string{"c0", "c1"}, true) }()
			for c.TxnStats().ConcurrentTransactions == 0 {
				time.Sleep(time.Millisecond)
			}
			c.HoldMarkers(false)
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			got := readCommitted(t, c, 2, 6)
			if !slices.Equal(got[0], []string{"a0", "b0", "c0"}) || !slices.Equal(got[1], []string{"a1", "b1", "c1"}) {
				t.Fatalf("read_committed read %q", got)
			}
		})
	}
}

// TestKgoTransactionsTimeout: a transaction the coordinator aborts on its
// timeout cannot be committed by kgo, and its records are never read by a
// read_committed consumer.
func TestKgoTransactionsTimeout(t *testing.T) {
	c := startCluster(t, Config{Topics: []TopicConfig{{Name: "t", Partitions: 1}}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := txnClient(t, c, "to")
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("late")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if !c.TimeOutTransaction("to") {
		t.Fatal("no ongoing transaction to time out")
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err == nil {
		t.Fatal("kgo committed a transaction the coordinator aborted")
	}
	waitState(t, c, "to", "CompleteAbort")
	if recs := c.CommittedRecords("t", 0); len(recs) != 0 {
		t.Fatalf("read_committed sees %d records of the timed-out transaction", len(recs))
	}
}

// TestKgoTransactionsCoordinatorFaults: kgo's transactions go through
// while the coordinator moves between nodes and answers NOT_COORDINATOR and
// COORDINATOR_LOAD_IN_PROGRESS.
func TestKgoTransactionsCoordinatorFaults(t *testing.T) {
	c := startCluster(t, Config{Nodes: 3, Topics: []TopicConfig{{Name: "t", Partitions: 3}}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := txnClient(t, c, "mv")
	var want []string
	for txn := range 6 {
		switch txn % 3 {
		case 0:
			if err := c.MoveCoordinator("mv", true, (c.Coordinator("mv", true)+1)%3); err != nil {
				t.Fatal(err)
			}
		case 1:
			c.InjectCoordinatorError(26, kerr.NotCoordinator.Code, 1)
		case 2:
			c.InjectCoordinatorError(-1, kerr.CoordinatorLoadInProgress.Code, 2)
		}
		vals := []string{fmt.Sprintf("t%d-0", txn), fmt.Sprintf("t%d-1", txn), fmt.Sprintf("t%d-2", txn)}
		if err := produceTxn(ctx, cl, 3, vals, true); err != nil {
			t.Fatalf("transaction %d: %v", txn, err)
		}
		want = append(want, vals...)
	}
	got := readCommitted(t, c, 3, len(want))
	for p := range 3 {
		var w []string
		for i := p; i < len(want); i += 3 {
			w = append(w, want[i])
		}
		if !slices.Equal(got[p], w) {
			t.Fatalf("partition %d: read %q, want %q", p, got[p], w)
		}
	}
}
