package protocol

import "sync"

// A RecordBatch's CRC-32C covers its header fields (attributes through the
// record count) followed by the records. The header is known only when the
// batch is built, long after the records were appended, and by then the
// record bytes have usually left the CPU cache, and a CRC pass over a cold
// batch reads all of it from memory again, a large share of the
// producer's CPU at 1 KiB records. So a
// producer calls BatchBuilder.Sum when a batch fills up, checksumming the
// records while they are hot, and the build joins the header's CRC to
// theirs with crc32cCombine instead of reading the records again.

// castagnoliReversed is the Castagnoli polynomial in the bit-reversed form
// hash/crc32 works in (bit 31 is x^0).
const castagnoliReversed = 0x82F63B78

// gf2Mul returns a*b modulo the Castagnoli polynomial, both operands and
// the result in the reversed representation (bit 31 is x^0, bit 0 x^31).
func gf2Mul(a, b uint32) uint32 {
	var p uint32
	for range 32 { // branch-free: the bits of a are data, not control
		p ^= b & -(a >> 31)
		a <<= 1
		b = b>>1 ^ castagnoliReversed&-(b&1) // b *= x
	}
	return p
}

// xPow2 holds x^(2^k) modulo the polynomial, k = 0..63.
var xPow2 = func() (t [64]uint32) {
	t[0] = 1 << 30 // x^1
	for k := 1; k < len(t); k++ {
		t[k] = gf2Mul(t[k-1], t[k-1])
	}
	return t
}()

// xPowByteTables holds, for each byte i of a length n (i = 0..3) and each
// value v of that byte, x^(8 * v * 256^i): a shift by n < 2^32 bytes is
// the product of at most four entries, where the square-and-multiply over
// xPow2 needs one multiplication per set bit of n. Built on first use
// (1,024 multiplications), so programs that never build a batch do not pay
// for it.
var xPowByteTables = sync.OnceValue(func() *[4][256]uint32 {
	t := new([4][256]uint32)
	for i := range t {
		t[i][0] = 1 << 31 // x^0
		step := xPowBits(uint64(8) << (8 * i))
		for v := 1; v < 256; v++ {
			t[i][v] = gf2Mul(t[i][v-1], step)
		}
	}
	return t
})

// xPowBits returns x^n modulo the polynomial.
func xPowBits(n uint64) uint32 {
	p := uint32(1) << 31 // x^0
	for k := 0; n != 0; k++ {
		if n&1 != 0 {
			p = gf2Mul(xPow2[k], p)
		}
		n >>= 1
	}
	return p
}

// xPowBytes returns x^(8n) modulo the polynomial, for n < 2^61 (8n fits
// 64 bits; batches are below 2^31 bytes): the factor by which n bytes
// appended after a message shift its CRC.
func xPowBytes(n uint64) uint32 {
	if n>>32 != 0 {
		return xPowBits(8 * n)
	}
	t := xPowByteTables()
	p := uint32(1) << 31
	for i := 0; n != 0; i++ {
		if v := n & 0xff; v != 0 {
			p = gf2Mul(t[i][v], p)
		}
		n >>= 8
	}
	return p
}

// crc32cCombine returns the CRC-32C (as hash/crc32 computes it, with its
// pre- and post-conditioning) of a followed by b, given crcA of a, crcB of
// b and b's length. The conditioning terms cancel: CRC(a||b) is CRC(a)
// shifted by len(b) bytes, xor CRC(b).
func crc32cCombine(crcA, crcB uint32, lenB int) uint32 {
	return gf2Mul(xPowBytes(uint64(lenB)), crcA) ^ crcB
}
