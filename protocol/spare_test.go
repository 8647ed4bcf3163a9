package protocol

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSpareIsWhereAppendWrites checks Spare's promise: the bytes it returns
// are the unused capacity the next Append writes, at most n of them, and
// none once the buffer is full.
func TestSpareIsWhereAppendWrites(t *testing.T) {
	var b BatchBuilder
	b.GrowCap(RecordBatchOverhead + 100)
	value := []byte("0123456789")
	for i := 0; i < 3; i++ {
		spare := b.Spare(40)
		require.Len(t, spare, 40)
		before := b.EncodedLen()
		b.Append(int64(i), nil, value, nil)
		recs := b.records()
		// The record just appended starts at the first spare byte.
		require.Same(t, &spare[0], &recs[before], "record %d", i)
		require.Equal(t, value, recs[b.EncodedLen()-len(value)-1:b.EncodedLen()-1], "record %d ends with its value (then the header count)", i)
	}
	// Fewer than n bytes left: Spare returns what there is.
	left := b.Cap() - RecordBatchOverhead - b.EncodedLen()
	require.Positive(t, left)
	require.Len(t, b.Spare(1000), left)
	require.Empty(t, b.Spare(-1))

	// A full buffer has no spare bytes.
	var full BatchBuilder
	full.GrowCap(RecordBatchOverhead + RecordSize(0, 0, nil, value, nil))
	full.Append(0, nil, value, nil)
	require.Nil(t, full.Spare(10))

	// A builder with no buffer has none either, and one without records
	// yet spares what comes after the header space.
	var empty BatchBuilder
	require.Nil(t, empty.Spare(10))
	empty.GrowCap(RecordBatchOverhead + 8)
	require.Len(t, empty.Spare(100), 8)
}
