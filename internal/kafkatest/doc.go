// Package kafkatest runs real Apache Kafka brokers for tests: KRaft combined
// mode (each JVM is broker and controller) on loopback, one node or a
// 3-voter quorum, with a [linkproxy.Proxy] in front of every broker.
//
// Entry points:
//   - [Start] resolves the Kafka jars with Maven into a cache directory
//     ([CacheDir], reused between runs), formats storage, starts the JVMs on
//     free ports, waits until every broker answers ApiVersions and is
//     registered, and stops everything in t.Cleanup, even when the test
//     fails. It skips the test when Java or Maven is missing, unless
//     LONGHAUL_REQUIRE_KAFKA=1 (CI), where it fails instead.
//   - [Cluster] gives addresses ([Cluster.Bootstrap] direct,
//     [Cluster.ProxiedBootstrap] through the proxies), admin helpers
//     ([Cluster.CreateTopic], [Cluster.Leader], [Cluster.MoveLeader]), link
//     faults ([Cluster.SetDelay], [Cluster.CutAll], [Cluster.Proxy], whose
//     DropRequests and DropResponses lose chosen requests or answers), node
//     faults ([Cluster.StopNode], [Cluster.RestartNode]) and the Java
//     client's perf tool ([Cluster.RunJavaPerf], [ParsePerfSummary]).
//   - [Cluster.Consume], [Cluster.EndOffsets] and the checkers
//     [CheckExactlyOnceInOrder] (every record acknowledged) and
//     [CheckDelivered] (with per-record [Outcome]s, so records a producer
//     reported as failed with unknown fate may be absent or present once)
//     read a topic back with an independent kgo consumer and compare (by
//     package logcheck's rules).
//   - [Dial] and [Conn] speak raw Kafka at an exact version, for probes that
//     a client library would negotiate away (ApiVersions, Produce v14).
//   - [EnsureJars] is what Start and scripts/install-kafka-deps.sh use to
//     fill the cache.
//   - [Options.Agent] starts chosen nodes with the KIP-1269 Java agent
//     (kip1269agent/README.md), which [EnsureAgent] builds with javac into
//     the cache; [Cluster.SetAgent] switches a stopped node for its
//     restart (a rolling upgrade step). cmd/kip1269agent builds it for use
//     outside the harness.
//   - [Options.Release] picks another Kafka release ([Releases]: 2.4 and
//     2.8 in ZooKeeper mode with a ZooKeeper process, 3.9 and 4.x in
//     KRaft), each with its own jar cache ([Release.CacheDir]).
//
// # Listeners
//
// Each broker has a DIRECT listener (also the inter-broker one)
// and a PROXIED listener whose advertised address is its proxy (or
// [Options.Advertise]). A client bootstrapped on one listener only ever
// learns addresses of that listener, so proxied and direct clients can use
// the same cluster at once.
//
// # Environment
//
// LONGHAUL_KAFKA_CACHE overrides the jar cache directory
// (default $HOME/.cache/longhaul/kafka-4.4.0); LONGHAUL_REQUIRE_KAFKA=1
// turns skips into failures.
//
// # Concurrency
//
// A [Cluster] is safe for concurrent use by the goroutines of
// one test; methods taking a testing.TB must be called from goroutines that
// may call t.Fatal (the test goroutine), as with testing.T itself.
package kafkatest
