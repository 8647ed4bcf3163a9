// Package broker is an embedded Kafka broker for developing and testing
// longhaul against KIP-1269 (a configurable per-producer dedup window,
// announced to the client in every ProduceResponse v14) and KIP-854
// (producer-id expiration).
//
// It is a real TCP server speaking the Kafka protocol on loopback, so any
// Kafka client can use it; it is not a production broker. [Start] brings
// up a cluster of one or more nodes, each on its own listener, and returns
// a [Cluster] whose methods control it (move leaders, restart nodes, move
// a node to a new address or replace its process, change a topic's window,
// expire producer ids), inject faults (drop responses, close connections,
// answer error codes, stall a node) and observe it (per-partition
// counters, batches in flight beyond an announced window, and the log
// itself).
//
// The server is built like franz-go's kfake: one file per API key
// (00_produce.go, 01_fetch.go, ...), each opening with the versions it
// serves and what it simplifies. Framing and record-batch parsing come from
// package protocol; request and response bodies are decoded and encoded
// by kmsg.
//
// # Concurrency
//
// Every [Cluster] method is safe for concurrent use, also while clients
// are connected. One mutex guards all cluster data; a handler holds it
// only while it computes its answer, never while it waits (Fetch's
// MaxWait, link emulation and stalls all wait without it).
//
// Each connection has a reader goroutine that reads a request, handles it
// at once and queues the response, and a writer goroutine that writes the
// queued responses in request order, each no earlier than its request's
// read time plus the node's emulated round trip. Requests on one
// connection are therefore delayed concurrently, not one after another:
// pipelining is preserved, as on a real long link.
//
// # Broker rules
//
// Per partition and producer id the broker keeps the metadata of the last
// N batches, N being the topic's producer.state.batches.to.retain (5 on an
// old-mode node). A batch equal to a retained one is a duplicate, answered
// with the original offsets and not appended; a batch that does not follow
// the newest retained one is OUT_OF_ORDER_SEQUENCE_NUMBER; a new epoch
// must start at sequence 0; an older epoch is INVALID_PRODUCER_EPOCH; with
// no state any first sequence is accepted. See SPEC.md "Broker side".
//
// # Transactions and groups
//
// A transaction coordinator (txn.go, after Kafka's TransactionCoordinator)
// maps transactional ids to producer ids and epochs, fences zombies, times
// transactions out and writes COMMIT and ABORT markers as control batches
// asynchronously, after [Cluster.SetMarkerDelay] or once
// [Cluster.HoldMarkers] releases them, so clients meet
// CONCURRENT_TRANSACTIONS as they do on Kafka. Partitions track their last
// stable offset and aborted transactions for read_committed Fetch and
// ListOffsets. Clients choose their protocol from the finalized feature
// transaction.version (0, 1 or 2, [Cluster.SetTransactionVersion]); the
// request versions decide what the coordinator does (Produce v12+ adds
// partitions implicitly, EndTxn v5 bumps the epoch: KIP-890), except for a
// transaction it fences or times out, which it ends under the feature's
// version of that moment, as Kafka's coordinator does. A coordinator that
// loads a transactional id (a move, a failover, a new process on its
// node) knows what Kafka's transaction log holds and not the epoch
// before the id's last bump. A group
// coordinator (groups.go) serves the classic consumer group protocol and
// committed offsets, transactional ones included (KIP-447). Coordinators
// are the leaders of the 50 partitions of __transaction_state and
// __consumer_offsets, placed round-robin and moved by
// [Cluster.MoveCoordinator]; [Cluster.InjectCoordinatorError] answers
// coordinator errors. Not modelled: transactional ids never expire
// (Kafka's transactional.id.expiration.ms), and partitions take every
// marker whatever coordinator epoch it carries, so no marker write is
// refused TRANSACTION_COORDINATOR_FENCED.
package broker
