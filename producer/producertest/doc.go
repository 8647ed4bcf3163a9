// Package producertest runs a fake Kafka cluster in the test process, for
// testing code that uses package producer, as net/http/httptest does for
// HTTP. The cluster is longhaul's embedded broker: real TCP listeners on
// loopback speaking the Kafka protocol (any Kafka client can use it), with
// KIP-1269 windows, idempotent deduplication and producer-id expiry
// (KIP-854). It is for tests, not production.
//
// # Entry points
//
// [Start] (or [NewCluster] in a test) brings up nodes and
// topics; [Cluster.Addr] is the bootstrap address to give the producer;
// [Cluster.Records] reads a partition's log back. Faults a test may want:
// [Cluster.InjectError] (a partition answers an error code),
// [Cluster.DropProduceResponses] (appends happen, answers are lost),
// [Cluster.DropConnections], [Cluster.MoveLeader], [Cluster.MoveNode]
// (failover to a new address), [Cluster.ExpireProducerIDs],
// [Cluster.SetWindow], [Cluster.SetRTT].
//
// # Transactions
//
// The cluster has Kafka's transaction and group coordinators, so
// transactional producers and consumer groups work against it.
// [Cluster.CommittedRecords] reads a partition as a read_committed
// consumer does and [Cluster.CommittedOffset] a group's offsets. Faults
// for transactions: [Cluster.SetMarkerDelay] and [Cluster.HoldMarkers]
// (a transaction stays completing, so the producer's next steps meet
// CONCURRENT_TRANSACTIONS), [Cluster.MoveTransactionCoordinator] and
// [Cluster.MoveGroupCoordinator], [Cluster.InjectCoordinatorError],
// [Cluster.TimeOutTransaction], [Cluster.DenyTransactionalID], and
// [Cluster.SetTransactionVersion] for the protocol of Kafka 3.x
// (transaction version 1) or 4.x (2). Not modelled: transactional ids
// never expire (transactional.id.expiration.ms), and markers are never
// refused TRANSACTION_COORDINATOR_FENCED for a stale coordinator epoch.
//
// # Concurrency
//
// Every Cluster method is safe for concurrent use, also while
// producers are connected. A fault applies to requests read after the call
// returns.
package producertest
