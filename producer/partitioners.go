package producer

import (
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
)

// Partitioner chooses the partition of each record that was not given one
// with [Record.SetPartition]. Set it with [RecordPartitioner], or by name
// with the properties partitioner.class (Java) and partitioner
// (librdkafka). Without one, records with a key go to
// murmur2(key) mod partitions, as in the Java client, and records without
// a key stick to one partition per topic until batch.size bytes have gone
// to it (partitioner.adaptive.partitioning.enable chooses the next one),
// chosen among the partitions with a leader when some have none (as in the
// Java client), and with partitioner.rack.aware among those led in
// client.rack when any is; with partitioner.availability.timeout.ms the
// next one is not a partition whose queued batches have waited that long
// with none sent, while another is available.
//
// The implementer's contract:
//   - Partition is called with the producer's lock held, one call at a
//     time per producer, from Produce (or, for records produced before
//     the topic's partition count was known, once metadata names it). It
//     must be fast, must not block and must not call the producer. A
//     Partitioner value serves one producer: it may keep state (a
//     round-robin counter) without a lock, but must not be shared.
//   - It returns a partition in [0, numPartitions), or [StickyPartition] to
//     put the record on the topic's sticky partition (what the default
//     does for records without a key). Any other value, or a non-nil
//     error, or a panic, fails that record alone with [ErrInvalidRecord]
//     through its callback; the producer goes on.
//   - It must not keep r, nor change it.
//
// numPartitions is the topic's count in the latest metadata, so keys map
// over the current count after partitions are added or a topic is
// re-created with fewer (records already placed on a partition that no
// longer exists fail with [ErrPartitionGone], whichever partitioner
// placed them).
type Partitioner interface {
	Partition(r *Record, numPartitions int32) (int32, error)
}

// PartitionerFunc adapts a function to the [Partitioner] interface; the
// function follows the same contract.
type PartitionerFunc func(r *Record, numPartitions int32) (int32, error)

// Partition calls f(r, numPartitions).
func (f PartitionerFunc) Partition(r *Record, numPartitions int32) (int32, error) {
	return f(r, numPartitions)
}

// StickyPartition is what a [Partitioner] returns to put the record on its
// topic's sticky partition: the partition records without a key share
// until batch.size bytes have gone to it, as in the Java client (KIP-480
// and KIP-794; partitioner.adaptive.partitioning.enable chooses the next).
const StickyPartition int32 = -1

// errNoPartition is ManualPartitioner's error for a record without
// SetPartition.
var errNoPartition = errors.New("the manual partitioner needs Record.SetPartition on every record")

// Murmur2Partitioner returns the default partitioner, as a value: a record
// with a key goes to (murmur2(key) & 0x7fffffff) mod numPartitions, the
// Java client's built-in partitioner and librdkafka's murmur2 and
// murmur2_random; a record without a key (nil Key; an empty non-nil key is
// hashed, as in both) goes to the sticky partition.
func Murmur2Partitioner() Partitioner { return murmur2Partitioner{} }

type murmur2Partitioner struct{}

func (murmur2Partitioner) Partition(r *Record, n int32) (int32, error) {
	if r.Key == nil {
		return StickyPartition, nil
	}
	return keyPartition(r.Key, n), nil
}

// FNV1aPartitioner returns the partitioner of sarama's NewHashPartitioner
// and librdkafka's fnv1a and fnv1a_random, so a service moving from either
// keeps its keys on the same partitions: the 32-bit FNV-1a hash of the key,
// read as an int32, modulo numPartitions, a negative result negated. A
// record without a key (nil Key) goes to the sticky partition (sarama
// picks a random partition per record, librdkafka a sticky one).
func FNV1aPartitioner() Partitioner { return fnv1aPartitioner{} }

type fnv1aPartitioner struct{}

func (fnv1aPartitioner) Partition(r *Record, n int32) (int32, error) {
	if r.Key == nil {
		return StickyPartition, nil
	}
	return fnv1aPartition(r.Key, n), nil
}

// fnv1a is the 32-bit FNV-1a hash (hash/fnv's New32a, without the
// allocation).
func fnv1a(data []byte) uint32 {
	h := uint32(0x811c9dc5)
	for _, b := range data {
		h ^= uint32(b)
		h *= 0x01000193
	}
	return h
}

// fnv1aPartition is sarama's hashPartitioner arithmetic: int32(h) % n,
// negated when negative. librdkafka takes |int32(h)| first, then an
// unsigned modulo; both give the same partition, math.MinInt32 included.
func fnv1aPartition(key []byte, n int32) int32 {
	p := int32(fnv1a(key)) % n
	if p < 0 {
		p = -p
	}
	return p
}

// ConsistentPartitioner returns librdkafka's consistent partitioner: the
// CRC-32 (IEEE) of the key, unsigned, modulo numPartitions, so an empty
// key goes to partition 0. A record without a key (nil Key) goes to the
// sticky partition, as in librdkafka.
func ConsistentPartitioner() Partitioner { return crc32Partitioner{} }

// ConsistentRandomPartitioner returns librdkafka's default,
// consistent_random: like [ConsistentPartitioner], except that a record
// with an empty key, like one without a key, goes to the sticky partition.
func ConsistentRandomPartitioner() Partitioner { return crc32Partitioner{emptyIsSticky: true} }

type crc32Partitioner struct{ emptyIsSticky bool }

func (c crc32Partitioner) Partition(r *Record, n int32) (int32, error) {
	if r.Key == nil || (c.emptyIsSticky && len(r.Key) == 0) {
		return StickyPartition, nil
	}
	return int32(crc32.ChecksumIEEE(r.Key) % uint32(n)), nil
}

// RoundRobinPartitioner returns the Java client's RoundRobinPartitioner:
// each topic's records, with a key or not, go to partitions 0, 1, 2, ...
// in turn. It spreads records evenly at the cost of smaller batches (each
// record starts on another partition); unlike Java's it does not skip
// partitions without a leader, whose records wait for one.
func RoundRobinPartitioner() Partitioner { return &roundRobinPartitioner{next: map[string]int32{}} }

type roundRobinPartitioner struct{ next map[string]int32 }

func (rr *roundRobinPartitioner) Partition(r *Record, n int32) (int32, error) {
	p := rr.next[r.Topic]
	if p >= n {
		p = 0
	}
	rr.next[r.Topic] = p + 1
	return p, nil
}

// RandomPartitioner returns librdkafka's random partitioner: every record,
// with a key or not, goes to a partition chosen uniformly at random. It
// makes the smallest batches of all; prefer the default for keyless
// records.
func RandomPartitioner() Partitioner { return randomPartitioner{} }

type randomPartitioner struct{}

// Partition draws from math/rand; the producer does not call it but draws
// from its own source instead (placeWith), so tests can seed the choice.
func (randomPartitioner) Partition(_ *Record, n int32) (int32, error) { return rand.Int32N(n), nil }

// ManualPartitioner returns a partitioner for producers that choose every
// partition themselves, as sarama's NewManualPartitioner: a record given
// one with [Record.SetPartition] goes there (as with any partitioner), and
// a record without fails with [ErrInvalidRecord] rather than being placed
// where the caller did not ask.
func ManualPartitioner() Partitioner { return manualPartitioner{} }

type manualPartitioner struct{}

func (manualPartitioner) Partition(*Record, int32) (int32, error) { return 0, errNoPartition }

// stickyOnly is the Java client's deprecated UniformStickyPartitioner:
// every record goes to the sticky partition, keys ignored.
func stickyOnly() Partitioner { return stickyOnlyPartitioner{} }

type stickyOnlyPartitioner struct{}

func (stickyOnlyPartitioner) Partition(*Record, int32) (int32, error) { return StickyPartition, nil }

// RecordPartitioner sets the [Partitioner] for records not given a
// partition with [Record.SetPartition]. Default: the Java client's
// (murmur2 for keys, sticky without), which partitioner.class and
// partitioner also select by name. It overrides both properties, and
// partitioner.ignore.keys has no effect with it (as in the Java client
// with a custom partitioner). RecordPartitioner(nil) is the same as not
// passing the option.
func RecordPartitioner(p Partitioner) Opt {
	return optFunc(func(c *config) error { c.partitioner = p; return nil })
}

// javaPartitioners are the partitioner.class values that name a Java
// class we implement; nil is the default.
var javaPartitioners = map[string]func() Partitioner{
	"": nil,
	"org.apache.kafka.clients.producer.internals.DefaultPartitioner": nil,
	"org.apache.kafka.clients.producer.RoundRobinPartitioner":        RoundRobinPartitioner,
	"org.apache.kafka.clients.producer.UniformStickyPartitioner":     stickyOnly,
}

// librdkafkaPartitioners are librdkafka's partitioner names; nil is the
// default (murmur2 with a sticky partition for keyless records is what
// librdkafka's murmur2 and murmur2_random do).
var librdkafkaPartitioners = map[string]func() Partitioner{
	"murmur2_random":    nil,
	"murmur2":           nil,
	"random":            RandomPartitioner,
	"consistent":        ConsistentPartitioner,
	"consistent_random": ConsistentRandomPartitioner,
	"fnv1a":             FNV1aPartitioner,
	"fnv1a_random":      FNV1aPartitioner,
}

// partitionerSetter stores the partitioner a property names in *field.
func partitionerSetter(known map[string]func() Partitioner, allowed string, field func(*config) *func() Partitioner) func(*config, string) error {
	return func(c *config, v string) error {
		mk, ok := known[v]
		if !ok {
			return fmt.Errorf("must be one of %s; a custom partitioner is a Go value: producer.RecordPartitioner", allowed)
		}
		*field(c) = mk
		return nil
	}
}

// partitionerProperties select a built-in partitioner by name, for Java
// and confluent-kafka-go configurations.
var partitionerProperties = []property{
	{"partitioner.class", "", "Java partitioner class: empty (the default: murmur2 for keys, sticky without) or org.apache.kafka.clients.producer.RoundRobinPartitioner (also accepted: the deprecated internals.DefaultPartitioner and UniformStickyPartitioner); Go values: RecordPartitioner",
		partitionerSetter(javaPartitioners, "empty, org.apache.kafka.clients.producer.RoundRobinPartitioner, "+
			"org.apache.kafka.clients.producer.internals.DefaultPartitioner, org.apache.kafka.clients.producer.UniformStickyPartitioner",
			func(c *config) *func() Partitioner { return &c.partitionerClass })},
	{"partitioner", "murmur2_random", "librdkafka partitioner name, for confluent-kafka-go configurations: murmur2_random or murmur2 (the default behaviour), consistent_random (librdkafka's default), consistent, fnv1a, fnv1a_random or random",
		partitionerSetter(librdkafkaPartitioners, "murmur2_random, murmur2, consistent_random, consistent, fnv1a, fnv1a_random, random",
			func(c *config) *func() Partitioner { return &c.partitionerName })},
}

// resolvePartitioner picks the partitioner from the typed option or one of
// the two properties; setting both properties to non-defaults is an error,
// since one would silently lose.
func (c *config) resolvePartitioner() error {
	if c.partitionerClass != nil && c.partitionerName != nil {
		return &ConfigError{Property: "partitioner.class", Reason: "set together with partitioner (librdkafka's name); set only one"}
	}
	if c.partitioner != nil {
		return nil
	}
	switch {
	case c.partitionerClass != nil:
		c.partitioner = c.partitionerClass()
	case c.partitionerName != nil:
		c.partitioner = c.partitionerName()
	}
	return nil
}

// placeWith asks a user-chosen partitioner for r's partition among n,
// resolving StickyPartition to t's sticky partition, chosen from among
// when it names any (stickyAmong; sticky says so); its error names the
// topic and what was returned. Called with acc.mu held.
func placeWith(pt Partitioner, t *topicBuf, r *Record, n int32, among []int32) (idx int32, sticky bool, err error) {
	if _, ok := pt.(randomPartitioner); ok {
		return t.sticky.rand.Int32N(n), false, nil // the producer's source (randSources), not math/rand
	}
	idx, err = callPartitioner(pt, r, n)
	switch {
	case err != nil:
		return 0, false, fmt.Errorf("%w: partitioner %T for topic %s: %w", ErrInvalidRecord, pt, t.name, err)
	case idx == StickyPartition:
		return t.sticky.pick(n, among), true, nil
	case idx < 0 || idx >= n:
		return 0, false, fmt.Errorf("%w: partitioner %T returned partition %d; topic %s has partitions 0..%d", ErrInvalidRecord, pt, idx, t.name, n-1)
	}
	return idx, false, nil
}

// callPartitioner calls pt.Partition, turning a panic into an error: it
// runs with acc.mu held, on the caller's goroutine or the sender's,
// so a panic would leave the lock held for good (or end the program), and
// the contract promises that a bad placement fails the record alone.
func callPartitioner(pt Partitioner, r *Record, n int32) (idx int32, err error) {
	defer func() {
		if v := recover(); v != nil {
			idx, err = 0, fmt.Errorf("panic in Partition: %v", v)
		}
	}()
	return pt.Partition(r, n)
}
