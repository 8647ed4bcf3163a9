package kafkatest

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"golang.org/x/sync/errgroup"

	"github.com/longhaul-kafka/longhaul/internal/linkproxy"
)

// startTimeout bounds formatting plus startup of all nodes, once the jars
// are cached. One node takes 4-20 s and three nodes 20-40 s on a shared
// 2-core machine; under heavy load from other test binaries three nodes
// once took over 2 minutes.
const startTimeout = 5 * time.Minute

// jarTimeout bounds the first Maven resolution.
const jarTimeout = 10 * time.Minute

// Options configures [Start]. The zero value is a single node with the
// harness defaults and built-in proxies.
type Options struct {
	// Nodes is the number of JVMs, each broker and controller, all voters
	// of one KRaft quorum. 0 means 1; at most 5. Three nodes use about
	// 3x(Heap + ~250 MiB) of memory.
	Nodes int
	// BrokerConfig is added to every node's server.properties after the
	// harness defaults, overriding them (for example
	// "producer.id.expiration.ms").
	BrokerConfig map[string]string
	// NodeConfig, if set, returns node i's own server.properties entries
	// (for example "broker.rack"), added after BrokerConfig.
	NodeConfig func(node int) map[string]string
	// Advertise, if set, returns the advertised host:port of node i's
	// PROXIED listener, for a proxy the test runs itself in front of
	// [Cluster.ProxiedListener](i). The built-in proxies are then not
	// created and [Cluster.Proxy] returns nil. To avoid port races, listen
	// first and hand the listener to the proxy after Start:
	//
	//	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	//	c := kafkatest.Start(t, kafkatest.Options{Advertise: func(int) string { return ln.Addr().String() }})
	//	p := linkproxy.Serve(ln, c.ProxiedListener(0))
	Advertise func(node int) string
	// HeapMB is each broker's JVM heap (-Xms and -Xmx) in MiB; default 512.
	HeapMB int
	// Listeners are extra listeners on every node (TLS, SASL); see
	// [Listener] and [Cluster.ListenerBootstrap].
	Listeners []Listener
	// Agent, if set, reports whether node i runs with the KIP-1269 agent
	// (kip1269agent/README.md): a per-topic window
	// producer.state.batches.to.retain, Produce v14 and the window in tag
	// 1 of its responses. nil means no node does; [AgentOnAll] means all
	// do. Start (and [Cluster.RestartNode]) fails the test unless each
	// agent node logged every class of [AgentPatchedClasses] as patched
	// and each other node logged nothing of the agent.
	Agent func(node int) bool
	// AgentArgs are the agent's arguments: "" or "tag=always" (write tag
	// 1 also when the window is 5).
	AgentArgs string
	// JVMFlags are added to every node's JVM flags, for example
	// [KDC.JVMFlag] for a GSSAPI listener.
	JVMFlags []string
	// Classpath entries (jars or class directories) are appended to every
	// node's classpath, after Kafka's, for example a class a broker
	// config names (create.topic.policy.class.name).
	Classpath []string
	// Features are finalized feature levels to format the storage with
	// (KRaft releases 3.9+: StorageTool's --feature name=level, KIP-1022),
	// for example {"transaction.version": 1}; nil formats at the
	// release's defaults.
	Features map[string]int
	// Release is the Kafka release to run; the zero value is [Version].
	// A ZooKeeper-mode release also gets a ZooKeeper process (see
	// [Release]).
	Release Release
}

// AgentOnAll is an [Options.Agent] that runs the agent on every node.
func AgentOnAll(int) bool { return true }

// Cluster is a running Kafka cluster started by [Start]. Node i has broker
// and controller id i. It is stopped by t.Cleanup; [Cluster.Stop] stops it
// earlier. Methods are safe for concurrent use.
type Cluster struct {
	nodes     []*node
	dir       string
	classpath string
	clusterID string
	toolLog   string
	agentJar  string // "" when no node runs the agent
	agentArgs string
	stopOnce  sync.Once
	rel       Release
	zkAddr    string     // ZooKeeper mode only
	zk        *zooKeeper // ZooKeeper mode only, once started
}

// nodeOverrides is Options.BrokerConfig with node i's NodeConfig over it.
func nodeOverrides(o Options, i int) map[string]string {
	if o.NodeConfig == nil {
		return o.BrokerConfig
	}
	return MergeConfig(o.BrokerConfig, o.NodeConfig(i))
}

// required reports whether missing tools must fail rather than skip.
func required() bool { return os.Getenv("LONGHAUL_REQUIRE_KAFKA") == "1" }

// Start provisions and starts a Kafka cluster for the test, waiting until
// every broker answers ApiVersions and all are registered with the quorum.
// Everything is stopped and deleted in t.Cleanup; when the test failed, the
// tail of each broker's log is logged first.
//
// Without java or mvn on PATH it skips the test (message: install Java 17+
// and Maven, or run scripts/install-kafka-deps.sh), except with
// LONGHAUL_REQUIRE_KAFKA=1, where it fails. Any other start failure fails
// the test. A port lost to another process between picking and binding is
// retried with new ports, twice.
func Start(t testing.TB, o Options) *Cluster {
	t.Helper()
	if o.Nodes == 0 {
		o.Nodes = 1
	}
	if o.Nodes < 1 || o.Nodes > 5 {
		t.Fatalf("kafkatest: Options.Nodes = %d, want 1..5", o.Nodes)
	}
	if o.HeapMB == 0 {
		o.HeapMB = 512
	}
	ctx, cancel := context.WithTimeout(context.Background(), jarTimeout)
	libs, err := o.Release.EnsureJars(ctx, t.Logf)
	cancel()
	if err != nil {
		if errors.Is(err, ErrMissingTools) && !required() {
			t.Skipf("%v (LONGHAUL_REQUIRE_KAFKA=1 makes this a failure)", err)
		}
		t.Fatalf("kafkatest: %v", err)
	}
	classpath := strings.Join(append([]string{filepath.Join(libs, "*")}, o.Classpath...), string(os.PathListSeparator))
	agentJar := ""
	for i := range o.Nodes {
		if o.Agent != nil && o.Agent(i) {
			ctx, cancel := context.WithTimeout(context.Background(), jarTimeout)
			agentJar, err = EnsureAgent(ctx, CacheDir(), t.Logf)
			cancel()
			if err != nil {
				if errors.Is(err, ErrMissingTools) && !required() {
					t.Skipf("%v (LONGHAUL_REQUIRE_KAFKA=1 makes this a failure)", err)
				}
				t.Fatalf("kafkatest: %v", err)
			}
			break
		}
	}
	for attempt := 1; ; attempt++ {
		began := time.Now()
		c, err := start(t, o, classpath, agentJar)
		if err == nil {
			t.Logf("kafkatest: %d-node %v up in %v, bootstrap %s%s", o.Nodes, o.Release, time.Since(began).Round(time.Millisecond), c.Bootstrap(), c.agentSummary())
			return c
		}
		if errors.Is(err, errPortTaken) && attempt < 3 {
			t.Logf("kafkatest: %v; retrying with new ports", err)
			continue
		}
		t.Fatalf("kafkatest: start: %v", err)
	}
}

func start(t testing.TB, o Options, classpath, agentJar string) (*Cluster, error) {
	c := &Cluster{dir: t.TempDir(), classpath: classpath, agentJar: agentJar, agentArgs: o.AgentArgs, rel: o.Release}
	// Registered first, so every exit path stops what was started (JVMs
	// and proxies); c.nodes is read when the cleanup runs.
	t.Cleanup(func() {
		if t.Failed() {
			for _, n := range c.nodes {
				t.Logf("%s", n.logTail(40))
			}
			if c.zk != nil {
				t.Logf("%s", c.zk.logTail(20))
			}
		}
		began := time.Now()
		c.Stop()
		t.Logf("kafkatest: stopped %d node(s) in %v", len(c.nodes), time.Since(began).Round(time.Millisecond))
	})
	var err error
	if c.clusterID, err = newClusterID(); err != nil {
		return nil, err
	}
	c.toolLog = filepath.Join(c.dir, "tools-log4j2.properties")
	if err := os.WriteFile(c.toolLog, []byte(toolLog4j2Properties), 0o644); err != nil {
		return nil, err
	}

	// Reserve every port by listening on it, so no two of ours collide;
	// they are released just before the JVMs bind them. Proxy listeners
	// are kept and handed to the proxies.
	var reserved []net.Listener
	release := func() {
		for _, l := range reserved {
			l.Close()
		}
		reserved = nil
	}
	defer release()
	reserve := func() (string, error) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return "", err
		}
		reserved = append(reserved, l)
		return l.Addr().String(), nil
	}
	for i := range o.Nodes {
		n := &node{id: int32(i), dir: filepath.Join(c.dir, fmt.Sprintf("node%d", i))}
		for _, a := range []*string{&n.directAddr, &n.proxiedListen, &n.controllerAddr} {
			if *a, err = reserve(); err != nil {
				return nil, err
			}
		}
		if err := n.reserveListeners(o.Listeners, reserve); err != nil {
			return nil, err
		}
		if o.Advertise != nil {
			n.advertised = o.Advertise(i)
		} else {
			pl, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				return nil, err
			}
			n.proxy = linkproxy.Serve(pl, n.proxiedListen)
			n.advertised = n.proxy.Addr()
		}
		c.nodes = append(c.nodes, n)
	}
	if !c.rel.KRaft() {
		if c.zkAddr, err = reserve(); err != nil {
			return nil, err
		}
	}

	for _, n := range c.nodes {
		if err := os.MkdirAll(n.dataDir(), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(n.propsPath(), []byte(serverProperties(c, n, nodeOverrides(o, int(n.id)))), 0o644); err != nil {
			return nil, err
		}
		log4j := filepath.Join(n.dir, "log4j2.properties")
		if err := os.WriteFile(log4j, []byte(log4j2Properties(n.logPath())), 0o644); err != nil {
			return nil, err
		}
		n.jvmArgs = append(append(brokerJVMArgs(o.HeapMB, classpath, n.dir, log4j), c.rel.JVMFlags...), o.JVMFlags...)
		if o.Agent != nil && o.Agent(int(n.id)) {
			n.agent = true
			n.jvmArgs = append([]string{AgentFlag(agentJar, o.AgentArgs)}, n.jvmArgs...)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	phase := time.Now()
	var g errgroup.Group
	for _, n := range c.nodes {
		if !c.rel.KRaft() {
			break // ZooKeeper mode has no storage to format
		}
		g.Go(func() error { return n.format(ctx, classpath, c.clusterID, c.toolLog, o.Features) })
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	formatTook := time.Since(phase)
	phase = time.Now()
	release()
	if err := c.startZooKeeper(ctx, c.rel.JVMFlags); err != nil {
		c.Stop()
		return nil, err
	}
	for _, n := range c.nodes {
		if err := n.start(); err != nil {
			c.Stop()
			return nil, err
		}
	}
	g = errgroup.Group{}
	for _, n := range c.nodes {
		g.Go(func() error { return n.waitReady(ctx) })
	}
	if err := g.Wait(); err != nil {
		c.Stop()
		return nil, err
	}
	answerTook := time.Since(phase)
	for _, n := range c.nodes {
		if err := n.checkAgent(); err != nil {
			c.Stop()
			return nil, err
		}
	}
	phase = time.Now()
	if err := c.waitRegistered(ctx, nil); err != nil {
		c.Stop()
		return nil, err
	}
	t.Logf("kafkatest: format %v, JVM start to ApiVersions %v, registration %v",
		formatTook.Round(time.Millisecond), answerTook.Round(time.Millisecond), time.Since(phase).Round(time.Millisecond))
	return c, nil
}

// waitRegistered waits until every running node's metadata lists all
// running brokers (those not in down), so that topics can be created with
// any replication factor up to the node count.
func (c *Cluster) waitRegistered(ctx context.Context, down map[int32]bool) error {
	want := len(c.nodes) - len(down)
	for _, n := range c.nodes {
		if down[n.id] {
			continue
		}
		var last string
		for {
			got, err := brokerCount(ctx, n.directAddr)
			if err == nil && got == want {
				break
			}
			last = fmt.Sprintf("%d brokers, err %v", got, err)
			select {
			case <-ctx.Done():
				return fmt.Errorf("kafkatest: node %d never saw %d brokers (last: %s)\n%s", n.id, want, last, n.logTail(30))
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	return nil
}

func brokerCount(ctx context.Context, addr string) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = []kmsg.MetadataRequestTopic{} // none: brokers only
	resp, err := requestNode(ctx, addr, req)   // each release's version
	if err != nil {
		return 0, err
	}
	return len(resp.(*kmsg.MetadataResponse).Brokers), nil
}

// newClusterID returns a random KRaft cluster id: 16 bytes, URL-safe
// base64 without padding, not starting with '-' (the storage tool would
// read it as a flag).
func newClusterID() (string, error) {
	for {
		var b [16]byte
		if _, err := rand.Read(b[:]); err != nil {
			return "", err
		}
		id := base64.RawURLEncoding.EncodeToString(b[:])
		if !strings.HasPrefix(id, "-") {
			return id, nil
		}
	}
}

// Stop stops every JVM (SIGTERM, then SIGKILL after a grace period) and
// closes the proxies. It is idempotent and also runs in t.Cleanup; the data
// directory is removed by the test's TempDir cleanup.
func (c *Cluster) Stop() {
	c.stopOnce.Do(func() {
		var wg sync.WaitGroup
		for _, n := range c.nodes {
			wg.Add(1)
			go func() { defer wg.Done(); n.stop(finalStopGrace) }()
		}
		wg.Wait()
		c.stopZooKeeper()
		for _, n := range c.nodes {
			if n.proxy != nil {
				n.proxy.Close()
			}
		}
	})
}

// AgentJar returns the KIP-1269 agent jar the agent nodes run with, or ""
// when none does.
func (c *Cluster) AgentJar() string { return c.agentJar }

// AgentNode reports whether node i runs with the KIP-1269 agent.
func (c *Cluster) AgentNode(i int) bool {
	n := c.nodes[i]
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.agent
}

// SetAgent sets whether stopped node i runs with the KIP-1269 agent from
// its next [Cluster.RestartNode] on: the step of a rolling upgrade. The
// cluster must have been started with the agent on some node (so its jar
// is built), and node i must be stopped; otherwise the test fails.
func (c *Cluster) SetAgent(t testing.TB, i int, on bool) {
	t.Helper()
	n := c.nodes[i]
	select {
	case <-n.exitedCh():
	default:
		t.Fatalf("kafkatest: SetAgent(%d): node is running; stop it first", i)
	}
	if on && c.agentJar == "" {
		t.Fatalf("kafkatest: SetAgent(%d): no agent jar; start the cluster with Options.Agent on some node", i)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	args := slices.DeleteFunc(slices.Clone(n.jvmArgs), func(a string) bool { return strings.HasPrefix(a, "-javaagent:") })
	if on {
		args = append([]string{AgentFlag(c.agentJar, c.agentArgs)}, args...)
	}
	n.jvmArgs, n.agent = args, on
}

func (c *Cluster) agentSummary() string {
	var with []int32
	for _, n := range c.nodes {
		if c.AgentNode(int(n.id)) {
			with = append(with, n.id)
		}
	}
	if len(with) == 0 {
		return ""
	}
	return fmt.Sprintf(", KIP-1269 agent on nodes %v (all %d classes patched)", with, len(AgentPatchedClasses))
}

// Nodes returns the number of nodes; node i has id i.
func (c *Cluster) Nodes() int { return len(c.nodes) }

// Bootstrap returns the DIRECT listeners of all nodes, comma-separated
// (the form of bootstrap.servers). Clients bootstrapped here talk to the
// brokers without a proxy.
func (c *Cluster) Bootstrap() string {
	return c.joinAddrs(func(n *node) string { return n.directAddr })
}

// ProxiedBootstrap returns the advertised PROXIED addresses of all nodes,
// comma-separated. Clients bootstrapped here reach every broker through
// its proxy, including after metadata refreshes.
func (c *Cluster) ProxiedBootstrap() string {
	return c.joinAddrs(func(n *node) string { return n.advertised })
}

func (c *Cluster) joinAddrs(f func(*node) string) string {
	s := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		s[i] = f(n)
	}
	return strings.Join(s, ",")
}

// DirectAddr returns node i's DIRECT listener address.
func (c *Cluster) DirectAddr(i int) string { return c.nodes[i].directAddr }

// ProxiedAddr returns node i's advertised PROXIED address: its proxy, or
// what [Options.Advertise] returned.
func (c *Cluster) ProxiedAddr(i int) string { return c.nodes[i].advertised }

// ProxiedListener returns the real address of node i's PROXIED listener,
// the target for a proxy run by the test with [Options.Advertise].
func (c *Cluster) ProxiedListener(i int) string { return c.nodes[i].proxiedListen }

// Proxy returns the built-in proxy in front of node i, or nil when
// [Options.Advertise] was set. It is closed by [Cluster.Stop].
func (c *Cluster) Proxy(i int) *linkproxy.Proxy { return c.nodes[i].proxy }

// SetDelay sets the one-way delay of every built-in proxy (round trip
// 2*oneWay); see [linkproxy.Proxy.SetDelay].
func (c *Cluster) SetDelay(oneWay time.Duration) {
	for _, n := range c.nodes {
		if n.proxy != nil {
			n.proxy.SetDelay(oneWay)
		}
	}
}

// CutAll closes every connection through every built-in proxy and returns
// how many were cut.
func (c *Cluster) CutAll() int {
	total := 0
	for _, n := range c.nodes {
		if n.proxy != nil {
			total += n.proxy.CutAll()
		}
	}
	return total
}

// Classpath returns the Java classpath holding Kafka, its tools and the
// log4j binding (a directory wildcard, as java -cp accepts), then
// [Options.Classpath].
func (c *Cluster) Classpath() string { return c.classpath }

// ClusterID returns the KRaft cluster id the storage was formatted with.
func (c *Cluster) ClusterID() string { return c.clusterID }

// Release returns the Kafka release the cluster runs.
func (c *Cluster) Release() Release { return c.rel }

// LogFile returns the path of node i's broker log (log4j2, INFO).
func (c *Cluster) LogFile(i int) string { return c.nodes[i].logPath() }

// StopNode stops node i (SIGTERM, SIGKILL after a grace period) and waits
// for it to exit, leaving its data and ports for [Cluster.RestartNode]. The
// built-in proxy stays up; its connections to the node break.
func (c *Cluster) StopNode(i int) { c.nodes[i].stop(stopGrace) }

// KillNode kills node i at once (SIGKILL), like a crash.
func (c *Cluster) KillNode(i int) { c.nodes[i].stop(0) }

// PauseNode freezes node i (SIGSTOP, unix only), as a long GC pause or a
// hung machine: its connections stay open and nothing is answered until
// [Cluster.ResumeNode]. It fails the test on error.
func (c *Cluster) PauseNode(t testing.TB, i int) {
	t.Helper()
	if err := c.nodes[i].signal(pause); err != nil {
		t.Fatalf("kafkatest: pause node %d: %v", i, err)
	}
}

// ResumeNode continues node i after [Cluster.PauseNode] (SIGCONT). It
// fails the test on error.
func (c *Cluster) ResumeNode(t testing.TB, i int) {
	t.Helper()
	if err := c.nodes[i].signal(resume); err != nil {
		t.Fatalf("kafkatest: resume node %d: %v", i, err)
	}
}

// RestartNode starts a stopped node i again with the same id, ports and
// data, and waits until it answers and every running node lists it. It
// fails the test on error.
func (c *Cluster) RestartNode(t testing.TB, i int) {
	t.Helper()
	n := c.nodes[i]
	if err := n.start(); err != nil {
		t.Fatalf("kafkatest: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	if err := n.waitReady(ctx); err != nil {
		t.Fatalf("kafkatest: restart node %d: %v", i, err)
	}
	if err := n.checkAgent(); err != nil {
		t.Fatalf("kafkatest: restart node %d: %v", i, err)
	}
	down := map[int32]bool{}
	for _, o := range c.nodes {
		select {
		case <-o.exitedCh():
			down[o.id] = true
		default:
		}
	}
	if err := c.waitRegistered(ctx, down); err != nil {
		t.Fatalf("kafkatest: restart node %d: %v", i, err)
	}
}
