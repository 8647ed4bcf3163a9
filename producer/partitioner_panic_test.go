package producer

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/longhaul-kafka/longhaul/internal/broker"
)

// TestPartitionerPanicFailsRecordAlone: Partitioner's contract says a
// partition it cannot give fails that record alone, and the producer goes
// on. A Partition call that panics is such a case. Partition runs with
// acc.mu held, from Produce and (for records that waited for their
// topic's partitions) from the sender goroutine: the panic left the lock
// held, so after an HTTP server or any caller recovered it every Produce,
// Stats and Close blocked for good, and on the sender goroutine it ended
// the program. Now the record fails with ErrInvalidRecord naming the
// panic, through its callback, on both paths.
func TestPartitionerPanicFailsRecordAlone(t *testing.T) {
	c := startCluster(t, broker.Config{Topics: []broker.TopicConfig{{Name: "t", Partitions: 2}, {Name: "late", Partitions: 2}}})
	pt := PartitionerFunc(func(r *Record, n int32) (int32, error) {
		if string(r.Key) == "boom" {
			panic("partitioner bug")
		}
		return 1, nil
	})
	p, err := New(BootstrapServers(c.Addr()), Linger(time.Millisecond), RecordPartitioner(pt))
	require.NoError(t, err)

	// Records to "late" wait for its partitions, so the sender goroutine
	// places them; the producer learns "t" first.
	require.NoError(t, p.ProduceSync(context.Background(), &Record{Topic: "t", Value: []byte("warm")}).FirstErr())

	type outcome struct {
		rs        ProduceResults
		recovered any
	}
	done := make(chan outcome, 1)
	go func() {
		var o outcome
		defer func() {
			o.recovered = recover()
			done <- o
		}()
		o.rs = p.ProduceSync(context.Background(),
			&Record{Topic: "t", Key: []byte("boom"), Value: []byte("1")},
			&Record{Topic: "t", Key: []byte("fine"), Value: []byte("2")},
			&Record{Topic: "late", Key: []byte("boom"), Value: []byte("3")},
			&Record{Topic: "late", Key: []byte("fine"), Value: []byte("4")},
		)
	}()
	var o outcome
	select {
	case o = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("ProduceSync is stuck (acc.mu left held by the panic?)")
	}
	require.Nil(t, o.recovered, "the partitioner's panic reached Produce's caller")
	require.Len(t, o.rs, 4)
	for _, i := range []int{0, 2} {
		err := o.rs[i].Err
		assert.ErrorIs(t, err, ErrInvalidRecord, "record %d", i)
		assert.ErrorContains(t, err, "partitioner bug", "record %d", i)
		assert.Equal(t, int64(-1), o.rs[i].Record.Offset)
	}
	for _, i := range []int{1, 3} {
		require.NoError(t, o.rs[i].Err, "record %d", i)
		assert.Equal(t, int32(1), o.rs[i].Record.Partition())
	}
	assert.Len(t, c.Records("t", 1), 2) // warm and 2: the panicking record was not written
	assert.Len(t, c.Records("late", 1), 1)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, p.Close(ctx))
	require.False(t, errors.Is(ctx.Err(), context.DeadlineExceeded))
}
