package kafkatest

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The rules of CheckDelivered and CheckExactlyOnceInOrder, and their
// negative controls, are package logcheck's (internal/logcheck's
// TestStream). These tests show the two wrappers hand the consumed
// records and the outcomes to it, per partition, and pass its verdict on.

// TestCheckDelivered shows a legal log's counts come back, and a broken
// one's violation names its partition.
func TestCheckDelivered(t *testing.T) {
	sent := map[int32][]Sent{2: {
		{Value: []byte("a"), Outcome: Acked},
		{Value: []byte("b"), Outcome: MaybeWritten},
		{Value: []byte("c"), Outcome: MaybeWritten},
		{Value: []byte("d"), Outcome: NotWritten},
	}}
	rep, err := CheckDelivered(sent, map[int32][]*kgo.Record{2: recs(2, "a", "c")})
	require.NoError(t, err)
	assert.Equal(t, DeliveryReport{Acked: 1, MaybePresent: 1, MaybeAbsent: 1, NotWritten: 1}, rep)

	_, err = CheckDelivered(sent, map[int32][]*kgo.Record{2: recs(2, "a", "a")})
	require.ErrorContains(t, err, "partition 2: ")
	require.ErrorContains(t, err, "duplicate")
	_, err = CheckDelivered(sent, map[int32][]*kgo.Record{2: recs(2, "a", "d")})
	require.ErrorContains(t, err, "not written")
	_, err = CheckDelivered(sent, map[int32][]*kgo.Record{2: recs(2, "a"), 1: recs(1, "x")})
	require.ErrorContains(t, err, "stray")
}

// TestCheckExactlyOnceInOrder shows every wanted value is acknowledged: a
// missing one is lost, a reordered one is named.
func TestCheckExactlyOnceInOrder(t *testing.T) {
	want := map[int32][][]byte{0: bs("0", "2", "4"), 1: bs("1", "3")}
	require.NoError(t, CheckExactlyOnceInOrder(want, map[int32][]*kgo.Record{0: recs(0, "0", "2", "4"), 1: recs(1, "1", "3")}))
	require.ErrorContains(t, CheckExactlyOnceInOrder(want, map[int32][]*kgo.Record{0: recs(0, "0", "2", "4")}), "partition 1: ")
	require.ErrorContains(t, CheckExactlyOnceInOrder(want, map[int32][]*kgo.Record{0: recs(0, "0", "4", "2"), 1: recs(1, "1", "3")}), "reordered")
}
