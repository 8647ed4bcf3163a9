package broker

import (
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// The group coordinator: the classic (eager) consumer group protocol of
// JoinGroup, SyncGroup, Heartbeat and LeaveGroup, with the committed
// offsets of OffsetCommit and TxnOffsetCommit. It is what a franz-go or
// Java consumer group needs; KIP-848's ConsumerGroupHeartbeat is not
// served.

// groupState is a consumer group's state (Kafka's GroupState).
type groupState uint8

const (
	groupEmpty               groupState = iota // no members
	groupPreparingRebalance                    // collecting JoinGroup requests
	groupCompletingRebalance                   // joined; waiting for the leader's SyncGroup
	groupStable                                // assignments handed out
)

var groupStateNames = [...]string{"Empty", "PreparingRebalance", "CompletingRebalance", "Stable"}

func (s groupState) String() string {
	if int(s) < len(groupStateNames) {
		return groupStateNames[s]
	}
	return fmt.Sprintf("groupState(%d)", s)
}

// groupInitialDelay is group.initial.rebalance.delay.ms: the first
// rebalance of an empty group waits this long for more members. Kafka's
// default is 3 s; tests want it short.
const groupInitialDelay = 50 * time.Millisecond

// group is one consumer group at its coordinator: committed offsets, the
// offsets transactions committed but not yet settled, and its members.
// c.mu guards it.
type group struct {
	name      string
	committed map[topicPart]offsetEntry
	pending   map[int64]map[topicPart]offsetEntry // producer id -> offsets awaiting its marker

	state        groupState
	generation   int32
	protocolType string
	protocol     string
	leader       string
	members      map[string]*member
	instances    map[string]string   // group.instance.id -> member id
	pendingIDs   map[string]struct{} // ids handed out by MEMBER_ID_REQUIRED, not joined yet
	joinDeadline time.Time
	changed      chan struct{} // closed at every state change, for waiting handlers
	nextID       int
}

// member is one member of a group.
type member struct {
	id               string
	instanceID       *string
	clientID         string
	protocols        []memberProtocol
	sessionTimeout   time.Duration
	rebalanceTimeout time.Duration
	joined           bool // rejoined in the current rebalance
	assignment       []byte
	lastSeen         time.Time
}

type memberProtocol struct {
	name     string
	metadata []byte
}

type topicPart struct {
	topic string
	part  int32
}

type offsetEntry struct {
	offset      int64
	leaderEpoch int32
	metadata    *string
}

// groupOf returns the named group, creating it. c.mu is held.
func (c *Cluster) groupOf(name string) *group {
	g := c.groups[name]
	if g == nil {
		g = &group{name: name, committed: make(map[topicPart]offsetEntry), pending: make(map[int64]map[topicPart]offsetEntry),
			members: make(map[string]*member), instances: make(map[string]string), pendingIDs: make(map[string]struct{}),
			changed: make(chan struct{})}
		c.groups[name] = g
	}
	return g
}

// setState moves g to s and wakes its waiting handlers. c.mu is held.
func (g *group) setState(s groupState) {
	g.state = s
	close(g.changed)
	g.changed = make(chan struct{})
}

// newMemberID makes a member id as Kafka does: the client id, a dash and
// a unique suffix. c.mu is held.
func (g *group) newMemberID(clientID string) string {
	g.nextID++
	return fmt.Sprintf("%s-%s-%d", clientID, g.name, g.nextID)
}

// rebalance starts a rebalance: every member must join again before the
// largest rebalance timeout passes (or the initial delay, for a group
// that was empty). c.mu is held.
func (c *Cluster) rebalance(g *group, now time.Time) {
	if g.state == groupPreparingRebalance {
		return
	}
	wasEmpty := g.state == groupEmpty
	for _, m := range g.members {
		m.joined = false
		m.assignment = nil
	}
	g.setState(groupPreparingRebalance)
	var timeout time.Duration
	for _, m := range g.members {
		timeout = max(timeout, m.rebalanceTimeout)
	}
	if wasEmpty {
		timeout = groupInitialDelay
	}
	g.joinDeadline = now.Add(timeout)
	gen := g.generation
	c.after(timeout, func() {
		if g.state == groupPreparingRebalance && g.generation == gen {
			c.completeJoin(g)
		}
	})
}

// maybeCompleteJoin completes the rebalance once every member joined
// again, unless the initial delay of an empty group runs. c.mu is held.
func (c *Cluster) maybeCompleteJoin(g *group, now time.Time) {
	if g.state != groupPreparingRebalance || now.Before(g.joinDeadline) && !c.allJoined(g) {
		return
	}
	c.completeJoin(g)
}

func (c *Cluster) allJoined(g *group) bool {
	if g.generation == 0 && len(g.members) > 0 {
		return false // the initial delay collects the first members
	}
	for _, m := range g.members {
		if !m.joined {
			return false
		}
	}
	return true
}

// completeJoin ends the join phase: members that did not join are
// removed, the generation grows and a leader and protocol are chosen.
// c.mu is held.
func (c *Cluster) completeJoin(g *group) {
	for id, m := range g.members {
		if !m.joined {
			c.removeMember(g, id)
		}
	}
	g.generation++
	if len(g.members) == 0 {
		g.protocol, g.leader = "", ""
		g.setState(groupEmpty)
		return
	}
	if g.members[g.leader] == nil {
		g.leader = ""
		for id := range g.members {
			if g.leader == "" || id < g.leader {
				g.leader = id
			}
		}
	}
	g.protocol = chooseProtocol(g)
	g.setState(groupCompletingRebalance)
}

// chooseProtocol picks the first of the leader's protocols every member
// supports.
func chooseProtocol(g *group) string {
	for _, p := range g.members[g.leader].protocols {
		all := true
		for _, m := range g.members {
			found := false
			for _, q := range m.protocols {
				found = found || q.name == p.name
			}
			all = all && found
		}
		if all {
			return p.name
		}
	}
	return g.members[g.leader].protocols[0].name
}

// removeMember drops member id from g. c.mu is held.
func (c *Cluster) removeMember(g *group, id string) {
	m := g.members[id]
	if m == nil {
		return
	}
	if m.instanceID != nil && g.instances[*m.instanceID] == id {
		delete(g.instances, *m.instanceID)
	}
	delete(g.members, id)
}

// watchSession removes member m of g once it was not seen for its session
// timeout, rebalancing the rest. c.mu is held.
func (c *Cluster) watchSession(g *group, m *member) {
	c.after(m.sessionTimeout, func() {
		if g.members[m.id] != m || time.Since(m.lastSeen) < m.sessionTimeout {
			return
		}
		c.removeMember(g, m.id)
		c.groupChanged(g)
	})
}

// groupChanged rebalances g after a member left, or empties it. c.mu is
// held.
func (c *Cluster) groupChanged(g *group) {
	if len(g.members) == 0 {
		if g.state != groupEmpty {
			g.generation++
			g.protocol, g.leader = "", ""
			g.setState(groupEmpty)
		}
		return
	}
	now := time.Now()
	c.rebalance(g, now)
	c.maybeCompleteJoin(g, now)
}

// settleOffsets commits or discards the offsets pid's transaction gave
// group g, as its marker on __consumer_offsets does. c.mu is held.
func (c *Cluster) settleOffsets(name string, pid int64, commit bool) {
	g := c.groups[name]
	if g == nil {
		return
	}
	if commit {
		for tp, e := range g.pending[pid] {
			g.committed[tp] = e
		}
	}
	delete(g.pending, pid)
}

// unstable reports whether a transaction holds an offset of tp for g not
// yet settled. c.mu is held.
func (g *group) unstable(tp topicPart) bool {
	for _, offs := range g.pending {
		if _, ok := offs[tp]; ok {
			return true
		}
	}
	return false
}

// checkMember checks a commit's member id, generation and instance id
// against group name (KIP-447 fencing): 0, UNKNOWN_MEMBER_ID,
// ILLEGAL_GENERATION or FENCED_INSTANCE_ID. An empty member id with a
// negative generation is a commit from outside any group generation and
// passes. c.mu is held.
func (c *Cluster) checkMember(name, memberID string, generation int32, instanceID *string) int16 {
	if memberID == "" && generation < 0 {
		return 0
	}
	g := c.groups[name]
	if g == nil {
		return kerr.UnknownMemberID.Code
	}
	if instanceID != nil {
		if id, ok := g.instances[*instanceID]; ok && id != memberID {
			return kerr.FencedInstanceID.Code
		}
	}
	m := g.members[memberID]
	if m == nil {
		return kerr.UnknownMemberID.Code
	}
	if generation != g.generation {
		return kerr.IllegalGeneration.Code
	}
	m.lastSeen = time.Now()
	return 0
}
