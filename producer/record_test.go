package producer

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"testing/synctest"
	"time"

	"github.com/longhaul-kafka/longhaul/internal/broker"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRecordPartitionCannotBeSetByField: Record has no exported field
// through which a caller could believe to choose a partition; only
// SetPartition does, and Partition() reports -1 until a partition is set or
// picked.
func TestRecordPartitionCannotBeSetByField(t *testing.T) {
	typ := reflect.TypeFor[Record]()
	for i := range typ.NumField() {
		f := typ.Field(i)
		if f.IsExported() {
			assert.NotContains(t, f.Name, "Partition", "exported field %s would be silently ignored as an input", f.Name)
		}
	}
	var r Record
	assert.Equal(t, int32(-1), r.Partition())
	assert.False(t, r.PartitionFixed())
	r.SetPartition(0)
	assert.Equal(t, int32(0), r.Partition())
	assert.True(t, r.PartitionFixed())
}

// TestSetPartitionOverridesKey: SetPartition wins over the key's partition;
// without it the key's murmur2 partition is used and reported, and a
// reused Record is partitioned again.
func TestSetPartitionOverridesKey(t *testing.T) {
	c := startCluster(t, broker.Config{Nodes: 1, Topics: []broker.TopicConfig{{Name: "t", Partitions: 8}}})
	p := newTestProducer(t, c)
	key := []byte("some-key")
	natural := keyPartition(key, 8)
	other := (natural + 1) % 8

	fixed := &Record{Topic: "t", Key: key, Value: []byte("fixed")}
	fixed.SetPartition(other)
	require.NoError(t, produceOne(t, p, fixed))
	assert.Equal(t, other, fixed.Partition())
	log := c.Records("t", other)
	require.Len(t, log, 1)
	assert.Equal(t, []byte("fixed"), log[0].Value)

	keyed := &Record{Topic: "t", Key: key, Value: []byte("keyed")}
	require.NoError(t, produceOne(t, p, keyed))
	assert.Equal(t, natural, keyed.Partition())
	assert.Len(t, c.Records("t", natural), 1)

	keyed.Key = []byte("another-key") // reuse after the callback
	require.NoError(t, produceOne(t, p, keyed))
	assert.Equal(t, keyPartition([]byte("another-key"), 8), keyed.Partition())
}

// TestFailedRecordOffsetIsMinusOne: a record that fails through Produce
// has Offset -1 in its callback, never a valid offset such as 0.
func TestFailedRecordOffsetIsMinusOne(t *testing.T) {
	c := startCluster(t, broker.Config{Nodes: 1, Topics: []broker.TopicConfig{{Name: "t", Partitions: 1}}})
	p := newTestProducer(t, c, MaxRequestSize(2000), BufferMemory(4000))
	r := &Record{Topic: "t", Value: make([]byte, 3000), Offset: 0}
	require.ErrorIs(t, produceOne(t, p, r), ErrRecordTooLarge)
	assert.Equal(t, int64(-1), r.Offset)
	r2 := &Record{Topic: "t", Value: []byte("x")}
	r2.SetPartition(3)
	require.ErrorIs(t, produceOne(t, p, r2), ErrInvalidRecord)
	assert.Equal(t, int64(-1), r2.Offset)
}

// TestProduceAfterCloseCallsBackBeforeReturning: once Close has returned,
// Produce calls the callback itself, with ErrClosed, before it returns.
func TestProduceAfterCloseCallsBackBeforeReturning(t *testing.T) {
	c := startCluster(t, broker.Config{Nodes: 1, Topics: []broker.TopicConfig{{Name: "t", Partitions: 1}}})
	p := newTestProducer(t, c)
	require.NoError(t, p.Close(context.Background()))
	var got error
	called := false
	p.Produce(context.Background(), &Record{Topic: "t"}, func(_ *Record, err error) { called, got = true, err })
	require.True(t, called)
	assert.ErrorIs(t, got, ErrClosed)
	assert.NoError(t, p.Flush(context.Background()), "Flush after Close has nothing to wait for")
}

// TestUnplacedRecordPartitionIsMinusOne checks Record.Partition's "-1 for
// a record neither placed nor given a partition, for example one that
// failed while its topic's partitions were unknown", also for a Record
// reused after a success placed it (its old partition must not show), and
// for a keyed record, whose partition needs the count too. Offset is -1 as
// after any failure.
func TestUnplacedRecordPartitionIsMinusOne(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, n := memCluster(t, broker.Config{Topics: []broker.TopicConfig{{Name: "t", Partitions: 4}}})
		p := memProducer(t, c, n, MaxBlock(300*time.Millisecond))
		ctx := context.Background()
		reused := &Record{Topic: "t", Key: []byte("k3"), Value: []byte("v")}
		require.NoError(t, p.ProduceSync(ctx, reused).FirstErr())
		require.GreaterOrEqual(t, reused.Partition(), int32(0))
		require.GreaterOrEqual(t, reused.Offset, int64(0))

		reused.Topic = "missing"
		keyless := &Record{Topic: "missing", Value: []byte("v")}
		for _, r := range []*Record{reused, keyless} {
			err := p.ProduceSync(ctx, r).FirstErr()
			require.ErrorIs(t, err, ErrTopicMetadata)
			require.EqualValues(t, -1, r.Partition(), "key %q", r.Key)
			require.EqualValues(t, -1, r.Offset)
			require.False(t, r.PartitionFixed())
		}
	})
}

type spanKey struct{}

// contextHook reads the span a record's Context carries, as a tracing
// plugin would.
type contextHook struct{ spans chan any }

func (h contextHook) OnRecordDone(r *Record, err error) {
	var span any
	if r.Context != nil {
		span = r.Context.Value(spanKey{})
	}
	h.spans <- span
}

// Record.Context reaches HookRecordDone and the callback unchanged, for
// records placed at once and those that waited for metadata; a cancelled
// Context fails nothing; a nil Context is allowed.
func TestRecordContextCarriedToHooks(t *testing.T) {
	c := startCluster(t, broker.Config{Topics: []broker.TopicConfig{{Name: "t", Partitions: 2}}})
	h := contextHook{spans: make(chan any, 8)}
	p := newTestProducer(t, c, Hooks(h))

	cancelled, cancel := context.WithCancel(context.WithValue(context.Background(), spanKey{}, "span-1"))
	cancel()
	first := &Record{Topic: "t", Value: []byte("a"), Context: cancelled} // waits for metadata
	require.NoError(t, p.ProduceSync(context.Background(), first).FirstErr(), "a cancelled Context fails nothing")
	assert.Equal(t, "span-1", <-h.spans)

	got := make(chan any, 1)
	second := &Record{Topic: "t", Value: []byte("b"), Context: context.WithValue(context.Background(), spanKey{}, "span-2")}
	p.Produce(context.Background(), second, func(r *Record, err error) {
		assert.NoError(t, err) // not require: FailNow on the callback goroutine would leave Close waiting for it
		got <- r.Context.Value(spanKey{})
	})
	assert.Equal(t, "span-2", <-h.spans)
	assert.Equal(t, "span-2", <-got)

	require.NoError(t, p.ProduceSync(context.Background(), &Record{Topic: "t", Value: []byte("c")}).FirstErr())
	assert.Nil(t, <-h.spans)
}

// TestProduceCopiesBytes: Key, Value and header values are copied before
// Produce returns, both for the first records of a topic (which wait for
// its partitions) and for later ones (appended to a batch at once). The test
// reuses one set of buffers for every record, overwriting them right after
// each Produce, and reads the log back from the broker.
func TestProduceCopiesBytes(t *testing.T) {
	c := startCluster(t, broker.Config{Nodes: 1, Topics: []broker.TopicConfig{{Name: "t", Partitions: 1}}})
	p := newTestProducer(t, c)
	key, val, hval := make([]byte, 8), make([]byte, 8), make([]byte, 8)
	const n = 20
	errs := make(chan error, 2*n)
	produce := func(first int) {
		for i := first; i < first+n; i++ {
			copy(key, fmt.Sprintf("key-%04d", i))
			copy(val, fmt.Sprintf("val-%04d", i))
			copy(hval, fmt.Sprintf("hdr-%04d", i))
			r := &Record{Topic: "t", Key: key, Value: val, Headers: []Header{{Key: "h", Value: hval}}}
			r.SetPartition(0)
			p.Produce(context.Background(), r, func(_ *Record, err error) { errs <- err })
			copy(key, "CHANGED!")
			copy(val, "CHANGED!")
			copy(hval, "CHANGED!")
		}
	}
	produce(0) // the producer does not know the topic yet: these wait for metadata
	require.NoError(t, p.Flush(context.Background()))
	produce(n) // partitions known: appended at once
	require.NoError(t, p.Flush(context.Background()))
	for range 2 * n {
		require.NoError(t, <-errs)
	}
	recs := c.Records("t", 0)
	require.Len(t, recs, 2*n)
	for i, lr := range recs {
		assert.Equal(t, fmt.Sprintf("key-%04d", i), string(lr.Key), "offset %d", i)
		assert.Equal(t, fmt.Sprintf("val-%04d", i), string(lr.Value), "offset %d", i)
		require.Len(t, lr.Headers, 1)
		assert.Equal(t, fmt.Sprintf("hdr-%04d", i), string(lr.Headers[0].Value), "offset %d", i)
	}
}
