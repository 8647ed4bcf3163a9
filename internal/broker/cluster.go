package broker

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Cluster is a running embedded Kafka cluster. Create it with [Start] and
// stop it with [Cluster.Close]. All methods are safe for concurrent use.
type Cluster struct {
	cfg    Config
	logger *slog.Logger
	die    chan struct{} // closed by Close
	wg     sync.WaitGroup

	mu sync.Mutex
	// mu guards the following, the nodes' mutable fields and all topic
	// and partition data.
	closed          bool
	nodes           []*node
	topics          map[string]*topic
	topicIDs        map[uuid]*topic
	partitions      int // across all topics, bounded by MaxClusterPartitions
	defaultWindow   int
	expiration      time.Duration
	nextPID         int64
	pidEpochs       map[int64]int16                                  // producer id -> latest epoch handed out
	dataCh          chan struct{}                                    // closed by the next append, nil when no Fetch waits (dataWait)
	metaRewrite     func(*kmsg.MetadataResponse)                     // RewriteMetadata
	fetchRewrite    func(node int32, resp *kmsg.FetchResponse)       // RewriteFetch
	listRewrite     func(node int32, resp *kmsg.ListOffsetsResponse) // RewriteListOffsets
	metaRequests    int64                                            // Metadata requests answered
	initAsks        [2]int64                                         // InitProducerId asking a new id, a bump
	sessionsExpired int64                                            // connections closed for an expired SASL session
	retainTagsOf    map[int]kmsg.Tags                                // window -> shared v14 response tags (retainTags)
	retired         []*node                                          // processes replaced by MoveNode, serving out their grace
	overWindow      int64                                            // batches in flight beyond the announced window (OverWindow)
	overWindowFirst []string                                         // the first few of them, described
	mutedSends      int64                                            // requests sent into a muted connection (MutedSends)
	mutedFirst      []string                                         // the first few of them, described

	// The transaction and group coordinators (txn.go, groups.go).
	txns            map[string]*txnMeta       // transactional id -> coordinator state
	ptxn            map[*partition]*partTxn   // open transactions, aborted index, markers
	groups          map[string]*group         // consumer groups and their offsets
	coordLeaders    [2][coordPartitions]int32 // node leading each __consumer_offsets, __transaction_state partition
	coordEpoch      int32                     // +1 per coordinator move, carried by markers
	coordFaults     []coordFault              // InjectCoordinatorError
	txnVersion      int16                     // finalized transaction.version
	featuresEpoch   int64                     // FinalizedFeaturesEpoch, +1 per change
	markerDelay     time.Duration             // SetMarkerDelay
	markersHeld     bool                      // HoldMarkers
	heldMarkers     []func()                  // marker writes waiting for HoldMarkers(false)
	timers          map[*time.Timer]struct{}  // pending after calls, stopped by Close
	lenientTxnStart bool                      // SetLenientTransactionStart
	deniedTxnIDs    map[string]bool           // DenyTransactionalID
	timedOutCommit  int16                     // SetTimedOutCommitError: 0 is INVALID_TXN_STATE
	txnStats        TxnStats                  // TxnStats
	txnFaults       txnFaults                 // LoseMarkers, FailOverBetweenMarkers

	telemetry telemetryState // client metrics push (71_72_telemetry.go)
}

// node is one broker process serving a node id: a listener and its
// connections. MoveNode replaces a node id's process with a new one at
// another address; the old one may serve its connections a while longer.
type node struct {
	c    *Cluster
	id   int32
	addr string // host:port, fixed by the first listen
	// proc is what a broker process learns and shows its clients: the
	// windows it announced and the batches in flight at it (OverWindow).
	// Shared by the node values of one process (a move without Replace).
	proc *process
	// retire, on a process replaced by MoveNode with a grace, ends it.
	retire *time.Timer

	// c.mu guards the following.
	ln          net.Listener
	conns       map[*conn]struct{}
	old         bool
	kafka24     bool // SetKafka24: InitProducerId <= v2, Produce <= v8
	rtt         time.Duration
	bw          int64
	stallUntil  time.Time
	dropProduce int
	throttle    time.Duration // SetProduceThrottle
	quota       int64         // SetProduceQuota: bytes a second, 0 none
	quotaLevel  float64       // bytes above what the quota has drained, as of quotaAt
	quotaAt     time.Time
	closeAfter  int
	inNext      time.Time // bandwidth pacing, request direction
	outNext     time.Time // bandwidth pacing, response direction
}

// Start starts a cluster: it validates cfg, listens on every node's
// address and creates cfg.Topics. On failure nothing is left running.
func Start(cfg Config) (*Cluster, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	c := &Cluster{
		cfg:           cfg,
		logger:        cfg.Logger,
		die:           make(chan struct{}),
		topics:        make(map[string]*topic),
		topicIDs:      make(map[uuid]*topic),
		defaultWindow: cfg.DefaultWindow,
		expiration:    cfg.ProducerIDExpiration,
		nextPID:       1000,
		pidEpochs:     make(map[int64]int16),
		txns:          make(map[string]*txnMeta),
		ptxn:          make(map[*partition]*partTxn),
		groups:        make(map[string]*group),
		txnVersion:    2,
		featuresEpoch: 1,
		markerDelay:   DefaultMarkerDelay,
		timers:        make(map[*time.Timer]struct{}),
	}
	for i := range cfg.Nodes {
		n := &node{c: c, id: int32(i), conns: make(map[*conn]struct{}), rtt: cfg.RTT, bw: cfg.Bandwidth, proc: newProcess()}
		addr := "127.0.0.1:0"
		if i == 0 {
			addr = cfg.Addr
		}
		ln, err := cfg.Listen("tcp", addr)
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("broker: node %d: listen %s: %w", i, addr, err)
		}
		n.ln, n.addr = ln, ln.Addr().String()
		c.nodes = append(c.nodes, n)
	}
	for i := range coordPartitions {
		c.coordLeaders[0][i] = int32(i % len(c.nodes))
		c.coordLeaders[1][i] = int32(i % len(c.nodes))
	}
	for _, id := range cfg.OldNodes {
		c.nodes[id].old = true
	}
	for _, id := range cfg.Kafka24Nodes {
		c.nodes[id].kafka24 = true
	}
	c.mu.Lock()
	for _, tc := range cfg.Topics {
		if _, err := c.createTopic(tc); err != nil {
			c.mu.Unlock()
			c.Close()
			return nil, fmt.Errorf("broker: topic %q: %w", tc.Name, err)
		}
	}
	for _, n := range c.nodes {
		c.serve(n, n.ln)
	}
	c.mu.Unlock()
	return c, nil
}

// serve runs n's accept loop on ln. c.mu must be held.
func (c *Cluster) serve(n *node, ln net.Listener) {
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		for {
			nc, err := ln.Accept()
			if err != nil {
				return // listener closed by Close or RestartNode
			}
			c.mu.Lock()
			if c.closed || n.ln != ln {
				c.mu.Unlock()
				nc.Close()
				return
			}
			cc := newConn(n, nc)
			n.conns[cc] = struct{}{}
			c.wg.Add(2)
			c.mu.Unlock()
			go cc.readLoop()
			go cc.writeLoop()
		}
	}()
}

// Addr returns the bootstrap address, node 0's host:port (its current
// one, after [Cluster.MoveNode]).
func (c *Cluster) Addr() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodes[0].addr
}

// Addrs returns every node's host:port, indexed by node id.
func (c *Cluster) Addrs() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		out[i] = n.addr
	}
	return out
}

// Close closes every listener and connection and waits for all the
// cluster's goroutines to end. Responses not yet written are lost. It is
// safe to call more than once; later calls return nil.
func (c *Cluster) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	close(c.die)
	c.stopTimers()
	var errs []error
	var conns []*conn
	for _, n := range append(append([]*node(nil), c.nodes...), c.retired...) {
		if n.retire != nil {
			n.retire.Stop()
		}
		if n.ln != nil {
			if err := n.ln.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
				errs = append(errs, err)
			}
		}
		for cc := range n.conns {
			conns = append(conns, cc)
		}
	}
	c.mu.Unlock()
	for _, cc := range conns {
		cc.close()
	}
	c.wg.Wait()
	return errors.Join(errs...)
}

// node returns the node or ErrUnknownNode. c.mu must be held.
func (c *Cluster) node(id int32) (*node, error) {
	if id < 0 || int(id) >= len(c.nodes) {
		return nil, fmt.Errorf("%w: %d (cluster has %d)", ErrUnknownNode, id, len(c.nodes))
	}
	return c.nodes[id], nil
}

// hostPort splits n's address for Metadata.
func (n *node) hostPort() (string, int32) {
	host, port, _ := net.SplitHostPort(n.addr)
	var p int32
	fmt.Sscan(port, &p)
	return host, p
}
