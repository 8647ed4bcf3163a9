package producer

import (
	"math/rand/v2"
	"slices"

	"github.com/longhaul-kafka/longhaul/protocol"
)

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

	// leaders are the partitions' leaders in the latest metadata, for
	// stickyAmong while the sender has not applied them (records that
	// waited for the partition count are placed before it does).
	leaders []int32
	// among caches stickyAmong's answer for the leaders generation gen
	// and a topic of count partitions (set says it was computed).
	among []int32
	gen   uint64
	count int
	set   bool
}

// preferRack reports whether keyless records prefer partitions led in the
// client's rack: partitioner.rack.aware with client.rack set, as in the
// Java client, where an empty client.rack turns it off.
func (c *config) preferRack() bool { return c.rackAware && c.clientRack != "" }

// setRacks takes each broker's rack from a metadata answer; a change
// moves leadersGen, so stickyAmong looks again. Called with acc.mu held.
func (a *accumulator) setRacks(res *protocol.MetadataResult) {
	for id := range res.Brokers {
		rack := res.Racks[id]
		if old, ok := a.racks[id]; ok && old == rack || !ok && rack == "" {
			continue
		}
		if a.racks == nil {
			a.racks = make(map[int32]string)
		}
		a.racks[id] = rack
		a.leadersGen.Add(1)
	}
}

// noteLeaders keeps t's leaders from a metadata answer for
// stickyAmong. Called with acc.mu held.
func (a *accumulator) noteLeaders(t *topicBuf, parts []protocol.PartitionMetadata, brokers map[int32]string) {
	s := &t.sticky
	s.leaders = s.leaders[:0]
	for _, pm := range parts {
		for int(pm.Partition) >= len(s.leaders) {
			s.leaders = append(s.leaders, -1)
		}
		if _, ok := brokers[pm.Leader]; ok && partitionUsable(pm.ErrorCode) {
			s.leaders[pm.Partition] = pm.Leader
		}
	}
	a.leadersGen.Add(1)
}

// stickyAmong returns the partitions of t that records without a key go
// to, empty for any. Those are the partitions with a leader, when some
// have one and some not, as in the Java client (a record placed on a
// partition without a leader would wait for one, while the others can
// take it); with partitioner.rack.aware, those whose leader is in
// client.rack when the topic has any (KIP-1123), so the producer's
// traffic stays in its rack (availability zone) where it can. It is
// recomputed only after a leader or a rack changed; a sticky partition no
// longer in it is left at once. Called with acc.mu held.
func (a *accumulator) stickyAmong(t *topicBuf) []int32 {
	s := &t.sticky
	g := a.leadersGen.Load() // before the leaders: a change after this load moves it again
	if s.set && s.gen == g && s.count == len(t.bufs) {
		return s.among
	}
	rack := a.cfg.preferRack()
	leader := func(i int) int32 {
		l := t.bufs[i].ps.leader()
		if l < 0 && i < len(s.leaders) {
			l = s.leaders[i]
		}
		return l
	}
	led, inRack := 0, 0
	for i := range t.bufs {
		if l := leader(i); l >= 0 {
			led++
			if rack && a.racks[l] == a.cfg.clientRack {
				inRack++
			}
		}
	}
	s.among = s.among[:0]
	if inRack > 0 || led > 0 && led < len(t.bufs) {
		for i := range t.bufs {
			if l := leader(i); l >= 0 && (inRack == 0 || a.racks[l] == a.cfg.clientRack) {
				s.among = append(s.among, int32(i))
			}
		}
	}
	s.gen, s.count, s.set = g, len(t.bufs), true
	if s.current >= 0 && len(s.among) > 0 && !slices.Contains(s.among, s.current) {
		s.current = -1
	}
	return s.among
}

// stickyPick is t's sticky partition, chosen among stickyAmong's.
// Called with acc.mu held.
func (a *accumulator) stickyPick(t *topicBuf, n int32) int32 {
	return t.sticky.pick(n, a.stickyAmong(t))
}

// stickyMove moves t's sticky partition on (move), among stickyAmong's.
// Called with acc.mu held.
func (a *accumulator) stickyMove(t *topicBuf, n int32) {
	t.sticky.move(n, a.queuedFunc(t), a.stickyAmong(t))
}

// pick returns the sticky partition, choosing one at random (from among
// when it names any) if there is none yet.
func (s *stickyPartitioner) pick(numPartitions int32, among []int32) int32 {
	if s.current < 0 || s.current >= numPartitions {
		if len(among) > 0 {
			s.current = among[s.rand.Int32N(int32(len(among)))]
		} else {
			s.current = s.rand.Int32N(numPartitions)
		}
		s.produced = 0
	}
	return s.current
}

// placed counts size bytes just placed on the sticky partition and says
// whether to move on: once batchSize bytes have gone there, at a batch
// boundary (the record filled its batch), or at twice batchSize whatever
// the batch, as Java does. Moving only at a boundary leaves no partly
// filled batch behind; a record that would open a batch on a partition
// already due moves it first (place, via due), so it is not left
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

// move goes to a different partition than the current one, one of among
// when it names any (stickyAmong), staying when among names only the
// current one.
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
// partitions; when every sampled one is unavailable
// (partitioner.availability.timeout.ms), all are scanned.
func (s *stickyPartitioner) move(numPartitions int32, queued func(int32) int, among []int32) {
	s.produced = 0
	m := numPartitions
	if len(among) > 0 {
		m = int32(len(among))
	}
	at := func(i int32) int32 {
		if len(among) > 0 {
			return among[i]
		}
		return i
	}
	if m <= 1 {
		if len(among) == 1 {
			s.current = among[0]
		}
		return
	}
	start := s.rand.Int32N(m)
	if queued == nil {
		if at(start) == s.current {
			start = (start + 1) % m
		}
		s.current = at(start)
		return
	}
	best, bestQ := int32(-1), 0
	if m > adaptiveSamples+1 {
		for range adaptiveSamples {
			p := at(s.rand.Int32N(m))
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
			best = (s.current + 1) % m
			if len(among) > 0 {
				best = among[(int32(slices.Index(among, s.current))+1)%m]
			}
		}
		if bestQ < unavailableQueued {
			s.current = best
			return
		}
		// Every partition sampled is unavailable
		// (partitioner.availability.timeout.ms): look at them all, so one
		// that is available is found when the topic has any.
		best = -1
	}
	for i := int32(0); i < m; i++ {
		p := at((start + i) % m)
		if p == s.current {
			continue
		}
		if q := queued(p); best < 0 || q < bestQ {
			best, bestQ = p, q
		}
	}
	s.current = best
}
