package producer

import (
	"sort"
	"sync/atomic"
	"time"

	"github.com/longhaul-kafka/longhaul/inflight"
)

// PartitionStats is one partition's in-flight state at the time of
// [Producer.Stats].
type PartitionStats struct {
	Topic     string
	Partition int32
	Leader    int32 // broker id, -1 if unknown
	// Limit is the partition's current in-flight limit: 5 until learned
	// from a ProduceResponse, then the broker's window (KIP-1269), either
	// capped by longhaul.max.window; 1 on a Kafka 0.11 leader (Produce v3),
	// which retains only the last batch.
	Limit    int
	InFlight int  // batches in flight now
	Gated    bool // at most one batch in flight until one is acked
	// Draining: an attempt of one of the partition's batches failed
	// while others were in flight, and no batch is sent until every one in flight is
	// back; InFlight counts them. Draining then ends with Gated set: the
	// broker may have lost the producer's state, so the retries go one
	// at a time until one is acked. Gated is set while draining too once
	// the partition is reset meanwhile (its topic re-created, for one).
	Draining       bool
	BatchesSent    int64 // batches sent, retries included
	BatchesRetried int64 // batches sent again after a failure
}

// NodeStats is one broker connection's state.
type NodeStats struct {
	ID               int32
	Connected        bool
	RequestsInFlight int
	// Requests counts the produce requests to the node that completed:
	// answered, or failed with their connection. RequestTime is their
	// latencies summed (each from the moment the request was handed to
	// the connection to its completion, as [RequestInfo.Latency]), so
	// RequestTime / Requests is the mean request latency: the time a batch
	// spent on the wire and in the broker, apart from the time it waited
	// in the producer (BatchInfo.Age of HookBatchSent) and from retries
	// (BatchesRetried).
	Requests    int64
	RequestTime time.Duration
}

// nodeStats is a node's request figures, written by the sender goroutine
// and read by Stats.
type nodeStats struct {
	requests, requestNanos atomic.Int64
}

// Stats is a snapshot of the producer, from [Producer.Stats].
type Stats struct {
	ProducerID    int64 // -1 before InitProducerId answered
	ProducerEpoch int16 // the epoch of ProducerID
	// EpochBumps counts the identities the idempotent producer took after
	// its first to recover: an epoch bump (the same id, epoch one
	// higher) or a new producer id, each renumbering the unacknowledged
	// batches. The epoch a transactional producer moves at each
	// transaction (transaction version 2) does not count.
	EpochBumps     int64
	RecordsSent    int64 // records acknowledged
	RecordsFailed  int64 // records failed after they were accepted
	BatchesSent    int64
	BatchesRetried int64
	// ProduceRequests counts the produce requests sent; BatchesSent per
	// request is how many partitions' batches each carried on average.
	ProduceRequests int64
	// Throttles counts the produce answers (Produce v6+) that carried a
	// throttle time: a broker over a quota (KIP-219), which then reads
	// nothing from that connection for that long. ThrottledTime is how
	// long, summed over connections, the producer held sends for them:
	// nothing is sent on a throttled connection until its throttle ends,
	// and that wait is not counted against request.timeout.ms.
	Throttles     int64
	ThrottledTime time.Duration
	// BufferedBytes is the buffer.memory held now: the records accepted
	// and not yet called back (open, queued, in flight or waiting for a
	// retry), counted as their batches' buffers, as buffer.memory counts
	// them. BufferedRecords is how many records that is. Both are 0 once
	// every callback has returned: a batch is released after its records'
	// callbacks return, so a moment after its last callback is called.
	BufferedBytes   int64
	BufferedRecords int64
	// Readback counts the records of unknown fate that read-back
	// (longhaul.readback.enable) settled, by outcome.
	Readback ReadbackStats
	// TransactionsCommitted and TransactionsAborted count the
	// transactions whose CommitTransaction or AbortTransaction succeeded
	// (transactional.id only).
	TransactionsCommitted int64
	TransactionsAborted   int64
	Partitions            []PartitionStats // sorted by topic, then partition
	Nodes                 []NodeStats      // sorted by id
}

// Stats returns a snapshot of windows, in-flight counts and totals. It is
// safe to call from any goroutine; the numbers may be a moment apart.
func (p *Producer) Stats() Stats {
	s := p.s
	st := Stats{
		ProducerID:      -1,
		EpochBumps:      s.bumps.Load(),
		RecordsSent:     s.stats.recordsSent.Load(),
		RecordsFailed:   s.stats.recordsFailed.Load(),
		BatchesSent:     s.stats.batchesSent.Load(),
		BatchesRetried:  s.stats.batchesRetried.Load(),
		ProduceRequests: s.reqs.Load(),
		Throttles:       s.stats.throttles.Load(),
		ThrottledTime:   time.Duration(s.stats.throttledNanos.Load()),
		Readback:        s.stats.readback.snapshot(),

		TransactionsCommitted: s.txnStats.committed.Load(),
		TransactionsAborted:   s.txnStats.aborted.Load(),
	}
	if id := s.idPub.Load(); id >= 0 {
		st.ProducerID, st.ProducerEpoch = id>>16, int16(uint16(id))
	}
	st.BufferedBytes = p.mem.Held()
	p.acc.locked(func(v accHeld) {
		st.BufferedRecords = v.outstanding()
		v.partitions(func(ps *partitionState) {
			limit, inFlight, state := p.limiter.Snapshot(ps.admission)
			st.Partitions = append(st.Partitions, PartitionStats{
				Topic:          ps.topic.name,
				Partition:      ps.id,
				Leader:         ps.leader(),
				Limit:          limit,
				InFlight:       inFlight,
				Gated:          state == inflight.Gated || state == inflight.DrainingGated,
				Draining:       state == inflight.Draining || state == inflight.DrainingGated,
				BatchesSent:    ps.sent.Load(),
				BatchesRetried: ps.retried.Load(),
			})
		})
	})
	p.mu.Lock()
	for _, n := range p.nodes {
		st.Nodes = append(st.Nodes, NodeStats{ID: n.id, Connected: n.connected.Load(), RequestsInFlight: p.limiter.NodeInFlight(n.admission),
			Requests: n.stats.requests.Load(), RequestTime: time.Duration(n.stats.requestNanos.Load())})
	}
	p.mu.Unlock()
	sort.Slice(st.Partitions, func(i, j int) bool {
		a, b := st.Partitions[i], st.Partitions[j]
		return a.Topic < b.Topic || a.Topic == b.Topic && a.Partition < b.Partition
	})
	sort.Slice(st.Nodes, func(i, j int) bool { return st.Nodes[i].ID < st.Nodes[j].ID })
	return st
}

// InFlightLimit returns the current in-flight limit of a partition: 5
// (inflight.DefaultWindow) until the producer has learned the broker's
// window from a ProduceResponse, then that window, either capped by
// longhaul.max.window; 1 on a Kafka 0.11 leader (Produce v3), which
// retains only the last batch; 5 for a partition it does not know.
func (p *Producer) InFlightLimit(topic string, partition int32) int {
	limit := inflight.DefaultWindow
	p.acc.locked(func(v accHeld) {
		if ps := v.partition(topic, partition); ps != nil {
			limit = p.limiter.Limit(ps.admission)
		}
	})
	return limit
}
