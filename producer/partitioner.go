package producer

import "math/rand/v2"

// murmur2 is the Java client's Utils.murmur2, so keyed records land on the
// same partition as they would from a Java producer.
func murmur2(data []byte) int32 {
	const (
		seed uint32 = 0x9747b28c
		m    uint32 = 0x5bd1e995
		r           = 24
	)
	n := len(data)
	h := seed ^ uint32(n)
	for i := 0; i+4 <= n; i += 4 {
		k := uint32(data[i]) | uint32(data[i+1])<<8 | uint32(data[i+2])<<16 | uint32(data[i+3])<<24
		k *= m
		k ^= k >> r
		k *= m
		h *= m
		h ^= k
	}
	tail := n &^ 3
	switch n % 4 {
	case 3:
		h ^= uint32(data[tail+2]) << 16
		fallthrough
	case 2:
		h ^= uint32(data[tail+1]) << 8
		fallthrough
	case 1:
		h ^= uint32(data[tail])
		h *= m
	}
	h ^= h >> 13
	h *= m
	h ^= h >> 15
	return int32(h)
}

// keyPartition is the Java client's choice for a keyed record:
// toPositive(murmur2(key)) % numPartitions.
func keyPartition(key []byte, numPartitions int32) int32 {
	return (murmur2(key) & 0x7fffffff) % numPartitions
}

// stickyPartitioner keeps records without a key on one partition until that
// partition's batch is full, then moves to another, like the Java client's
// built-in partitioner: fewer, fuller batches. Guarded by the producer's mu.
type stickyPartitioner struct {
	current int32 // -1 until chosen
}

func (s *stickyPartitioner) pick(numPartitions int32) int32 {
	if s.current < 0 || s.current >= numPartitions {
		s.current = rand.Int32N(numPartitions)
	}
	return s.current
}

// batchFull moves to a different partition when the sticky one filled up.
func (s *stickyPartitioner) batchFull(partition, numPartitions int32) {
	if partition != s.current || numPartitions <= 1 {
		return
	}
	next := rand.Int32N(numPartitions - 1)
	if next >= s.current {
		next++
	}
	s.current = next
}
