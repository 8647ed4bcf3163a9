package kafkatest

import (
	"encoding/binary"
	"hash/crc32"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// IdempotentBatch returns an uncompressed v2 record batch (magic 2) of one
// record per value, for raw Produce probes: producer id and epoch as given,
// first sequence firstSeq, timestamps now. It is built with kmsg's
// RecordBatch layout, independently of our protocol package, so a probe
// does not share bugs with the code under test.
func IdempotentBatch(producerID int64, epoch int16, firstSeq int32, values [][]byte) []byte {
	return recordBatch(0, producerID, epoch, firstSeq, values)
}

// TransactionalBatch is [IdempotentBatch] with the transactional attribute
// bit set: a batch of the producer's open transaction.
func TransactionalBatch(producerID int64, epoch int16, firstSeq int32, values [][]byte) []byte {
	return recordBatch(0x10, producerID, epoch, firstSeq, values)
}

func recordBatch(attrs int16, producerID int64, epoch int16, firstSeq int32, values [][]byte) []byte {
	now := time.Now().UnixMilli()
	var records []byte
	for i, v := range values {
		r := kmsg.Record{OffsetDelta: int32(i), Value: v}
		body := r.AppendTo(nil)
		// AppendTo wrote Length=0 as one varint byte; the real length is
		// everything after it.
		r.Length = int32(len(body) - 1)
		records = r.AppendTo(records)
	}
	b := kmsg.RecordBatch{
		PartitionLeaderEpoch: -1,
		Magic:                2,
		Attributes:           attrs,
		LastOffsetDelta:      int32(len(values) - 1),
		FirstTimestamp:       now,
		MaxTimestamp:         now,
		ProducerID:           producerID,
		ProducerEpoch:        epoch,
		FirstSequence:        firstSeq,
		NumRecords:           int32(len(values)),
		Records:              records,
	}
	out := b.AppendTo(nil)
	// Length counts from PartitionLeaderEpoch (offset 12) to the end; the
	// CRC-32C covers Attributes (offset 21) to the end.
	binary.BigEndian.PutUint32(out[8:], uint32(len(out)-12))
	binary.BigEndian.PutUint32(out[17:], crc32.Checksum(out[21:], castagnoli))
	return out
}
