package broker

import (
	"fmt"
	"net"
	"time"
)

// CreateTopic creates a topic, leaders spread round-robin over the nodes.
// It returns a *ConfigError for an invalid t, [ErrTopicExists] if the name
// is taken, [ErrClosed] after Close; on error nothing changes.
func (c *Cluster) CreateTopic(t TopicConfig) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrClosed
	}
	_, err := c.createTopic(t)
	return err
}

// Leader returns the leader node and leader epoch of a partition, or
// (-1, -1) if it does not exist.
func (c *Cluster) Leader(topic string, partition int32) (node int32, epoch int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.partition(topic, partition)
	if p == nil {
		return -1, -1
	}
	return p.leader, p.epoch
}

// MoveLeader makes node the partition's leader and increments its leader
// epoch (also when node already leads it). From then on the old leader
// answers produce requests for it with NOT_LEADER_OR_FOLLOWER (carrying the
// KIP-951 CurrentLeader at v10+). The log and producer state stay with the
// partition, as if replicated. On error nothing changes.
func (c *Cluster) MoveLeader(topic string, partition int32, node int32) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.partition(topic, partition)
	if p == nil {
		return fmt.Errorf("%w: %s[%d]", ErrUnknownTopic, topic, partition)
	}
	if _, err := c.node(node); err != nil {
		return err
	}
	p.leader = node
	p.epoch++
	return nil
}

// RestartNode drops every connection of node and its listener, then
// listens again on the same address. Logs and producer state are kept.
// Responses not yet written on the dropped connections are lost (appends
// that happened stay). On a listen error the node stays down and the error
// is returned.
func (c *Cluster) RestartNode(node int32) error {
	c.mu.Lock()
	n, err := c.node(node)
	if err != nil || c.closed {
		c.mu.Unlock()
		if err == nil {
			err = ErrClosed
		}
		return err
	}
	ln := n.ln
	n.ln = nil
	conns := n.connList()
	c.mu.Unlock()

	if ln != nil {
		ln.Close()
	}
	for _, cc := range conns {
		cc.close()
	}

	nl, err := c.listenRetry(n.addr)
	if err != nil {
		return fmt.Errorf("broker: restart node %d: %w", node, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		nl.Close()
		return ErrClosed
	}
	n.ln = nl
	c.serve(n, nl)
	return nil
}

// listenRetry listens on addr, retrying briefly: the port was just freed.
func (c *Cluster) listenRetry(addr string) (net.Listener, error) {
	var err error
	for range 50 {
		var ln net.Listener
		if ln, err = c.cfg.Listen("tcp", addr); err == nil {
			return ln, nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return nil, err
}

// connList returns n's connections. c.mu must be held.
func (n *node) connList() []*conn {
	out := make([]*conn, 0, len(n.conns))
	for cc := range n.conns {
		out = append(out, cc)
	}
	return out
}

// SetWindow sets a topic's producer.state.batches.to.retain at runtime.
// Shrinking it drops the oldest retained batches of every producer at
// once. A value below 5 returns a *ConfigError (INVALID_CONFIG) and changes
// nothing; an unknown topic returns [ErrUnknownTopic].
func (c *Cluster) SetWindow(topic string, n int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.setWindow(topic, n)
}

// setWindow is SetWindow with c.mu held; n 0 restores the server default.
func (c *Cluster) setWindow(topic string, n int) error {
	t := c.topics[topic]
	if t == nil {
		return fmt.Errorf("%w: %s", ErrUnknownTopic, topic)
	}
	if n != 0 {
		if err := checkWindow(propWindow, n); err != nil {
			return err
		}
	}
	t.window = n
	c.trimTopic(t)
	return nil
}

// trimTopic trims every producer's retained batches on t to its window.
// c.mu must be held.
func (c *Cluster) trimTopic(t *topic) {
	w := c.windowOf(t)
	for _, p := range t.parts {
		for _, s := range p.pids {
			s.trim(w)
		}
	}
}

// Window returns the topic's producer.state.batches.to.retain (the server
// default if the topic has none), or 0 for an unknown topic.
func (c *Cluster) Window(topic string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.topics[topic]
	if t == nil {
		return 0
	}
	return c.windowOf(t)
}

// ExpireProducerIDs drops all producer state on every partition now, as if
// producer.id.expiration.ms had passed for every id (KIP-854): the next
// batch of any producer is accepted at any sequence. Producer ids and
// epochs handed out by InitProducerId stay valid.
func (c *Cluster) ExpireProducerIDs() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, t := range c.topics {
		for _, p := range t.parts {
			clear(p.pids)
		}
	}
}

// ExpireIdleProducerIDs drops the state of every producer id whose last
// write to a partition is older than idle, as a broker does after
// producer.id.expiration.ms (KIP-854): the next write of that id to that
// partition is treated as having no state. Unlike [Cluster.ExpireProducerIDs]
// it never drops the state of a producer that wrote recently, so a producer
// retrying a batch (within its delivery.timeout.ms, below the expiration)
// still finds it.
func (c *Cluster) ExpireIdleProducerIDs(idle time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cutoff := time.Now().Add(-idle)
	for _, t := range c.topics {
		for _, p := range t.parts {
			for id, s := range p.pids {
				if s.lastWrite.Before(cutoff) {
					delete(p.pids, id)
				}
			}
		}
	}
}

// SetOld switches a node into or out of old-broker mode. The change
// applies to ApiVersions answered from now on (so to new connections in
// practice), and at once to Produce: an old node answers Produce v14 with
// UNSUPPORTED_VERSION, never sends ProducerStateBatchesToRetain and
// retains 5 batches. Unknown nodes are ignored.
func (c *Cluster) SetOld(node int32, old bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n, err := c.node(node); err == nil {
		n.old = old
	}
}

// SetKafka24 switches a node into or out of Kafka 2.4 mode: its
// ApiVersions offers InitProducerId up to v2 (no KIP-360 bump of an
// existing producer id, so a client must ask for a new id), Produce up to
// v8 and the transaction and group requests at their 2.4 versions, with no
// transaction.version feature, and it retains 5 batches like an old-mode
// node. A request above those
// versions closes the connection, as Kafka does. The ApiVersions change
// applies to connections made from now on in practice; the window at
// once. Unknown nodes are ignored.
func (c *Cluster) SetKafka24(node int32, on bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n, err := c.node(node); err == nil {
		n.kafka24 = on
	}
}

// SetRTT sets a node's emulated round trip for requests read from now on.
// Unknown nodes and negative values are ignored.
func (c *Cluster) SetRTT(node int32, rtt time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n, err := c.node(node); err == nil && rtt >= 0 {
		n.rtt = rtt
	}
}

// DeleteTopic deletes a topic as DeleteTopics does: its partitions, logs
// and producer state are gone at once, Produce naming its id answers
// UNKNOWN_TOPIC_ID, and a topic created again under the name gets a new
// id. It returns the records each partition held at deletion, indexed by
// partition, so a test can tell what was lost with the topic. An unknown
// topic returns [ErrUnknownTopic]; after Close, [ErrClosed].
func (c *Cluster) DeleteTopic(topic string) ([][]LogRecord, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClosed
	}
	t := c.topics[topic]
	if t == nil {
		return nil, fmt.Errorf("%w: %s", ErrUnknownTopic, topic)
	}
	logs := make([][]LogRecord, len(t.parts))
	for i, p := range t.parts {
		logs[i] = p.logRecords()
	}
	c.deleteTopic(t)
	return logs, nil
}

// CreatePartitions grows a topic to count partitions as CreatePartitions
// does, the new partitions' leaders continuing the round-robin. A count
// not above the current one or beyond [MaxPartitions] returns a
// *ConfigError, an unknown topic [ErrUnknownTopic]; on error nothing
// changes.
func (c *Cluster) CreatePartitions(topic string, count int32) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrClosed
	}
	t := c.topics[topic]
	if t == nil {
		return fmt.Errorf("%w: %s", ErrUnknownTopic, topic)
	}
	if err := c.checkGrow(t, count); err != nil {
		return &ConfigError{"Partitions", fmt.Sprint(count), err.Error()}
	}
	c.growTopic(t, count)
	return nil
}

// TopicID returns a topic's id (KIP-516) and whether the topic exists.
func (c *Cluster) TopicID(topic string) ([16]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t := c.topics[topic]; t != nil {
		return t.id, true
	}
	return uuid{}, false
}

// Partitions returns a topic's partition count, 0 for an unknown topic.
func (c *Cluster) Partitions(topic string) int32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t := c.topics[topic]; t != nil {
		return int32(len(t.parts))
	}
	return 0
}
