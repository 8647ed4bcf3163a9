package protocol

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"math/bits"
	"slices"

	"github.com/twmb/franz-go/pkg/kbin"
)

// RecordBatchOverhead is the size in bytes of a RecordBatch v2 header: every
// field from baseOffset through the records count. A batch is this many
// bytes plus its (possibly compressed) record bodies.
const RecordBatchOverhead = 61

// Byte offsets of the RecordBatch v2 header fields.
const (
	offBaseOffset      = 0
	offLength          = 8
	offLeaderEpoch     = 12
	offMagic           = 16
	offCRC             = 17
	offAttributes      = 21 // the CRC covers from here to the end
	offLastOffsetDelta = 23
	offFirstTimestamp  = 27
	offMaxTimestamp    = 35
	offProducerID      = 43
	offProducerEpoch   = 51
	offBaseSequence    = 53
	offNumRecords      = 57

	// lengthBase is what the length field does not count: baseOffset and
	// the length itself.
	lengthBase = 12
)

// Attribute bits of a v2 batch.
const (
	attrCodecMask     = 0x07
	attrLogAppendTime = 0x08
	attrTransactional = 0x10
	attrControl       = 0x20
)

var crc32c = crc32.MakeTable(crc32.Castagnoli)

// Header is a record header. A nil Value is encoded as null.
type Header struct {
	Key   string
	Value []byte
}

// BatchHeader carries the producer fields of a batch being built.
type BatchHeader struct {
	// ProducerID is the id from InitProducerId; -1 for a non-idempotent
	// producer.
	ProducerID int64
	// ProducerEpoch is the epoch from InitProducerId; -1 when unused.
	ProducerEpoch int16
	// BaseSequence is the sequence number of the first record; the broker
	// derives the others from the offset deltas. -1 when unused.
	BaseSequence int32
	// Compression is the codec for the record bodies.
	Compression Codec
	// CompressionLevel is Compression's level, as for [CompressLevel]; 0
	// is the codec's default.
	CompressionLevel int
	// CompressIfSmaller makes [BatchBuilder.BuildInPlace] send the records
	// uncompressed (attributes say none) when compressing them with
	// Compression does not make the batch smaller, as for records that are
	// already compressed or random: the broker then stores fewer bytes and
	// nobody pays for decompression. [BatchBuilder.Build] ignores it.
	CompressIfSmaller bool
	// Transactional sets the transactional attribute bit.
	Transactional bool
}

// BatchBuilder accumulates the records of one RecordBatch v2. Records are
// encoded into an internal buffer as they are appended, so once the buffer
// has grown an Append allocates nothing. The zero value is ready to use.
// Not safe for concurrent use. Reset makes it reusable, keeping the buffer.
type BatchBuilder struct {
	// buf is RecordBatchOverhead bytes reserved for the header (filled
	// only by BuildInPlace) followed by the encoded record bodies,
	// uncompressed; empty until the first Append or Grow.
	buf     []byte
	out     []byte // BuildInPlace's compressed batch, reused
	crc     uint32 // CRC-32C of the first crcLen bytes of the record bodies (crc32c.go)
	crcLen  int
	n       int32
	firstTS int64
	maxTS   int64
}

// Reset forgets all records, keeping the allocated buffers. A batch
// returned by [BatchBuilder.BuildInPlace] is invalid from then on.
func (b *BatchBuilder) Reset() {
	b.buf = b.buf[:0]
	b.crc, b.crcLen = 0, 0 // the CRC of no bytes
	b.n = 0
	b.firstTS, b.maxTS = 0, 0
}

// reserve makes sure buf starts with the header space.
func (b *BatchBuilder) reserve() {
	if len(b.buf) < RecordBatchOverhead {
		b.buf = append(b.buf[:0], make([]byte, RecordBatchOverhead)...)
	}
}

// records returns the encoded record bodies.
func (b *BatchBuilder) records() []byte {
	if len(b.buf) < RecordBatchOverhead {
		return nil
	}
	return b.buf[RecordBatchOverhead:]
}

// Append encodes one record. timestampMs is milliseconds since the epoch
// (CreateTime); the first Append fixes the batch's FirstTimestamp and later
// records store their delta to it (which may be negative). A nil key or
// value is encoded as null, an empty non-nil one as empty. The offset delta
// is the record's index in the batch.
func (b *BatchBuilder) Append(timestampMs int64, key, value []byte, headers []Header) {
	if b.n == 0 {
		b.firstTS, b.maxTS = timestampMs, timestampMs
	} else if timestampMs > b.maxTS {
		b.maxTS = timestampMs
	}
	tsDelta := timestampMs - b.firstTS
	body := recordBodySize(tsDelta, b.n, key, value, headers)
	b.reserve()
	// One capacity check and direct stores, not an append per field: at
	// 100-byte records the per-field appends were half of Append's time,
	// on the path a producer runs for every record under its lock.
	start := len(b.buf)
	end := start + varintLen(int64(body)) + body
	if end > cap(b.buf) {
		b.buf = slices.Grow(b.buf, end-start)
	}
	dst := b.buf[:end]
	i := putVarint(dst, start, int64(body))
	dst[i] = 0 // record attributes, unused
	i = putVarint(dst, i+1, tsDelta)
	i = putVarint(dst, i, int64(b.n))
	i = putBytes(dst, i, key)
	i = putBytes(dst, i, value)
	i = putVarint(dst, i, int64(len(headers)))
	for h := range headers {
		i = putVarint(dst, i, int64(len(headers[h].Key)))
		i += copy(dst[i:], headers[h].Key)
		i = putBytes(dst, i, headers[h].Value)
	}
	if i != end {
		panic("protocol: Append's record size disagrees with its encoding")
	}
	b.buf = dst
	b.n++
}

// varintLen is the size of v as a zigzag varint (Kafka's varint and
// varlong): one byte per 7 bits of the zigzag value.
func varintLen(v int64) int {
	u := uint64(v<<1) ^ uint64(v>>63)
	switch {
	case u < 1<<7: // deltas, counts and lengths of small records
		return 1
	case u < 1<<14:
		return 2
	}
	return (bits.Len64(u) + 6) / 7
}

// putVarint writes v as a zigzag varint at dst[i:] and returns the index
// after it. dst must have room.
func putVarint(dst []byte, i int, v int64) int {
	u := uint64(v<<1) ^ uint64(v>>63)
	for u >= 0x80 {
		dst[i] = byte(u) | 0x80
		u >>= 7
		i++
	}
	dst[i] = byte(u)
	return i + 1
}

// putBytes writes b with its varint length (-1 for nil) at dst[i:] and
// returns the index after it.
func putBytes(dst []byte, i int, b []byte) int {
	if b == nil {
		dst[i] = 1 // zigzag -1
		return i + 1
	}
	i = putVarint(dst, i, int64(len(b)))
	return i + copy(dst[i:], b)
}

// Sum checksums the records appended since the last Sum (or Reset), so
// that building the batch joins the header's CRC to theirs instead of
// reading them again. A producer calls it when a batch fills up, while its
// bytes are still in the CPU cache: by the time the batch is sent they
// usually are not. Building checksums whatever Sum has not covered, so
// calling it is never needed for a correct batch.
func (b *BatchBuilder) Sum() {
	recs := b.records()
	b.crc = crc32.Update(b.crc, crc32c, recs[b.crcLen:])
	b.crcLen = len(recs)
}

// Retain keeps only the records for which keep(i) is true, i counting
// appended records from 0, and re-encodes them as if only they had been
// appended, in order, with their own timestamps: offset deltas close up and
// FirstTimestamp becomes the first kept record's. It returns how many
// records remain. A producer uses it to withdraw records from a batch not
// yet sent. A batch from [BatchBuilder.BuildInPlace] is invalid afterwards.
func (b *BatchBuilder) Retain(keep func(i int) bool) int {
	n := int(b.n)
	old := slices.Clone(b.records()) // Append below overwrites b.buf
	info := BatchInfo{FirstTimestamp: b.firstTS}
	b.Reset()
	r := reader{b: old}
	for i := range n {
		var rec Record
		if err := r.record(&rec, &info); err != nil {
			panic("protocol: BatchBuilder cannot decode its own record: " + err.Error())
		}
		if keep(i) {
			b.Append(rec.Timestamp, rec.Key, rec.Value, rec.Headers)
		}
	}
	return int(b.n)
}

// Grow makes room for n more bytes of records, so a batch that will reach
// batch.size is allocated once instead of doubling its way there.
func (b *BatchBuilder) Grow(n int) {
	b.reserve()
	b.buf = slices.Grow(b.buf, n)
}

// GrowCap makes the record buffer's capacity, header space included, at
// least c bytes. When it must grow it allocates c bytes (rounded up only
// to the allocator's size class), not append's growth: a caller sizing
// batches to a limit gets no more than it asked for.
func (b *BatchBuilder) GrowCap(c int) {
	if c <= cap(b.buf) {
		return
	}
	buf := make([]byte, max(len(b.buf), RecordBatchOverhead), c)
	copy(buf, b.buf)
	b.buf = buf
}

// Spare returns up to n bytes of the buffer's unused capacity, where the
// next Append writes. The caller may read them (to bring their cache lines
// in ahead of that Append) but must not write them.
func (b *BatchBuilder) Spare(n int) []byte {
	end := max(len(b.buf), RecordBatchOverhead)
	if end >= cap(b.buf) {
		return nil
	}
	return b.buf[end:min(end+max(n, 0), cap(b.buf))]
}

// Cap returns the bytes the builder's record buffer has allocated, header
// space included: what it holds in memory, whatever was appended.
func (b *BatchBuilder) Cap() int { return cap(b.buf) }

// Free returns how many more bytes of records fit before Append must grow
// the buffer.
func (b *BatchBuilder) Free() int { return cap(b.buf) - max(len(b.buf), RecordBatchOverhead) }

// NumRecords returns how many records were appended since the last Reset.
func (b *BatchBuilder) NumRecords() int { return int(b.n) }

// EncodedLen returns the uncompressed size in bytes of the records appended
// so far, excluding the [RecordBatchOverhead]. An uncompressed batch built
// now is exactly RecordBatchOverhead+EncodedLen bytes.
func (b *BatchBuilder) EncodedLen() int { return len(b.records()) }

// FirstTimestamp returns the timestamp of the first record appended, 0 if
// none.
func (b *BatchBuilder) FirstTimestamp() int64 { return b.firstTS }

// RecordSize returns the exact encoded size in bytes of one record,
// including its leading length varint, for deciding whether a record still
// fits a batch.size or max.request.size budget before appending it.
func RecordSize(timestampDelta int64, offsetDelta int32, key, value []byte, headers []Header) int {
	body := recordBodySize(timestampDelta, offsetDelta, key, value, headers)
	return varintLen(int64(body)) + body
}

func bytesSize(b []byte) int {
	if b == nil {
		return 1 // varint -1
	}
	return varintLen(int64(len(b))) + len(b)
}

func recordBodySize(tsDelta int64, offDelta int32, key, value []byte, headers []Header) int {
	n := 1 + // attributes
		varintLen(tsDelta) +
		varintLen(int64(offDelta)) +
		bytesSize(key) +
		bytesSize(value) +
		varintLen(int64(len(headers)))
	for i := range headers {
		n += varintLen(int64(len(headers[i].Key))) + len(headers[i].Key)
		n += bytesSize(headers[i].Value)
	}
	return n
}

// Build appends a complete RecordBatch v2 holding the appended records to
// dst and returns the extended slice: baseOffset 0, partitionLeaderEpoch
// -1, magic 2, attributes (codec, transactional bit, CreateTime),
// lastOffsetDelta, first and max timestamps, the producer fields from h, the
// record count, and the record bodies compressed with h.Compression (always,
// even when that does not shrink them), then the length and the CRC-32C
// (Castagnoli) over everything after the CRC field. The result never
// aliases the builder, and the builder is left unchanged, so Build may run
// again (for example with another codec). On error ([ErrEmptyBatch],
// [ErrUnknownCodec], [ErrCompressionLevel], a compressor failure) dst is
// returned with its original length.
func (b *BatchBuilder) Build(dst []byte, h BatchHeader) ([]byte, error) {
	if err := b.check(h); err != nil {
		return dst, err
	}
	start := len(dst)
	dst = b.appendHeader(dst, h)
	var err error
	dst, err = CompressLevel(dst, h.Compression, h.CompressionLevel, b.records())
	if err != nil {
		return dst[:start], err
	}
	if h.Compression == CodecNone {
		err = b.finishUncompressed(dst[start:])
	} else {
		err = finishBatch(dst[start:])
	}
	if err != nil {
		return dst[:start], err
	}
	return dst, nil
}

// BuildInPlace returns the same batch as Build(nil, h), in memory owned by
// b instead of a new slice. With [CodecNone] the header is written into
// space reserved in front of the records, so nothing is copied; other
// codecs compress into a buffer b keeps for the next batch. The result is
// valid and unchanged until the next Reset, Append, Grow, Build or
// BuildInPlace on b, and must not be modified by the caller: a producer
// keeps it, unchanged, until the batch is acknowledged and only then
// Resets b (a batch to renumber with [SetBatchSequence] is copied first).
// Errors are Build's; on error nothing is returned.
func (b *BatchBuilder) BuildInPlace(h BatchHeader) ([]byte, error) {
	if err := b.check(h); err != nil {
		return nil, err
	}
	if h.Compression != CodecNone {
		out, err := b.Build(b.out[:0], h)
		if err != nil {
			return nil, err
		}
		b.out = out
		if !h.CompressIfSmaller || len(out) < RecordBatchOverhead+b.EncodedLen() {
			return out, nil
		}
		h.Compression = CodecNone
	}
	batch := b.buf
	b.appendHeader(batch[:0], h)
	if err := b.finishUncompressed(batch); err != nil {
		return nil, err
	}
	return batch, nil
}

// check reports why b cannot be built with h.
func (b *BatchBuilder) check(h BatchHeader) error {
	if b.n == 0 {
		return ErrEmptyBatch
	}
	if !h.Compression.valid() {
		return fmt.Errorf("%w: %d", ErrUnknownCodec, int8(h.Compression))
	}
	return nil
}

// appendHeader appends the RecordBatchOverhead header bytes, with the
// length and CRC left zero for finishBatch.
func (b *BatchBuilder) appendHeader(dst []byte, h BatchHeader) []byte {
	attrs := int16(h.Compression)
	if h.Transactional {
		attrs |= attrTransactional
	}
	dst = kbin.AppendInt64(dst, 0)     // baseOffset: the broker assigns it
	dst = kbin.AppendInt32(dst, 0)     // length, set by finishBatch
	dst = kbin.AppendInt32(dst, -1)    // partitionLeaderEpoch: clients send -1
	dst = append(dst, 2)               // magic
	dst = kbin.AppendInt32(dst, 0)     // crc, set by finishBatch
	dst = kbin.AppendInt16(dst, attrs) // attributes
	dst = kbin.AppendInt32(dst, b.n-1) // lastOffsetDelta
	dst = kbin.AppendInt64(dst, b.firstTS)
	dst = kbin.AppendInt64(dst, b.maxTS)
	dst = kbin.AppendInt64(dst, h.ProducerID)
	dst = kbin.AppendInt16(dst, h.ProducerEpoch)
	dst = kbin.AppendInt32(dst, h.BaseSequence)
	return kbin.AppendInt32(dst, b.n)
}

// finishBatch sets the length and CRC of a whole batch.
func finishBatch(batch []byte) error {
	if len(batch)-lengthBase > math.MaxInt32 {
		return fmt.Errorf("protocol: batch of %d bytes too large", len(batch))
	}
	binary.BigEndian.PutUint32(batch[offLength:], uint32(len(batch)-lengthBase))
	binary.BigEndian.PutUint32(batch[offCRC:], crc32.Checksum(batch[offAttributes:], crc32c))
	return nil
}

// finishUncompressed is finishBatch for a batch whose records are b's
// record bodies as appended (CodecNone): the CRC joins the header's to the
// one Append kept, rather than read the records again.
func (b *BatchBuilder) finishUncompressed(batch []byte) error {
	if len(batch)-lengthBase > math.MaxInt32 {
		return fmt.Errorf("protocol: batch of %d bytes too large", len(batch))
	}
	binary.BigEndian.PutUint32(batch[offLength:], uint32(len(batch)-lengthBase))
	b.Sum()
	crc := crc32.Checksum(batch[offAttributes:RecordBatchOverhead], crc32c)
	binary.BigEndian.PutUint32(batch[offCRC:], crc32cCombine(crc, b.crc, len(batch)-RecordBatchOverhead))
	return nil
}

// SetBatchSequence rewrites the producer id, epoch and base sequence of an
// encoded v2 batch in place and recomputes its CRC. The producer uses it
// after an epoch bump renumbers batches that were built but not
// acknowledged. batch must be exactly one batch (as built by
// [BatchBuilder.Build]); otherwise, or if the magic is not 2, it returns an
// error wrapping [ErrCorruptBatch] and leaves batch unchanged.
func SetBatchSequence(batch []byte, producerID int64, epoch int16, baseSequence int32) error {
	if err := checkFraming(batch); err != nil {
		return err
	}
	binary.BigEndian.PutUint64(batch[offProducerID:], uint64(producerID))
	binary.BigEndian.PutUint16(batch[offProducerEpoch:], uint16(epoch))
	binary.BigEndian.PutUint32(batch[offBaseSequence:], uint32(baseSequence))
	binary.BigEndian.PutUint32(batch[offCRC:], crc32.Checksum(batch[offAttributes:], crc32c))
	return nil
}

// SetBaseOffset writes the baseOffset field of an encoded batch in place, as
// a broker does when appending it. baseOffset is outside the CRC, so the
// batch stays valid. It panics if batch is shorter than 8 bytes.
func SetBaseOffset(batch []byte, off int64) {
	if len(batch) < 8 {
		panic("protocol: SetBaseOffset on a batch shorter than 8 bytes")
	}
	binary.BigEndian.PutUint64(batch[offBaseOffset:], uint64(off))
}

// checkFraming verifies that batch is one whole v2 batch: long enough for a
// header, magic 2, and a length field matching len(batch).
func checkFraming(batch []byte) error {
	if len(batch) < RecordBatchOverhead {
		return fmt.Errorf("%w: %d bytes, need at least %d", ErrCorruptBatch, len(batch), RecordBatchOverhead)
	}
	if m := int8(batch[offMagic]); m != 2 {
		return fmt.Errorf("%w: magic %d, want 2", ErrCorruptBatch, m)
	}
	length := int32(binary.BigEndian.Uint32(batch[offLength:]))
	if int64(length)+lengthBase != int64(len(batch)) {
		return fmt.Errorf("%w: length field %d does not match %d bytes", ErrCorruptBatch, length, len(batch))
	}
	return nil
}
