package protocol

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestGrowCapCapFree: GrowCap allocates what it is asked for (16 KiB is an
// allocator size class), keeps what was appended, and never shrinks; Cap
// and Free report the buffer's capacity and the room left for records.
func TestGrowCapCapFree(t *testing.T) {
	var b BatchBuilder
	require.Equal(t, 0, b.Cap())
	b.Append(1, []byte("k"), []byte("v"), nil)
	before := b.EncodedLen()
	b.GrowCap(16384)
	require.Equal(t, 16384, b.Cap(), "exactly the asked capacity, not append's growth")
	require.Equal(t, 16384-RecordBatchOverhead-before, b.Free())
	require.Equal(t, before, b.EncodedLen(), "appended records kept")
	b.GrowCap(100)
	require.Equal(t, 16384, b.Cap(), "never shrinks")
	out, err := b.BuildInPlace(BatchHeader{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1})
	require.NoError(t, err)
	_, recs, err := ParseRecordBatch(out, len(out))
	require.NoError(t, err)
	require.Len(t, recs, 1)
	require.Equal(t, []byte("v"), recs[0].Value)
}
