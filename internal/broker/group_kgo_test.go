package broker

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestKgoGroupTransactSession runs franz-go's consume-transform-produce
// loop (GroupTransactSession: a consumer group, a transactional producer,
// offsets sent in each transaction) on the embedded broker under
// transaction versions 1 and 2, with a second session joining half way
// (a rebalance): the output, read with read_committed, is the transform of
// the input exactly once, and the group's committed offsets are the
// input's ends.
func TestKgoGroupTransactSession(t *testing.T) {
	for _, tv := range []int16{1, 2} {
		t.Run(fmt.Sprintf("tv%d", tv), func(t *testing.T) {
			const parts, n = 3, 300
			c := startCluster(t, Config{Nodes: 3, Topics: []TopicConfig{{Name: "in", Partitions: parts}, {Name: "t", Partitions: parts}}})
			if err := c.SetTransactionVersion(tv); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			in, err := kgo.NewClient(kgo.SeedBrokers(c.Addr()), kgo.DefaultProduceTopic("in"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
			if err != nil {
				t.Fatal(err)
			}
			defer in.Close()
			want := make([][]string, parts)
			for i := range n {
				p := int32(i % parts)
				v := fmt.Sprintf("in-%04d", i)
				want[p] = append(want[p], "out:"+v)
				if err := in.ProduceSync(ctx, &kgo.Record{Partition: p, Value: []byte(v)}).FirstErr(); err != nil {
					t.Fatal(err)
				}
			}
			var mu sync.Mutex
			processed := 0
			run := func(id string, stop <-chan struct{}) error {
				s, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(c.Addr()), kgo.TransactionalID(id),
					kgo.ConsumerGroup("g"), kgo.ConsumeTopics("in"), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
					kgo.DefaultProduceTopic("t"), kgo.RecordPartitioner(kgo.ManualPartitioner()),
					kgo.FetchMaxWait(100*time.Millisecond), kgo.SessionTimeout(6*time.Second), kgo.RebalanceTimeout(10*time.Second))
				if err != nil {
					return err
				}
				defer s.Close()
				for {
					select {
					case <-stop:
						return nil
					case <-ctx.Done():
						return ctx.Err()
					default:
					}
					pctx, pcancel := context.WithTimeout(ctx, 200*time.Millisecond)
					fs := s.PollRecords(pctx, 10)
					pcancel()
					if err := s.Begin(); err != nil {
						return err
					}
					var recs []*kgo.Record
					fs.EachRecord(func(r *kgo.Record) {
						recs = append(recs, &kgo.Record{Partition: r.Partition, Value: append([]byte("out:"), r.Value...)})
					})
					for _, r := range recs {
						s.Produce(ctx, r, nil)
					}
					committed, err := s.End(ctx, kgo.TryCommit)
					if err != nil {
						return err
					}
					if committed {
						mu.Lock()
						processed += len(recs)
						mu.Unlock()
					}
				}
			}
			stop := make(chan struct{})
			errs := make(chan error, 2)
			go func() { errs <- run("etl-a", stop) }()
			for {
				mu.Lock()
				p := processed
				mu.Unlock()
				if p > 0 || ctx.Err() != nil {
					break
				}
				time.Sleep(5 * time.Millisecond)
			}
			go func() { errs <- run("etl-b", stop) }()
			for {
				done := true
				for p := range int32(parts) {
					off, ok := c.CommittedOffset("g", "in", p)
					done = done && ok && off == int64(n/parts)
				}
				if done || ctx.Err() != nil {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			c.mu.Lock()
			gen := c.groups["g"].generation
			c.mu.Unlock()
			if gen < 2 {
				t.Errorf("group generation %d: the second session never caused a rebalance", gen)
			}
			t.Logf("generation %d, txn stats %+v", gen, c.TxnStats())
			close(stop)
			for range 2 {
				if err := <-errs; err != nil {
					t.Fatalf("session: %v", err)
				}
			}
			for p := range int32(parts) {
				var got []string
				for _, r := range c.CommittedRecords("t", p) {
					got = append(got, string(r.Value))
				}
				if !slices.Equal(got, want[p]) {
					t.Fatalf("partition %d: output %d records, want %d exactly once:\n%q", p, len(got), len(want[p]), got)
				}
			}
		})
	}
}
