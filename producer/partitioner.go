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

// adaptiveSamples is how many partitions the adaptive sticky partitioner
// compares when a topic has more than that.
const adaptiveSamples = 8

// stickyPartitioner keeps records without a key on one partition until
// batch.size bytes have gone to it, then moves to another, like the Java
// client's built-in partitioner (KIP-794): fewer, fuller batches, and every
// partition gets the same bytes whether its batches are sealed by size or
// by linger. Guarded by the producer's mu.
type stickyPartitioner struct {
	current  int32      // -1 until chosen
	produced int        // record bytes placed on current since it was chosen
	rand     *rand.Rand // the producer's randSources.part
}

func (s *stickyPartitioner) pick(numPartitions int32) int32 {
	if s.current < 0 || s.current >= numPartitions {
		s.current = s.rand.Int32N(numPartitions)
		s.produced = 0
	}
	return s.current
}

// placed counts size bytes just placed on the sticky partition and says
// whether to move on: once batchSize bytes have gone there, at a batch
// boundary (the record filled its batch), or at twice batchSize whatever
// the batch, as Java does. Moving only at a boundary leaves no partly
// filled batch behind; a record that would open a batch on a partition
// already due moves it first (placeLocked, via due), so it is not left
// alone in a batch either. A batch sealed by linger or Flush does not
// move it (the partitioner before KIP-794 did, which gave a partition on a
// slow broker, with fuller lingered batches, more of the data).
func (s *stickyPartitioner) placed(size, batchSize int, boundary bool) (moveOn bool) {
	s.produced += size
	return s.due(batchSize) && (boundary || s.due(2*batchSize))
}

// due reports whether n bytes have gone to the sticky partition since it
// was chosen.
func (s *stickyPartitioner) due(n int) bool { return s.produced >= n }

// move goes to a different partition than the current one.
// With queued, it is adaptive like the Java client's default
// (partitioner.adaptive.partitioning.enable, KIP-794): it moves to a
// partition with the fewest batches waiting to be sent, starting the search
// at a random one, so a partition held back by its window or a slow leader
// gets less new data. Without queued it picks uniformly at random.
//
// Topics with many partitions are not scanned (that was O(partitions) per
// sealed batch, under the producer's lock): the best of adaptiveSamples
// random partitions is taken instead, stopping at one with nothing queued,
// which keeps KIP-794's effect of steering data away from backed-up
// partitions.
func (s *stickyPartitioner) move(numPartitions int32, queued func(int32) int) {
	s.produced = 0
	if numPartitions <= 1 {
		return
	}
	start := s.rand.Int32N(numPartitions)
	if queued == nil {
		if start == s.current {
			start = (start + 1) % numPartitions
		}
		s.current = start
		return
	}
	best, bestQ := int32(-1), 0
	if numPartitions > adaptiveSamples+1 {
		for range adaptiveSamples {
			p := s.rand.Int32N(numPartitions)
			if p == s.current {
				continue
			}
			if q := queued(p); best < 0 || q < bestQ {
				best, bestQ = p, q
				if q == 0 {
					break
				}
			}
		}
		if best < 0 {
			best = (s.current + 1) % numPartitions
		}
		s.current = best
		return
	}
	for i := int32(0); i < numPartitions; i++ {
		p := (start + i) % numPartitions
		if p == s.current {
			continue
		}
		if q := queued(p); best < 0 || q < bestQ {
			best, bestQ = p, q
		}
	}
	s.current = best
}
