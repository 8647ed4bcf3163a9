package protocol

import (
	"bytes"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kbin"
)

// TestVarintMatchesKbin checks Append's own varint writer and size against
// franz-go's at every length boundary, both signs and the extremes.
func TestVarintMatchesKbin(t *testing.T) {
	vals := []int64{0, 1, -1, math.MaxInt64, math.MinInt64, math.MaxInt32, math.MinInt32}
	for shift := 1; shift < 63; shift++ {
		v := int64(1) << shift
		vals = append(vals, v-1, v, v+1, -v-1, -v, -v+1)
	}
	for _, v := range vals {
		want := kbin.AppendVarlong(nil, v)
		require.Equal(t, len(want), varintLen(v), "varintLen(%d)", v)
		got := make([]byte, len(want)+3)
		end := putVarint(got, 3, v)
		require.Equal(t, 3+len(want), end, "putVarint(%d) end", v)
		require.Equal(t, want, got[3:end], "putVarint(%d)", v)
	}
}

// FuzzAppendMatchesKmsg compares a batch of Append'ed records with the same
// records encoded by kmsg: random timestamps (deltas of any size and sign),
// null and empty keys and values, lengths across the varint boundaries, and
// headers.
func FuzzAppendMatchesKmsg(f *testing.F) {
	f.Add(int64(1700000000000), int64(5), uint16(100), uint16(0), uint8(0), uint8(1), uint8(3))
	f.Add(int64(math.MinInt64/2), int64(math.MaxInt64/2), uint16(20000), uint16(70), uint8(2), uint8(200), uint8(0))
	f.Add(int64(0), int64(-1), uint16(0), uint16(0), uint8(3), uint8(0), uint8(130))
	f.Fuzz(func(t *testing.T, ts0, step int64, valueLen, keyLen uint16, nulls, nHeaders, nRecs uint8) {
		var recs []testRec
		ts := ts0
		for i := range int(nRecs%150) + 1 {
			r := testRec{ts: ts, value: bytes.Repeat([]byte{byte(i)}, int(valueLen)%20000)}
			if nulls&1 == 0 {
				r.key = bytes.Repeat([]byte{'k'}, int(keyLen)%300)
			}
			if nulls&2 != 0 && i%2 == 1 {
				r.value = nil
			}
			for h := range int(nHeaders % 4) {
				hd := Header{Key: string(bytes.Repeat([]byte{'h'}, h*50))}
				if h != 1 {
					hd.Value = bytes.Repeat([]byte{'v'}, h*70)
				}
				r.headers = append(r.headers, hd)
			}
			recs = append(recs, r)
			ts += step * int64(i%3-1) // forwards, back and steady
		}
		h := BatchHeader{ProducerID: 7, ProducerEpoch: 1, BaseSequence: 3}
		require.Equal(t, kmsgBatch(t, recs, h), buildTest(t, recs, h))
	})
}
