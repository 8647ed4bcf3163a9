package producer

import (
	"context"
	"reflect"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/longhaul-kafka/longhaul/internal/broker"
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
