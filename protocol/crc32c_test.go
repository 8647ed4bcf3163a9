package protocol

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"math/bits"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCRC32CCombine: the CRC joined from two parts equals hash/crc32's CRC
// of the concatenation, for random parts (lengths across byte boundaries of
// the tables, the empty part included).
func TestCRC32CCombine(t *testing.T) {
	r := rand.New(rand.NewPCG(19, 1))
	lengths := []int{0, 1, 7, 8, 255, 256, 257, 4095, 16384, 65535, 65536, 65537, 1 << 20}
	for i := range 300 {
		a := randBytes(r, r.IntN(80))
		n := lengths[i%len(lengths)]
		if i >= len(lengths) {
			n = r.IntN(70000)
		}
		b := randBytes(r, n)
		want := crc32.Checksum(append(bytes.Clone(a), b...), crc32c)
		got := crc32cCombine(crc32.Checksum(a, crc32c), crc32.Checksum(b, crc32c), len(b))
		require.Equal(t, want, got, "len(a) %d len(b) %d", len(a), len(b))
	}
}

// The reference below computes shifts independently of crc32c.go: in the
// normal representation (bit i is x^i, the polynomial 0x1EDC6F41 plus
// x^32), with a multiplication by long division, and powers by
// square-and-multiply on the exponent's bits. TestCRC32CReference ties it
// to hash/crc32 on real data.

// castagnoliNormal is the Castagnoli polynomial, x^32 included.
const castagnoliNormal = 1<<32 | 0x1EDC6F41

// refMul returns a*b modulo the polynomial, normal representation.
func refMul(a, b uint32) uint32 {
	var prod uint64
	for i := range 32 {
		if b>>i&1 != 0 {
			prod ^= uint64(a) << i
		}
	}
	for i := 63; i >= 32; i-- {
		if prod>>i&1 != 0 {
			prod ^= castagnoliNormal << (i - 32)
		}
	}
	return uint32(prod)
}

// refXPow returns x^e modulo the polynomial, normal representation.
func refXPow(e uint64) uint32 {
	result, base := uint32(1), uint32(2) // x^0, x^1
	for ; e != 0; e >>= 1 {
		if e&1 != 0 {
			result = refMul(result, base)
		}
		base = refMul(base, base)
	}
	return result
}

// refXPowBytes is x^(8n), the shift of n bytes, in crc32c.go's reversed
// representation: x^n cubed by squaring three times, so any n works.
func refXPowBytes(n uint64) uint32 {
	p := refXPow(n)
	for range 3 {
		p = refMul(p, p)
	}
	return bits.Reverse32(p)
}

// TestCRC32CReference: the reference shift joins CRCs as hash/crc32
// computes them (its CRC of a, shifted by len(b) bytes with refMul, xor
// the CRC of b, is the CRC of a followed by b), so it is the shift
// xPowBytes must return.
func TestCRC32CReference(t *testing.T) {
	r := rand.New(rand.NewPCG(19, 4))
	for _, n := range []int{0, 1, 3, 8, 255, 256, 257, 4096, 65537} {
		a, b := randBytes(r, 1+r.IntN(40)), randBytes(r, n)
		crcA, crcB := crc32.Checksum(a, crc32c), crc32.Checksum(b, crc32c)
		shifted := bits.Reverse32(refMul(bits.Reverse32(refXPowBytes(uint64(n))), bits.Reverse32(crcA)))
		require.Equal(t, crc32.Checksum(append(bytes.Clone(a), b...), crc32c), shifted^crcB, "len(b) %d", n)
	}
}

// TestXPowBytesMatchesReference: xPowBytes agrees with the reference below
// 2^32 bytes (the table path) and above (square-and-multiply over xPow2),
// where no data could be checksummed to check it.
func TestXPowBytesMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(19, 2))
	ns := []uint64{0, 1, 255, 256, 1<<32 - 1, 1 << 32, 1<<32 + 1, 1<<40 + 3, 1<<61 - 1}
	for range 300 {
		ns = append(ns, r.Uint64N(1<<32), 1<<32+r.Uint64N(1<<61-1<<32))
	}
	for _, n := range ns {
		require.Equal(t, refXPowBytes(n), xPowBytes(n), "n %d", n)
	}
}

// TestBuilderCRCMatchesBytes: whatever sequence of Append, Sum, Retain,
// GrowCap and Reset built a batch (Sum called after some records, none or
// all), its CRC field is the CRC-32C of its bytes from
// the attributes on, for Build and BuildInPlace, uncompressed, compressed,
// and compressed-if-smaller falling back to uncompressed (the paths that
// use the CRC kept by Append and those that checksum the output).
func TestBuilderCRCMatchesBytes(t *testing.T) {
	r := rand.New(rand.NewPCG(19, 3))
	var b BatchBuilder
	for round := range 400 {
		if r.IntN(4) == 0 {
			b.Reset()
		}
		for range 1 + r.IntN(20) {
			appendRandomRecord(r, &b)
			if r.IntN(3) == 0 {
				b.Sum() // covers some records, the build the rest
			}
		}
		if r.IntN(3) == 0 {
			b.GrowCap(b.Cap() + r.IntN(4096))
		}
		if r.IntN(3) == 0 {
			b.Retain(func(int) bool { return r.IntN(2) == 0 })
		}
		if b.NumRecords() == 0 {
			appendRandomRecord(r, &b)
		}
		h := BatchHeader{ProducerID: r.Int64(), ProducerEpoch: int16(r.IntN(100)), BaseSequence: r.Int32(),
			Compression: allCodecs[r.IntN(len(allCodecs))], CompressIfSmaller: r.IntN(2) == 0}
		built, err := b.Build(nil, h)
		require.NoError(t, err)
		requireCRC(t, built, round)
		inPlace, err := b.BuildInPlace(h)
		require.NoError(t, err)
		requireCRC(t, inPlace, round)
		_, recs, err := ParseRecordBatch(inPlace, 1<<22)
		require.NoError(t, err)
		require.Len(t, recs, b.NumRecords())
	}
}

// TestBuilderCRCUsesSum is the negative control of
// TestBuilderCRCMatchesBytes, and shows that the build takes the records'
// CRC from Sum rather than reading them again: a record byte changed behind
// the builder's back after Sum gives a batch whose CRC field is wrong
// (requireCRC's comparison and the parser see it), while the same change
// before Sum, or without Sum, gives a correct one.
func TestBuilderCRCUsesSum(t *testing.T) {
	h := BatchHeader{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}
	build := func(sumFirst bool) []byte {
		var b BatchBuilder
		b.Append(1, []byte("k"), []byte("value"), nil)
		if sumFirst {
			b.Sum()
		}
		b.buf[len(b.buf)-2] ^= 1 // inside the value, not through Append
		out, err := b.BuildInPlace(h)
		require.NoError(t, err)
		return out
	}
	stale := build(true)
	require.NotEqual(t, crc32.Checksum(stale[offAttributes:], crc32c), binary.BigEndian.Uint32(stale[offCRC:]))
	_, _, err := ParseRecordBatch(stale, 1<<20)
	require.ErrorIs(t, err, ErrCorruptBatch)

	fresh := build(false)
	requireCRC(t, fresh, 0)
	_, _, err = ParseRecordBatch(fresh, 1<<20)
	require.NoError(t, err)
}

func requireCRC(t *testing.T, batch []byte, round int) {
	t.Helper()
	require.Equal(t, crc32.Checksum(batch[offAttributes:], crc32c), binary.BigEndian.Uint32(batch[offCRC:]), "round %d", round)
}

func appendRandomRecord(r *rand.Rand, b *BatchBuilder) {
	var key, value []byte
	if r.IntN(4) != 0 {
		key = randBytes(r, r.IntN(20))
	}
	if r.IntN(8) != 0 {
		value = randBytes(r, r.IntN(3000))
	}
	var hs []Header
	for range r.IntN(3) {
		hs = append(hs, Header{Key: "h", Value: randBytes(r, r.IntN(10))})
	}
	b.Append(1700000000000+r.Int64N(100000)-50000, key, value, hs)
}

// randBytes returns n bytes, compressible half the time.
func randBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	if r.IntN(2) == 0 {
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		return b
	}
	for i := range b {
		b[i] = "abcab"[r.IntN(5)]
	}
	return b
}

// FuzzBuilderCRC: records cut from arbitrary bytes build into batches whose
// CRC is the CRC-32C of their bytes and that parse back to the same records.
func FuzzBuilderCRC(f *testing.F) {
	f.Add([]byte("hello"), uint8(3), uint8(0))
	f.Add(bytes.Repeat([]byte{0xff}, 3000), uint8(7), uint8(1))
	f.Fuzz(func(t *testing.T, data []byte, cuts uint8, codec uint8) {
		var b BatchBuilder
		var want [][]byte
		n := int(cuts%16) + 1
		for i := range n {
			v := data[i*len(data)/n : (i+1)*len(data)/n]
			b.Append(int64(i), nil, v, nil)
			want = append(want, v)
			if cuts&(1<<(i%8)) != 0 {
				b.Sum()
			}
		}
		h := BatchHeader{ProducerID: 1, BaseSequence: 2, Compression: allCodecs[int(codec)%len(allCodecs)], CompressIfSmaller: codec&8 != 0}
		out, err := b.BuildInPlace(h)
		if err != nil {
			t.Fatal(err)
		}
		if got := binary.BigEndian.Uint32(out[offCRC:]); got != crc32.Checksum(out[offAttributes:], crc32c) {
			t.Fatalf("CRC field %08x, bytes %08x", got, crc32.Checksum(out[offAttributes:], crc32c))
		}
		_, recs, err := ParseRecordBatch(out, len(data)+1<<16)
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) != n {
			t.Fatalf("%d records, want %d", len(recs), n)
		}
		for i := range recs {
			if !bytes.Equal(recs[i].Value, want[i]) {
				t.Fatalf("record %d differs", i)
			}
		}
	})
}
