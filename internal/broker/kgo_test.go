package broker

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestKgoProduceIdempotent produces with franz-go's kgo (idempotent, the
// default) and checks every record is in the log exactly once, in order,
// and that kgo never tripped OUT_OF_ORDER_SEQUENCE_NUMBER.
func TestKgoProduceIdempotent(t *testing.T) {
	c, err := Start(Config{Nodes: 3, Topics: []TopicConfig{{Name: "t", Partitions: 3, Window: 20}}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addr()), kgo.DefaultProduceTopic("t"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	const n = 300
	for i := range n {
		r := &kgo.Record{Partition: int32(i % 3), Value: fmt.Appendf(nil, "v%d", i)}
		cl.Produce(ctx, r, func(r *kgo.Record, err error) {
			if err != nil {
				t.Errorf("produce: %v", err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	for p := range int32(3) {
		recs := c.Records("t", p)
		if len(recs) != n/3 {
			t.Fatalf("partition %d: %d records, want %d", p, len(recs), n/3)
		}
		for i, r := range recs {
			if want := fmt.Sprintf("v%d", i*3+int(p)); string(r.Value) != want || r.Offset != int64(i) || r.Sequence != int32(i) {
				t.Fatalf("partition %d record %d: offset %d seq %d value %q, want %q", p, i, r.Offset, r.Sequence, r.Value, want)
			}
		}
		if st := c.PartitionStats("t", p); st.OutOfOrder != 0 || st.Duplicates != 0 {
			t.Fatalf("partition %d stats %+v", p, st)
		}
	}
}
