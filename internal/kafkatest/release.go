package kafkatest

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
)

// Release is an Apache Kafka release the harness can run (see
// [Options.Release]) and what differs between releases: the metadata mode
// (KRaft, or ZooKeeper with the ZooKeeper version the release depends on),
// the jars, and extra JVM flags. The zero value is the default release,
// [Version].
type Release struct {
	// Version is kafka_2.13's version on Maven Central, e.g. "2.4.1".
	// Empty means [Version].
	Version string
	// ZooKeeper is the org.apache.zookeeper:zookeeper version of a release
	// run in ZooKeeper mode (the one its kafka_2.13 depends on); empty for
	// KRaft. The harness starts one ZooKeeper process per cluster from that
	// artifact.
	ZooKeeper string
	// JVMFlags are appended to every JVM flag list of the release (brokers
	// and ZooKeeper).
	JVMFlags []string
}

// The releases of the compatibility matrix. Kafka 2.4 is the last release
// before KIP-360 (InitProducerId v3, Kafka 2.5): an epoch bump there means
// a new producer id. 2.8 is the last 2.x. 3.9 is the last with ZooKeeper,
// run in KRaft mode here. 4.0 is the first without ZooKeeper, and 4.4 the
// harness default. All of them start on Java 17 with the harness's default
// JVM flags.
var (
	Kafka24 = Release{Version: "2.4.1", ZooKeeper: "3.5.7"}
	Kafka28 = Release{Version: "2.8.2", ZooKeeper: "3.5.9"}
	Kafka39 = Release{Version: "3.9.1"}
	Kafka40 = Release{Version: "4.0.1"}
	Kafka44 = Release{Version: Version}
)

// Releases returns the compatibility matrix, oldest first.
func Releases() []Release { return []Release{Kafka24, Kafka28, Kafka39, Kafka40, Kafka44} }

// ReleaseByVersion returns the matrix release with version v.
func ReleaseByVersion(v string) (Release, bool) {
	for _, r := range Releases() {
		if r.Version == v {
			return r, true
		}
	}
	return Release{}, false
}

// version returns the release's version, [Version] for the zero value.
func (r Release) version() string {
	if r.Version == "" {
		return Version
	}
	return r.Version
}

// String returns "Kafka <version>" and the mode.
func (r Release) String() string {
	if r.KRaft() {
		return "Kafka " + r.version() + " (KRaft)"
	}
	return "Kafka " + r.version() + " (ZooKeeper " + r.ZooKeeper + ")"
}

// KRaft reports whether the release runs without ZooKeeper.
func (r Release) KRaft() bool { return r.ZooKeeper == "" }

// isDefault reports whether r is [Version], whose jars, cache and pom are
// [EnsureJars], [CacheDir] and [Pom] (with the perf tool).
func (r Release) isDefault() bool { return r.version() == Version }

// log4j12Bridge routes the log4j 1.2 API, which brokers before 4.0 call
// directly (their log4j controller MBean), into log4j2, so that one
// log4j2 configuration serves every release.
var log4j12Bridge = [3]string{"org.apache.logging.log4j", "log4j-1.2-api", log4jVersion}

// Artifacts returns the Maven coordinates (group, artifact, version) the
// release's pom depends on: the broker, the client, and the log4j2 binding
// (plus the log4j 1.2 bridge before 4.0). The default release's are those
// of [Pom]. ZooKeeper is not listed: it comes with kafka_2.13, whose pom
// excludes ZooKeeper's log4j 1 and slf4j-log4j12 (listed directly, they
// would take the slf4j binding and lose the broker log); [Release.EnsureJars]
// checks that its jar arrived.
func (r Release) Artifacts() [][3]string {
	if r.isDefault() {
		return slices.Clone(pomArtifacts)
	}
	a := [][3]string{
		{"org.apache.kafka", "kafka_2.13", r.Version},
		{"org.apache.kafka", "kafka-clients", r.Version},
	}
	a = append(a,
		[3]string{"org.apache.logging.log4j", "log4j-api", log4jVersion},
		[3]string{"org.apache.logging.log4j", "log4j-core", log4jVersion},
		[3]string{"org.apache.logging.log4j", "log4j-slf4j-impl", log4jVersion},
	)
	if major(r.Version) < 4 {
		a = append(a, log4j12Bridge)
	}
	return a
}

// CacheDir returns the release's jar cache: [CacheDir] for the default
// release, else the subdirectory releases/<version> of it, so that
// LONGHAUL_KAFKA_CACHE moves every release's cache.
func (r Release) CacheDir() string {
	if r.isDefault() {
		return CacheDir()
	}
	return filepath.Join(CacheDir(), "releases", r.Version)
}

// EnsureJars is [EnsureJars] for the release, in [Release.CacheDir].
func (r Release) EnsureJars(ctx context.Context, logf func(format string, args ...any)) (string, error) {
	if r.isDefault() {
		return EnsureJars(ctx, CacheDir(), logf)
	}
	a := r.Artifacts()
	want := a
	if !r.KRaft() {
		want = append(slices.Clone(a), [3]string{"org.apache.zookeeper", "zookeeper", r.ZooKeeper})
	}
	return ensurePom(ctx, r.CacheDir(), pomFor(a), want, r.Version, logf)
}

// major returns the major version of "M.m.p", or 0.
func major(v string) int {
	var m int
	fmt.Sscanf(v, "%d.", &m)
	return m
}

// brokerProperties turns the harness's KRaft server.properties p of node n
// into the release's: in ZooKeeper mode, broker.id and zookeeper.connect
// replace the KRaft roles, quorum and CONTROLLER listener.
func (r Release) brokerProperties(p map[string]string, n *node, zkConnect string) {
	if r.KRaft() {
		return
	}
	for _, k := range []string{"process.roles", "node.id", "controller.quorum.voters", "controller.listener.names"} {
		delete(p, k)
	}
	for k := range p {
		if strings.HasPrefix(k, "share.coordinator.") {
			delete(p, k) // no share groups before 4.0
		}
	}
	p["broker.id"] = fmt.Sprint(n.id)
	p["zookeeper.connect"] = zkConnect
	p["listeners"] = fmt.Sprintf("%s://%s,%s://%s", listenerDirect, n.directAddr, listenerProxied, n.proxiedListen)
	p["listener.security.protocol.map"] = fmt.Sprintf("%s:PLAINTEXT,%s:PLAINTEXT", listenerDirect, listenerProxied)
}
