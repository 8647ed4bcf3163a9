package broker

import "slices"

// PartitionStats are a partition's counters since it was created or since
// [Cluster.ResetStats].
type PartitionStats struct {
	// MaxInFlight is the largest number of batches of one producer id on
	// this partition in flight at once, counted from the moment the
	// request was read until its response was written (or dropped, or
	// its connection closed), emulated delay included. Batches answered
	// with an error count too.
	MaxInFlight int
	// Appended counts batches appended to the log.
	Appended int
	// Duplicates counts retries recognised as duplicates (answered with
	// the original offsets, not appended).
	Duplicates int
	// OutOfOrder, InvalidEpoch and UnknownProducer count partition
	// responses with OUT_OF_ORDER_SEQUENCE_NUMBER, INVALID_PRODUCER_EPOCH
	// and UNKNOWN_PRODUCER_ID, injected ones included.
	OutOfOrder, InvalidEpoch, UnknownProducer int
}

// PartitionStats returns the partition's counters; zero for an unknown
// partition.
func (c *Cluster) PartitionStats(topic string, partition int32) PartitionStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.partition(topic, partition)
	if p == nil {
		return PartitionStats{}
	}
	return p.stats
}

// ResetStats zeroes every partition's counters. Batches in flight at the
// time still count toward the new MaxInFlight.
func (c *Cluster) ResetStats() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, t := range c.topics {
		for _, p := range t.parts {
			p.stats = PartitionStats{}
			for _, e := range p.inflight {
				p.stats.MaxInFlight = max(p.stats.MaxInFlight, e.n)
			}
		}
	}
}

// Records returns a copy of the partition's log, in offset order; nil for
// an unknown partition. Transaction markers are left out (their offsets
// are gaps); records of open and aborted transactions are in
// ([Cluster.CommittedRecords] leaves them out). Key, Value and Headers
// share the broker's memory and must not be modified.
func (c *Cluster) Records(topic string, partition int32) []LogRecord {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.partition(topic, partition)
	if p == nil {
		return nil
	}
	recs := p.logRecords()
	if pt := c.ptxn[p]; pt != nil && len(pt.control) > 0 {
		recs = slices.DeleteFunc(recs, func(r LogRecord) bool { return pt.control[r.Offset] })
	}
	return recs
}

// InitProducerIDRequests returns how many InitProducerId requests asked
// for a new producer id and how many asked to bump an existing one's
// epoch (KIP-360), since [Start].
func (c *Cluster) InitProducerIDRequests() (newID, bump int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.initAsks[0], c.initAsks[1]
}

// MetadataRequests returns how many Metadata requests all nodes have
// answered since [Start], so a test can bound a client's request rate.
func (c *Cluster) MetadataRequests() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.metaRequests
}
