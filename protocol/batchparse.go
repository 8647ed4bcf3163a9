package protocol

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"

	"github.com/twmb/franz-go/pkg/kbin"
)

// BatchInfo is the decoded header of a RecordBatch v2. Field names follow
// the Kafka protocol; BaseSequence is kmsg's FirstSequence.
type BatchInfo struct {
	BaseOffset           int64
	Length               int32 // bytes after the length field
	PartitionLeaderEpoch int32
	Magic                int8
	CRC                  uint32
	Attributes           int16
	LastOffsetDelta      int32
	FirstTimestamp       int64
	MaxTimestamp         int64
	ProducerID           int64
	ProducerEpoch        int16
	BaseSequence         int32
	NumRecords           int32
}

// Compression returns the codec named by the attributes (possibly an
// unknown value; see [Codec.String]).
func (i BatchInfo) Compression() Codec { return Codec(i.Attributes & attrCodecMask) }

// Transactional reports the transactional attribute bit.
func (i BatchInfo) Transactional() bool { return i.Attributes&attrTransactional != 0 }

// Control reports the control-batch attribute bit (transaction markers).
func (i BatchInfo) Control() bool { return i.Attributes&attrControl != 0 }

// LogAppendTime reports whether the timestamps are broker append times.
func (i BatchInfo) LogAppendTime() bool { return i.Attributes&attrLogAppendTime != 0 }

// TotalLen returns the batch's size on the wire, header included.
func (i BatchInfo) TotalLen() int { return int(i.Length) + lengthBase }

// LastSequence returns the sequence number of the batch's last record,
// BaseSequence+LastOffsetDelta wrapping from 2^31-1 to 0 as Kafka's
// sequences do. A batch without sequence (BaseSequence -1) returns -1.
func (i BatchInfo) LastSequence() int32 {
	if i.BaseSequence < 0 {
		return -1
	}
	return int32((int64(i.BaseSequence) + int64(i.LastOffsetDelta)) % (1 << 31))
}

// ParseBatchHeader decodes the header of the v2 batch at the start of b and
// verifies its CRC-32C over the whole batch (b may continue with further
// batches). Errors (short input, magic other than 2, a length field
// outside b, CRC mismatch) wrap [ErrCorruptBatch]. It allocates nothing.
func ParseBatchHeader(b []byte) (BatchInfo, error) {
	var i BatchInfo
	if len(b) < RecordBatchOverhead {
		return i, fmt.Errorf("%w: %d bytes, need at least %d", ErrCorruptBatch, len(b), RecordBatchOverhead)
	}
	be := binary.BigEndian
	i.BaseOffset = int64(be.Uint64(b[offBaseOffset:]))
	i.Length = int32(be.Uint32(b[offLength:]))
	i.PartitionLeaderEpoch = int32(be.Uint32(b[offLeaderEpoch:]))
	i.Magic = int8(b[offMagic])
	i.CRC = be.Uint32(b[offCRC:])
	i.Attributes = int16(be.Uint16(b[offAttributes:]))
	i.LastOffsetDelta = int32(be.Uint32(b[offLastOffsetDelta:]))
	i.FirstTimestamp = int64(be.Uint64(b[offFirstTimestamp:]))
	i.MaxTimestamp = int64(be.Uint64(b[offMaxTimestamp:]))
	i.ProducerID = int64(be.Uint64(b[offProducerID:]))
	i.ProducerEpoch = int16(be.Uint16(b[offProducerEpoch:]))
	i.BaseSequence = int32(be.Uint32(b[offBaseSequence:]))
	i.NumRecords = int32(be.Uint32(b[offNumRecords:]))
	if i.Magic != 2 {
		return i, fmt.Errorf("%w: magic %d, want 2", ErrCorruptBatch, i.Magic)
	}
	if i.Length < RecordBatchOverhead-lengthBase || int64(i.Length)+lengthBase > int64(len(b)) {
		return i, fmt.Errorf("%w: length field %d with %d bytes available", ErrCorruptBatch, i.Length, len(b)-lengthBase)
	}
	if crc := crc32.Checksum(b[offAttributes:lengthBase+int(i.Length)], crc32c); crc != i.CRC {
		return i, fmt.Errorf("%w: crc %08x, computed %08x", ErrCorruptBatch, i.CRC, crc)
	}
	return i, nil
}

// Record is a decoded record. Key and Value are nil when null; they alias
// the input of [ParseRecordBatch] (or its decompression buffer).
type Record struct {
	// Offset is the batch's BaseOffset plus the record's offset delta.
	Offset int64
	// Timestamp is FirstTimestamp plus the record's delta, or the batch's
	// MaxTimestamp when the batch uses LogAppendTime.
	Timestamp int64
	Key       []byte
	Value     []byte
	Headers   []Header
}

// minRecordSize is the smallest possible encoded record: length, attributes,
// timestamp delta, offset delta, key, value, header count (one byte each).
// It bounds how many Records a body of a given size can claim.
const minRecordSize = 7

// ParseRecordBatch fully decodes the single v2 batch at the start of b: it
// checks the header and CRC as [ParseBatchHeader] does, decompresses the
// body (producing at most maxDecompressed bytes; <= 0 means
// [DefaultMaxFrameSize]) and decodes NumRecords records, which must fill
// the body exactly. Counts and lengths are checked against the bytes
// present before anything is allocated, so hostile input cannot cause a
// panic or an allocation larger than the input or maxDecompressed. Errors
// wrap [ErrCorruptBatch]. Safe for concurrent use.
func ParseRecordBatch(b []byte, maxDecompressed int) (BatchInfo, []Record, error) {
	info, err := ParseBatchHeader(b)
	if err != nil {
		return info, nil, err
	}
	var recs []Record
	err = ForEachRecord(b, info, maxDecompressed, func(i int, rec Record) error {
		if recs == nil {
			// ForEachRecord checked that NumRecords records can fit.
			recs = make([]Record, 0, info.NumRecords)
		}
		recs = append(recs, rec)
		return nil
	})
	if err != nil {
		return info, nil, err
	}
	if recs == nil {
		recs = []Record{}
	}
	return info, recs, nil
}

// ForEachRecord decodes the records of the v2 batch b one at a time,
// checking them as [ParseRecordBatch] does but without allocating a slice
// of them: a server that only validates a batch before storing its bytes
// decodes it for nothing but the check. info must be what
// [ParseBatchHeader](b) returned without error (the header and CRC are not
// checked again). fn gets each record's index and the record, whose Key,
// Value and header values alias b (or the decompression buffer); header
// keys are copied. A non-nil error from fn stops the walk and is returned
// as is. The walk allocates nothing itself for an uncompressed batch of
// records without headers (a record's Headers slice is allocated).
// Decoding errors wrap [ErrCorruptBatch]; the records before the bad one
// have been passed to fn. Safe for concurrent use.
func ForEachRecord(b []byte, info BatchInfo, maxDecompressed int, fn func(i int, rec Record) error) error {
	if info.TotalLen() > len(b) || info.TotalLen() < RecordBatchOverhead {
		return fmt.Errorf("%w: header says %d bytes, have %d", ErrCorruptBatch, info.TotalLen(), len(b))
	}
	body := b[RecordBatchOverhead:info.TotalLen()]
	if c := info.Compression(); c != CodecNone {
		if !c.valid() {
			return fmt.Errorf("%w: unknown codec %d", ErrCorruptBatch, int8(c))
		}
		var err error
		body, err = Decompress(nil, c, body, maxDecompressed)
		if err != nil {
			return fmt.Errorf("%w: %w", ErrCorruptBatch, err)
		}
	}
	if info.NumRecords < 0 || int64(info.NumRecords)*minRecordSize > int64(len(body)) {
		return fmt.Errorf("%w: %d records cannot fit in %d bytes", ErrCorruptBatch, info.NumRecords, len(body))
	}
	r := reader{b: body}
	for i := range int(info.NumRecords) {
		var rec Record
		if err := r.record(&rec, &info); err != nil {
			return fmt.Errorf("%w: record %d: %w", ErrCorruptBatch, i, err)
		}
		if err := fn(i, rec); err != nil {
			return err
		}
	}
	if len(r.b) != 0 {
		return fmt.Errorf("%w: %d trailing bytes after %d records", ErrCorruptBatch, len(r.b), info.NumRecords)
	}
	return nil
}

// reader decodes record fields; the first failure sticks in err.
type reader struct {
	b   []byte
	err error
}

var errShort = fmt.Errorf("truncated")

func (r *reader) varint() int32 { return readVar(r, kbin.Varint) }

func (r *reader) varlong() int64 { return readVar(r, kbin.Varlong) }

// readVar reads one variable-length number with decode (kbin.Varint or
// kbin.Varlong); a short or overlong one sets r.err and reads 0.
func readVar[T int32 | int64](r *reader, decode func([]byte) (T, int)) T {
	if r.err != nil {
		return 0
	}
	v, n := decode(r.b)
	if n <= 0 {
		r.err = errShort
		return 0
	}
	r.b = r.b[n:]
	return v
}

// bytes reads varint-length-prefixed bytes; -1 is null (nil).
func (r *reader) bytes() []byte {
	l := r.varint()
	if r.err != nil || l == -1 {
		return nil
	}
	if l < 0 || int(l) > len(r.b) {
		r.err = fmt.Errorf("length %d with %d bytes left", l, len(r.b))
		return nil
	}
	v := r.b[:l:l]
	r.b = r.b[l:]
	return v
}

func (r *reader) record(rec *Record, info *BatchInfo) error {
	length := r.varint()
	if r.err != nil {
		return r.err
	}
	if length < 0 || int(length) > len(r.b) {
		return fmt.Errorf("length %d with %d bytes left", length, len(r.b))
	}
	in := reader{b: r.b[:length]}
	r.b = r.b[length:]
	if len(in.b) < 1 {
		return errShort
	}
	in.b = in.b[1:] // attributes, unused
	tsDelta := in.varlong()
	offDelta := in.varint()
	rec.Key = in.bytes()
	rec.Value = in.bytes()
	nh := in.varint()
	if in.err != nil {
		return in.err
	}
	// Each header needs at least two bytes (key length, value length).
	if nh < 0 || int(nh) > len(in.b)/2 {
		return fmt.Errorf("%d headers cannot fit in %d bytes", nh, len(in.b))
	}
	if nh > 0 {
		rec.Headers = make([]Header, nh)
		for i := range rec.Headers {
			k := in.bytes()
			if in.err == nil && k == nil {
				return fmt.Errorf("null header key")
			}
			rec.Headers[i] = Header{Key: string(k), Value: in.bytes()}
		}
	}
	if in.err != nil {
		return in.err
	}
	if len(in.b) != 0 {
		return fmt.Errorf("%d bytes left inside record", len(in.b))
	}
	rec.Offset = info.BaseOffset + int64(offDelta)
	if info.LogAppendTime() {
		rec.Timestamp = info.MaxTimestamp
	} else {
		rec.Timestamp = info.FirstTimestamp + tsDelta
	}
	return nil
}

// SplitBatches splits the Records bytes of one Produce (or Fetch) partition
// into its v2 batches by their length fields, without checking CRCs (use
// [ParseBatchHeader] on each). The returned slices alias records, with
// capacity clipped to the batch. Empty input gives no batches. A truncated
// batch, a length below the v2 minimum, or a magic other than 2 is an error
// wrapping [ErrCorruptBatch].
func SplitBatches(records []byte) ([][]byte, error) {
	var out [][]byte
	for rest := records; len(rest) > 0; {
		if len(rest) < RecordBatchOverhead {
			return nil, fmt.Errorf("%w: %d trailing bytes, less than a batch header", ErrCorruptBatch, len(rest))
		}
		if m := int8(rest[offMagic]); m != 2 {
			return nil, fmt.Errorf("%w: magic %d, want 2", ErrCorruptBatch, m)
		}
		length := int32(binary.BigEndian.Uint32(rest[offLength:]))
		if length < RecordBatchOverhead-lengthBase || int64(length)+lengthBase > int64(len(rest)) {
			return nil, fmt.Errorf("%w: length field %d with %d bytes available", ErrCorruptBatch, length, len(rest)-lengthBase)
		}
		n := int(length) + lengthBase
		out = append(out, rest[:n:n])
		rest = rest[n:]
	}
	return out, nil
}
