package broker

// group is one consumer group at its coordinator: committed offsets, the
// offsets transactions committed but not yet settled, and the members of
// its current generation. c.mu guards it.
type group struct {
	name       string
	committed  map[topicPart]offsetEntry
	pending    map[int64]map[topicPart]offsetEntry // producer id -> offsets awaiting its marker
	generation int32
	members    map[string]*member
}

// member is one member of a group's current generation.
type member struct {
	id         string
	instanceID *string
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
		g = &group{name: name, committed: make(map[topicPart]offsetEntry), pending: make(map[int64]map[topicPart]offsetEntry), members: make(map[string]*member)}
		c.groups[name] = g
	}
	return g
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
