package producer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/longhaul-kafka/longhaul/internal/broker"
	"github.com/longhaul-kafka/longhaul/protocol"
)

// A randomized mixed-fault test of the whole producer (issue 12), on
// virtual time: every schedule is drawn from a seed, runs the embedded
// broker on an in-memory network inside a synctest bubble against one or
// two producers, and is judged by checkOutcome plus liveness and memory
// checks (buffer.memory's bound while it runs, memWatch, and every byte
// back after Close), and by the size rules of batchBounds on every produce
// request the broker reads. A failing schedule prints its seed and steps.
// The run as a whole must have exercised coalescing, keyless records on
// grown partitions, full batches and a full buffer.memory (chaosCoverage).
//
//	LONGHAUL_CHAOS_SEED=123        rerun one seed, printing its schedule
//	LONGHAUL_CHAOS_SCHEDULES=50000 run more (or fewer) schedules
//	LONGHAUL_CHAOS_FIRST=1000      first seed (default 1)
//	LONGHAUL_CHAOS_RUNS=20         with LONGHAUL_CHAOS_SEED: run it that often, reporting
//	                               how many runs failed and how many paths they took
//	LONGHAUL_CHAOS_BUG=renewalResets  bring back a bug (chaosBugs) to find seeds that catch it
//
// A seed replays its run as far as the producer decides it: the
// producers' random choices (backoff jitter, sticky partitions) are seeded
// from it (seededRandom), and nodes are visited in id order. What is left
// is the order of goroutines woken at one virtual instant, which parallel
// threads change from run to run: a rerun of one seed, and the seeds of
// TestChaosScanSeeds, run on one thread (oneThread), where nearly every
// seed takes one path. A scan run with GOMAXPROCS=1 (in several processes
// to use more cores) finds failures that rerun the same way.

// Chaos run parameters.
const (
	chaosNodes      = 3
	chaosParts      = 3
	chaosTopic      = "t"
	chaosRecordSize = 100
	chaosSpan       = 3 * time.Second // faults and produce bursts happen in [0, span)
	chaosReqTimeout = time.Second
	chaosRTT        = 5 * time.Millisecond
	chaosDelivery   = 6 * time.Second
	chaosExpiry     = chaosDelivery + 2*chaosReqTimeout // producer.id.expiration.ms of the model
)

// chaosStep is one scheduled action.
type chaosStep struct {
	at   time.Duration
	what string
	do   func(c *broker.Cluster, run *chaosRun)
}

// chaosSchedule is one drawn schedule.
type chaosSchedule struct {
	seed      uint64
	producers int
	window    int
	old       int32 // node in old (pre-KIP-1269) mode, -1 none
	kafka24   int32 // node in Kafka 2.4 mode, -1 none; chaosNodes: every node
	// session, if > 0, is the SASL session lifetime of every node
	// (connections.max.reauth.ms, KIP-368): producers log in with PLAIN
	// and renew their connections (drain, close, dial) among the faults.
	session time.Duration
	// batchSize is batch.size: mostly 512 B (many batches, windows full),
	// sometimes 4 KiB, so batch buffers grow by doubling (issue 20).
	batchSize int
	// maxRequestSize is max.request.size: mostly the default (1 MiB,
	// never reached), in one schedule in eight 700 B to 2 KiB, below
	// batch.size or near it, so it bounds batches and requests instead.
	maxRequestSize int
	// coalesce is longhaul.coalesce.requests: mostly the default (5), in
	// one schedule in two 1 or 2, so lingered batches are held (issue 19)
	// whenever a slowed node's responses take over twice its fastest.
	coalesce int
	// shrinks: the topic grows and is later re-created with its first
	// partition count. A producer that learns of it late (brokers before
	// Produce v13 name topics, so nothing fails until a partition is
	// missing) may place keyless records on a vanished partition; they
	// fail, not written, with ErrPartitionGone.
	shrinks bool
	steps   []chaosStep
	// lostTime is the most time the faults can cost one partition in
	// request timeouts: each dropped response costs a request timeout,
	// each stall its length. Beyond delivery.timeout.ms a record may
	// honestly time out.
	lostTime time.Duration
	// regress brings back one of issue 12's bugs (negative controls).
	regress regressions
	// partitioner, if set, places keyless records instead of the sticky
	// partitioner (negative controls of chaosCoverage).
	partitioner Partitioner
	// moved: nodes move to new addresses (moves). The producers then
	// bootstrap from every node's first address, not node 0's alone: a
	// producer that knows only an address that moved before it learned
	// the cluster can never find it (a deployment would point its
	// bootstrap name at the new address).
	moved bool
	// capped, if >= 0, is a node offering Produce up to capVersion only
	// (broker.Config.ProduceMaxVersions): 3, Kafka 0.11, which retains
	// only the last batch per producer, so the producer keeps one batch
	// in flight per partition there; or 4 to 13, a release before
	// KIP-1269 that never announces a window and retains 5 (oldNodes).
	capped     int32
	capVersion int16
	// quotas and hints count the produce quotas and the scripted KIP-951
	// hints the schedule drew (throttles).
	quotas, hints int
	// bufferMemory is buffer.memory: mostly 1 MiB, never reached; in one
	// schedule in four 4, 8 or 16 KiB, which bursts fill, so Produce waits
	// for acknowledgements and batch buffers are forced past the limit
	// while memWatch checks the bound (chaosSchedule.memory).
	bufferMemory int64
	// readback, if set, runs the producers with read-back on and checks
	// what it settled (chaos_readback_test.go).
	readback *chaosReadback
}

func (s *chaosSchedule) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d: %d producer(s), window %d, old node %d, kafka-2.4 node %d, SASL session %v, batch.size %d, max.request.size %d, coalesce %d", s.seed, s.producers, s.window, s.old, s.kafka24, s.session, s.batchSize, s.maxRequestSize, s.coalesce)
	if s.capped >= 0 {
		fmt.Fprintf(&b, ", node %d offers Produce up to v%d", s.capped, s.capVersion)
	}
	fmt.Fprintf(&b, ", buffer.memory %d", s.bufferMemory)
	b.WriteString("\n")
	for _, st := range s.steps {
		fmt.Fprintf(&b, "  %7v %s\n", st.at, st.what)
	}
	return b.String()
}

// chaosRun is the state of one schedule being run.
type chaosRun struct {
	producers []*Producer
	ledgers   []*ledger
	keyless   []*ledger              // each producer's keyless records
	deleted   [][][]broker.LogRecord // logs of deleted incarnations of the topic
	// midRenewal counts moves made while a producer's connection to the
	// node drained for its SASL renewal (moves).
	midRenewal atomic.Int32
	mem        []*memWatch // each producer's buffer.memory, checked as the schedule runs
}

// ledger returns a ledger of producer i's records, whose every Produce
// and callback samples its buffer.memory (memWatch). Under a small
// buffer.memory a Produce waits for acknowledgements, which come within a
// delivery timeout; a wait longer than that fails the record (ledger.wait)
// rather than hang the schedule.
func (r *chaosRun) ledger(name string, i int, s *chaosSchedule) *ledger {
	l := newLedger(name, chaosTopic)
	l.mem = r.mem[i]
	if s.bufferMemory < 1<<20 {
		l.wait = chaosDelivery + 3*chaosReqTimeout
	}
	return l
}

// drawSchedule draws a schedule from seed: bursts of produce and of faults
// from the whole vocabulary.
func drawSchedule(seed uint64) *chaosSchedule {
	rng := rand.New(rand.NewPCG(seed, 0x1269))
	s := &chaosSchedule{seed: seed, producers: 1 + rng.IntN(2), window: []int{5, 20, 50}[rng.IntN(3)], old: -1, kafka24: -1}
	if rng.IntN(3) == 0 {
		s.old = 2
	}
	switch rng.IntN(8) {
	case 0, 1:
		s.kafka24 = 1
	case 2:
		s.kafka24 = chaosNodes // a whole pre-2.5 cluster: no KIP-360 bump anywhere
	}
	at := func() time.Duration { return time.Duration(rng.Int64N(int64(chaosSpan))) }
	part := func() int32 { return rng.Int32N(chaosParts) }
	node := func() int32 { return rng.Int32N(chaosNodes) }
	add := func(t time.Duration, what string, do func(*broker.Cluster, *chaosRun)) {
		s.steps = append(s.steps, chaosStep{at: t, what: what, do: do})
	}
	// Produce bursts.
	for range 3 + rng.IntN(6) {
		t, pi, p, n := at(), rng.IntN(s.producers), part(), 1+rng.IntN(60)
		add(t, fmt.Sprintf("producer %d: %d records to partition %d", pi, n, p), func(c *broker.Cluster, r *chaosRun) {
			r.ledgers[pi].produce(r.producers[pi], p, n, chaosRecordSize)
		})
	}
	// Fault bursts.
	for range 1 + rng.IntN(6) {
		t := at()
		switch k := rng.IntN(11); k {
		case 0, 1, 2: // scripted answers for consecutive batches
			p := part()
			answers, names := drawAnswers(rng)
			add(t, fmt.Sprintf("partition %d answers %s", p, names), func(c *broker.Cluster, _ *chaosRun) {
				c.ScriptAnswers(chaosTopic, p, answers...)
			})
		case 3:
			nd, n := node(), 1+rng.IntN(5)
			s.lostTime += time.Duration(n) * chaosReqTimeout
			add(t, fmt.Sprintf("node %d drops its next %d produce responses", nd, n), func(c *broker.Cluster, _ *chaosRun) { c.DropProduceResponses(nd, n) })
		case 4:
			nd, n := node(), 1+rng.IntN(5)
			if rng.IntN(2) == 0 {
				add(t, fmt.Sprintf("node %d closes a connection after %d requests", nd, n), func(c *broker.Cluster, _ *chaosRun) { c.CloseAfterRequests(nd, n) })
			} else {
				add(t, fmt.Sprintf("node %d drops its connections", nd), func(c *broker.Cluster, _ *chaosRun) { c.DropConnections(nd) })
			}
		case 5:
			nd, d := node(), time.Duration(rng.Int64N(int64(2*chaosReqTimeout)))
			s.lostTime += d + chaosReqTimeout
			add(t, fmt.Sprintf("node %d stalls %v", nd, d), func(c *broker.Cluster, _ *chaosRun) { c.Stall(nd, d) })
		case 6, 10:
			// A real broker expires only ids idle for
			// producer.id.expiration.ms, far above delivery.timeout.ms:
			// never one with a batch in doubt (that case is undetectable
			// by any client; producer/DESIGN.md). So the producers go
			// quiet past their delivery timeout first, virtual time.
			what := "producers idle, then idle producer ids expire (KIP-854)"
			var then func(*broker.Cluster, *chaosRun)
			if rng.IntN(4) != 0 {
				// ... and the first burst after the pause meets faults,
				// while the broker has no state for the producer.
				p, pi, n := part(), rng.IntN(s.producers), 20+rng.IntN(60)
				answers, names := drawAnswers(rng)
				if rng.IntN(4) != 0 {
					// A batch refused for sure right behind the first:
					// the trap of KAFKA-15591 if the first is in doubt.
					e := notWrittenRetriable[rng.IntN(len(notWrittenRetriable))]
					answers = append(answers[:1:1], append([]broker.Answer{{Code: e.Code}}, answers[1:]...)...)
					first, _, _ := strings.Cut(names, ", ")
					rest := names[len(first):]
					names = first + ", " + e.Message + rest
				}
				what += fmt.Sprintf("; partition %d answers %s; producer %d: %d records to it", p, names, pi, n)
				then = func(c *broker.Cluster, r *chaosRun) {
					c.ScriptAnswers(chaosTopic, p, answers...)
					r.ledgers[pi].produce(r.producers[pi], p, n, chaosRecordSize)
				}
			}
			add(t, what, func(c *broker.Cluster, r *chaosRun) {
				time.Sleep(chaosExpiry + chaosReqTimeout)
				c.ExpireIdleProducerIDs(chaosExpiry)
				if then != nil {
					then(c, r)
				}
			})
		case 7, 8:
			p, nd := part(), node()
			add(t, fmt.Sprintf("partition %d moves to node %d", p, nd), func(c *broker.Cluster, _ *chaosRun) { c.MoveLeader(chaosTopic, p, nd) })
		case 9:
			w := []int{5, 8, 20, 50}[rng.IntN(4)]
			add(t, fmt.Sprintf("window set to %d", w), func(c *broker.Cluster, _ *chaosRun) { c.SetWindow(chaosTopic, w) })
		}
	}
	// Topology changes an operator makes (issue 20), drawn from their own
	// stream so the faults above stay what each seed always drew.
	topo := rand.New(rand.NewPCG(seed, 0x2020))
	var grown, recreated []time.Duration
	for range topo.IntN(3) {
		t := time.Duration(topo.Int64N(int64(chaosSpan)))
		switch topo.IntN(2) {
		case 0:
			recreated = append(recreated, t)
			gap := time.Duration(topo.Int64N(int64(300 * time.Millisecond)))
			s.lostTime += gap + chaosReqTimeout
			window := s.window
			add(t, fmt.Sprintf("topic deleted, re-created %v later (DeleteTopics, CreateTopics)", gap), func(c *broker.Cluster, r *chaosRun) {
				logs, err := c.DeleteTopic(chaosTopic)
				if err != nil {
					panic(err)
				}
				r.deleted = append(r.deleted, logs)
				time.Sleep(gap)
				if err := c.CreateTopic(broker.TopicConfig{Name: chaosTopic, Partitions: chaosParts, Window: window}); err != nil {
					panic(err)
				}
			})
		case 1:
			grown = append(grown, t)
			more := 1 + topo.Int32N(3)
			add(t, fmt.Sprintf("topic grows by %d partitions (CreatePartitions)", more), func(c *broker.Cluster, _ *chaosRun) {
				if err := c.CreatePartitions(chaosTopic, c.Partitions(chaosTopic)+more); err != nil {
					panic(err)
				}
			})
		}
	}
	for _, g := range grown {
		for _, r := range recreated {
			s.shrinks = s.shrinks || r > g
		}
	}
	// One schedule in four runs on SASL sessions of 150 ms to 1.5 s, so
	// renewals (issue 16) meet every fault above; drawn from its own
	// stream for the same reason as the topology changes.
	sess := rand.New(rand.NewPCG(seed, 0x368))
	if sess.IntN(4) == 0 {
		s.session = 150*time.Millisecond + time.Duration(sess.Int64N(int64(1350*time.Millisecond)))
	}
	s.batchSize = 512
	if sess.IntN(3) == 0 {
		s.batchSize = 4096
	}
	// max.request.size, from its own stream: one schedule in eight bounds
	// batches (and requests) by it rather than by batch.size.
	mrs := rand.New(rand.NewPCG(seed, 0x1024))
	s.maxRequestSize = 1 << 20
	if mrs.IntN(8) == 0 {
		s.maxRequestSize = []int{700, 1024, 2048}[mrs.IntN(3)]
	}
	// Request coalescing (issue 19) and slow nodes to set it off, from
	// their own stream: a node answers in 20-100 ms instead of 5 for up to
	// 800 ms, as a broker queueing requests does.
	coal := rand.New(rand.NewPCG(seed, 0x1919))
	s.coalesce = 5
	if coal.IntN(2) == 0 {
		s.coalesce = 1 + coal.IntN(2)
	}
	for range coal.IntN(3) {
		t, nd := time.Duration(coal.Int64N(int64(chaosSpan))), coal.Int32N(chaosNodes)
		rtt := 20*time.Millisecond + time.Duration(coal.Int64N(int64(80*time.Millisecond)))
		d := time.Duration(coal.Int64N(int64(800 * time.Millisecond)))
		s.lostTime += d
		add(t, fmt.Sprintf("node %d answers in %v for %v", nd, rtt, d), func(c *broker.Cluster, _ *chaosRun) { c.SetRTT(nd, rtt) })
		add(t+d, fmt.Sprintf("node %d answers in %v again", nd, chaosRTT), func(c *broker.Cluster, _ *chaosRun) { c.SetRTT(nd, chaosRTT) })
		// A trickle of records to the partition the node led at first,
		// each its own lingered batch: what coalescing holds.
		pi, n, gap := coal.IntN(s.producers), 10+coal.IntN(50), time.Duration(1+coal.IntN(5))*time.Millisecond
		add(t+d/2, fmt.Sprintf("producer %d: %d records to partition %d, one each %v", pi, n, nd, gap), func(_ *broker.Cluster, r *chaosRun) {
			for range n {
				r.ledgers[pi].produce(r.producers[pi], nd, 1, chaosRecordSize)
				time.Sleep(gap)
			}
		})
	}
	// Keyless records (the sticky partitioner, KIP-794), in one schedule
	// in two, from their own stream: bursts, and trickles that seal on
	// linger, so the partitioner moves among partitions while the faults
	// above hit them.
	kl := rand.New(rand.NewPCG(seed, 0x794))
	if kl.IntN(2) == 0 {
		for range 1 + kl.IntN(3) {
			t, pi := time.Duration(kl.Int64N(int64(chaosSpan))), kl.IntN(s.producers)
			if kl.IntN(3) == 0 {
				n, gap := 5+kl.IntN(40), time.Duration(1+kl.IntN(8))*time.Millisecond
				add(t, fmt.Sprintf("producer %d: %d keyless records, one each %v", pi, n, gap), func(_ *broker.Cluster, r *chaosRun) {
					for range n {
						r.keyless[pi].produce(r.producers[pi], keyless, 1, chaosRecordSize)
						time.Sleep(gap)
					}
				})
				continue
			}
			n := 1 + kl.IntN(150)
			add(t, fmt.Sprintf("producer %d: %d keyless records", pi, n), func(_ *broker.Cluster, r *chaosRun) {
				r.keyless[pi].produce(r.producers[pi], keyless, n, chaosRecordSize)
			})
		}
	}
	// Nodes moving to a new address, from their own stream, in one
	// schedule in four (moves). The stream's constant is one under which
	// the seeds of scanSeeds draw no move, so they keep the schedules
	// they failed with.
	s.moves(rand.New(rand.NewPCG(seed, 0xad0d)), add)
	s.oldNodes(rand.New(rand.NewPCG(seed, 0x330)))
	s.memory(rand.New(rand.NewPCG(seed, 0x6d65b0)))
	s.throttles(rand.New(rand.NewPCG(seed, chaosQuotaStream)), rand.New(rand.NewPCG(seed, chaosHintStream)), add)
	sort.SliceStable(s.steps, func(i, j int) bool { return s.steps[i].at < s.steps[j].at })
	return s
}

// moves draws, in one schedule in four, one or two nodes moving to a new
// address (broker.Cluster.MoveNode): the same process at another address
// (a changed listener), or, in two of three, another process taking the
// node id there (a replaced machine, a broker restarted elsewhere), of the
// same version, a current or a pre-KIP-1269 one, which in one of two
// loaded its producer state from a snapshot (each producer's last batch
// only), while the old process may serve its connections up to 600 ms
// longer. On SASL sessions, one move in two waits (up to a session, a
// producer trickling records to a partition the node leads meanwhile) for the
// producer's connection to the node to drain for its renewal, and the
// producer's periodic metadata refresh falls due at once, so it learns of
// the move mid-drain, while the old process holds the drained batches and
// the trickle goes on: the path where a renewal must not continue into the
// new process (applyMetadata, regress movedRenewalContinues).
func (s *chaosSchedule) moves(mv *rand.Rand, add func(time.Duration, string, func(*broker.Cluster, *chaosRun))) {
	if mv.IntN(4) != 0 {
		return
	}
	s.moved = true
	for range 1 + mv.IntN(2) {
		t, nd := time.Duration(mv.Int64N(int64(chaosSpan))), mv.Int32N(chaosNodes)
		var m broker.NodeMove
		what := fmt.Sprintf("node %d moves to a new address", nd)
		if mv.IntN(3) != 0 {
			m.Replace = true
			m.Mode = []broker.NodeMode{broker.SameMode, broker.SameMode, broker.CurrentMode, broker.OldMode}[mv.IntN(4)]
			m.Snapshot = mv.IntN(2) == 0
			what += fmt.Sprintf(", another process (%s", []string{"same version", "KIP-1269", "pre-KIP-1269"}[m.Mode])
			if m.Snapshot {
				what += ", producer state from a snapshot"
			}
			what += ")"
		}
		if mv.IntN(2) == 0 {
			m.Grace = 20*time.Millisecond + time.Duration(mv.Int64N(int64(580*time.Millisecond)))
		}
		renewal, pi, session := s.session > 0 && mv.IntN(2) == 0, mv.IntN(s.producers), s.session
		if renewal && m.Grace == 0 {
			m.Grace = 20*time.Millisecond + time.Duration(mv.Int64N(int64(280*time.Millisecond)))
		}
		if m.Grace > 0 {
			what += fmt.Sprintf("; the old one answers after %v, then closes", m.Grace)
		}
		if renewal {
			what = fmt.Sprintf("when producer %d's connection to node %d drains for its SASL renewal (a session at most): %s; producer %d's metadata refresh falls due", pi, nd, what, pi)
		}
		s.lostTime += m.Grace + chaosReqTimeout
		add(t, what, func(c *broker.Cluster, r *chaosRun) {
			if !renewal {
				if _, err := c.MoveNode(nd, m); err != nil {
					panic(err)
				}
				return
			}
			// A trickle to a partition the node leads, so the renewal
			// comes with batches in flight, and batches wait while the
			// old process holds the drained ones.
			p, part := r.producers[pi], keyless
			for q := range c.Partitions(chaosTopic) {
				if leader, _ := c.Leader(chaosTopic, q); leader == nd {
					part = q
					break
				}
			}
			trickle := func() {
				if part != keyless {
					r.ledgers[pi].produce(p, part, 1, chaosRecordSize)
				}
				time.Sleep(2 * time.Millisecond)
			}
			// A connection renews within a session of being made:
			// wait that long, if the node leads a partition to trickle
			// to (else its connection may carry nothing to drain).
			wait := session + 50*time.Millisecond
			if part == keyless {
				wait = 0
			}
			for end := time.Now().Add(wait); time.Now().Before(end); trickle() {
				if drainingTo(p, nd) {
					r.midRenewal.Add(1)
					break
				}
			}
			if _, err := c.MoveNode(nd, m); err != nil {
				panic(err)
			}
			p.s.wantMetadata() // metadata.max.age.ms falls due
			for end := time.Now().Add(m.Grace + 20*time.Millisecond); time.Now().Before(end); {
				trickle()
			}
		})
	}
}

// oldNodes draws, in one schedule in eight, one node of an old Kafka
// release: Kafka 0.11 (Produce v3), which retains only the last batch per
// producer, so more than one batch in flight per partition there can be
// written twice or out of order (regress v3Uncapped); and in another one
// in eight a node of Kafka 1.0 to 3.x (Produce v4 to v13), which retains 5
// batches and announces no window. The stream's constant is one under
// which the seeds of scanSeeds draw neither, so they keep the schedules
// they failed with. The cap is the node id's, so a process replacing it
// (moves) offers the same versions.
func (s *chaosSchedule) oldNodes(st *rand.Rand) {
	s.capped = -1
	switch st.IntN(8) {
	case 0:
		s.capped, s.capVersion = st.Int32N(chaosNodes), 3
	case 1:
		s.capped, s.capVersion = st.Int32N(chaosNodes), 4+int16(st.IntN(10))
	}
}

// memory draws buffer.memory: in one schedule in four 4, 8 or 16 KiB,
// which a burst of records fills, so Produce waits for acknowledgements,
// batch buffers taking their capacity past the limit meanwhile (memWatch
// checks the bound throughout); else 1 MiB, which no schedule reaches. The
// stream's constant is one under which the seeds of scanSeeds draw 1 MiB,
// so they keep the schedules they failed with. Small buffer.memory makes
// the path depend on the pooled buffers earlier schedules left (their
// capacity counts), so such a seed reruns the same way only in a clean
// process (runSeedClean).
func (s *chaosSchedule) memory(st *rand.Rand) {
	s.bufferMemory = 1 << 20
	if st.IntN(4) == 0 {
		s.bufferMemory = []int64{4096, 8192, 16384}[st.IntN(3)]
	}
}

// drainingTo reports whether p's connection to node nd is draining for
// its SASL renewal (sender.checkConn), asking the sender goroutine.
func drainingTo(p *Producer, nd int32) bool {
	ch := make(chan bool, 1)
	p.post(func() {
		n := p.s.nodes[nd]
		ch <- n != nil && n.draining != nil
	})
	return <-ch
}

// notWrittenRetriable are retriable codes Kafka answers before appending.
var notWrittenRetriable = []*kerr.Error{kerr.NotEnoughReplicas, kerr.LeaderNotAvailable, kerr.CorruptMessage, kerr.FencedLeaderEpoch}

// chaosLogger logs producer i's debug output to stderr when
// LONGHAUL_CHAOS_LOG is set (to rerun one failing seed), else nothing.
func chaosLogger(i int) *slog.Logger {
	if os.Getenv("LONGHAUL_CHAOS_LOG") == "" {
		return nil
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With("producer", i)
}

// drawAnswers draws a burst of answers for consecutive batches of a
// partition: ok, an error after appending, or an error without appending,
// from the whole vocabulary.
func drawAnswers(rng *rand.Rand) ([]broker.Answer, string) {
	var answers []broker.Answer
	var names []string
	for range 1 + rng.IntN(4) {
		var a broker.Answer
		switch rng.IntN(4) {
		case 0:
			a = broker.Answer{Mode: broker.Normal}
			names = append(names, "ok")
		case 1:
			e := broker.AfterAppendCodes[rng.IntN(len(broker.AfterAppendCodes))]
			a = broker.Answer{Code: e.Code, Mode: broker.AppendThenFail}
			names = append(names, e.Message+"(appended)")
		default:
			e := broker.ProduceErrorCodes[rng.IntN(len(broker.ProduceErrorCodes))]
			a = broker.Answer{Code: e.Code}
			names = append(names, e.Message)
		}
		answers = append(answers, a)
	}
	return answers, strings.Join(names, ", ")
}

// runSchedule runs s inside the current synctest bubble and returns every
// violation found.
func runSchedule(t *testing.T, s *chaosSchedule) []string {
	v, _ := runScheduleCovered(t, s)
	return v
}

// scheduleCoverage is what one schedule exercised of what the checker
// sees fail only if it happens (chaosCoverage).
type scheduleCoverage struct {
	holds        int64   // lingered batches held by coalescing, all producers (sender.holds)
	grownKeyless int     // keyless records written to partitions CreatePartitions added
	midRenewal   int32   // nodes moved while a producer's connection to them drained for its SASL renewal
	moved        bool    // nodes moved (chaosSchedule.moved)
	v3           bool    // a node offered Produce up to v3 (Kafka 0.11: chaosSchedule.capped)
	v3Fed        bool    // ... and read produce requests
	capped       bool    // a node offered Produce v4 to v13 (before KIP-1269)
	fullness     float64 // the fullest batch of 2+ records, as a fraction of its bound (batchBounds)
	requestBound bool    // max.request.size was below batch.size: it bounded batches
	sent         uint64  // digest of the batches sent (batchBounds.sent): the path the run took
	memFull      bool    // a Produce waited for buffer.memory (memWatch.waited)
	memOver      bool    // a producer held more than buffer.memory: batch buffers forced past it
}

// runScheduleCovered is runSchedule, also returning what the schedule
// exercised.
func runScheduleCovered(t *testing.T, s *chaosSchedule) ([]string, scheduleCoverage) {
	var cov scheduleCoverage
	bounds := newBatchBounds(s.batchSize, s.maxRequestSize)
	cov.requestBound = s.maxRequestSize < s.batchSize
	cfg := broker.Config{Nodes: chaosNodes, RTT: chaosRTT, OnProduce: bounds.request,
		Topics: []broker.TopicConfig{{Name: chaosTopic, Partitions: chaosParts, Window: s.window}}}
	var cappedFed atomic.Bool
	if s.capped >= 0 {
		cfg.ProduceMaxVersions = map[int32]int16{s.capped: s.capVersion}
		cfg.OnProduce = func(node int32, records [][]byte) {
			if node == s.capped {
				cappedFed.Store(true)
			}
			bounds.request(node, records)
		}
		cov.v3, cov.capped = s.capVersion < 4, s.capVersion >= 4
	}
	if s.old >= 0 {
		cfg.OldNodes = []int32{s.old}
	}
	if s.kafka24 == chaosNodes {
		for nd := range int32(chaosNodes) {
			cfg.Kafka24Nodes = append(cfg.Kafka24Nodes, nd)
		}
	} else if s.kafka24 >= 0 {
		cfg.Kafka24Nodes = []int32{s.kafka24}
	}
	var login []Opt
	if s.partitioner != nil {
		login = append(login, RecordPartitioner(s.partitioner))
	}
	if s.session > 0 {
		cfg.SASL = saslPlain(s.session)
		login = append(login, SASL(plain.Auth{User: "alice", Pass: "secret"}.AsMechanism()))
	}
	c, n := memCluster(t, cfg)
	s.readback.lag(c)
	boot := []string{c.Addr()}
	if s.moved {
		boot = c.Addrs()
	}
	s.readback.fill(t, c, append(login, BootstrapServers(boot...), Dialer(n.Dial))...)
	run := &chaosRun{}
	for i := range s.producers {
		p, err := New(append(append(s.readback.opts(), login...), BootstrapServers(boot...), Dialer(n.Dial), Linger(time.Duration(i)*time.Millisecond),
			RetryBackoff(5*time.Millisecond), RetryBackoffMax(50*time.Millisecond),
			RequestTimeout(chaosReqTimeout), DeliveryTimeout(chaosDelivery),
			MaxInFlightRequestsPerConnection(20), BatchSize(s.batchSize), BufferMemory(s.bufferMemory), MaxRequestSize(s.maxRequestSize),
			Property("longhaul.coalesce.requests", strconv.Itoa(s.coalesce)),
			optFunc(func(c *config) error { c.regress, c.probe = s.regress, new(senderProbe); return nil }),
			seededRandom(s.seed<<4|uint64(i)), // a rerun of the seed draws the same jitter and partitions
			Logger(chaosLogger(i)))...)
		require.NoError(t, err)
		p.mem.regress = s.regress // memForceKeepsFree, for TestChaosFindsForceKeepsFree
		run.producers = append(run.producers, p)
		// One batch buffer: keepBuffer, the largest a batch here holds
		// (batch.size is at most that, and only a partition whose last
		// batch used more takes a larger pooled buffer).
		run.mem = append(run.mem, &memWatch{p: p, name: strconv.Itoa(i), limit: s.bufferMemory, bound: s.bufferMemory + keepBuffer})
		run.ledgers = append(run.ledgers, run.ledger(fmt.Sprintf("p%d", i), i, s))
		run.keyless = append(run.keyless, run.ledger(fmt.Sprintf("p%dk", i), i, s))
	}
	start := time.Now()
	for _, w := range run.mem {
		w.start = start
	}
	for _, st := range s.steps {
		if d := st.at - time.Since(start); d > 0 {
			time.Sleep(d)
		}
		st.do(c, run)
		for _, w := range run.mem {
			w.sample("step: " + st.what)
		}
	}
	// Faults stop: no scripted answer, dropped response or connection
	// close is left armed for later requests.
	for p := range int32(chaosParts) {
		c.InjectError(chaosTopic, p, 0, 0)
	}
	for nd := range int32(chaosNodes) {
		c.DropProduceResponses(nd, 0)
		c.CloseAfterRequests(nd, 0)
	}
	var v []string
	all := append(append([]*ledger(nil), run.ledgers...), run.keyless...)
	for _, l := range all {
		if !l.waitAll(chaosDelivery + 3*chaosReqTimeout + s.readback.wait()) {
			v = append(v, fmt.Sprintf("liveness: ledger %s: callbacks missing %v after the last fault", l.name, chaosDelivery+3*chaosReqTimeout))
		}
	}
	// After the faults, a quiet tail must go through at once: a wedged
	// producer fails it.
	time.Sleep(2 * chaosReqTimeout)
	tailStart := time.Now()
	tails := make([]*ledger, len(run.producers))
	for i, p := range run.producers {
		tails[i] = run.ledger(fmt.Sprintf("tail%d", i), i, s)
		for part := range int32(chaosParts) {
			tails[i].produce(p, part, 3, chaosRecordSize)
		}
		kt := run.ledger(fmt.Sprintf("tail%dk", i), i, s)
		kt.produce(p, keyless, 5, chaosRecordSize)
		tails = append(tails, kt)
	}
	for _, l := range tails {
		if !l.waitAll(chaosDelivery + 3*chaosReqTimeout + s.readback.wait()) {
			v = append(v, fmt.Sprintf("liveness: ledger %s: tail callbacks missing", l.name))
		} else if f := l.failuresExcept(func(err error) bool {
			return s.shrinks && strings.HasSuffix(l.name, "k") && errors.Is(err, ErrPartitionGone)
		}); len(f) > 0 {
			v = append(v, fmt.Sprintf("liveness: ledger %s: tail records failed after the faults ended: %v", l.name, firstN(f, 2)))
		}
	}
	if d := time.Since(tailStart); d > 2*chaosReqTimeout {
		v = append(v, fmt.Sprintf("liveness: the quiet tail took %v", d))
	}
	// Every record's outcome within delivery.timeout.ms plus one request
	// timeout (batches in flight wait for their answer) and a bump.
	// Unless the schedule's dropped responses and stalls can cost more than
	// the delivery timeout less a bump (then a record may honestly time
	// out), a record that runs into delivery.timeout.ms (6 s) was starved
	// by the producer itself: the symptom of a partition left idle with
	// sendable work (issue 12, failure 2).
	bound := chaosDelivery + 2*chaosReqTimeout + s.readback.wait()
	for _, l := range all {
		l.mu.Lock()
		for k, r := range l.res {
			if r.calls > 0 && r.done.Sub(r.produced) > bound {
				v = append(v, fmt.Sprintf("liveness: %v called back after %v", k, r.done.Sub(r.produced)))
				break
			}
			if errors.Is(r.err, ErrDeliveryTimeout) && s.lostTime < chaosDelivery-2*chaosReqTimeout {
				v = append(v, fmt.Sprintf("liveness: %v starved until delivery.timeout.ms: %v", k, r.err))
				break
			}
			if errors.Is(r.err, context.DeadlineExceeded) {
				v = append(v, fmt.Sprintf("liveness: %v waited for buffer.memory over %v: %v", k, l.wait, r.err))
				break
			}
		}
		l.mu.Unlock()
	}
	for i, p := range run.producers {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		p.Close(ctx)
		cancel()
		if !memoryReleased(p) {
			v = append(v, fmt.Sprintf("memory: producer %d: buffer.memory not back to 0 after Close", i))
		}
		cov.holds += p.s.probe.holds.Load()
		bad, peak, over := run.mem[i].result()
		if bad != "" {
			v = append(v, fmt.Sprintf("%s; the most it held was %d", bad, peak))
		}
		cov.memFull = cov.memFull || run.mem[i].waited.Load()
		cov.memOver = cov.memOver || over
	}
	// Keyless records may have gone to partitions CreatePartitions added.
	o := collectOutcome(c, chaosTopic, max(chaosParts, c.Partitions(chaosTopic)), append(all, tails...)...)
	for _, logs := range run.deleted {
		o.addDeleted(logs)
	}
	v = append(v, checkOutcome(o)...)
	v = append(v, s.readback.check(c, run.deleted)...)
	for _, inc := range append(append([]map[int32][]logEntry(nil), o.gone...), o.logs) {
		for part, entries := range inc {
			for _, e := range entries {
				if part >= chaosParts && strings.HasSuffix(e.key.prod, "k") {
					cov.grownKeyless++
				}
			}
		}
	}
	// KIP-1269's rule, seen by the broker: no producer ever had more
	// batches of a partition in flight at a broker process than that
	// process had announced it retains (5 before any answer).
	v = append(v, mutedSendViolations(c)...)
	if n, first := c.OverWindow(); n > 0 {
		v = append(v, fmt.Sprintf("window: %d batches in flight beyond the window announced, e.g. %v", n, firstN(first, 2)))
	}
	bv, fullness := bounds.result()
	cov.fullness = fullness
	bounds.mu.Lock()
	cov.sent = bounds.sent
	cov.midRenewal, cov.moved = run.midRenewal.Load(), s.moved
	cov.v3Fed = cov.v3 && cappedFed.Load()
	bounds.mu.Unlock()
	return append(v, bv...), cov
}

// chaosCoverage counts, over a run of schedules, those that exercised
// what the checker can see fail only when it happens: a change that turned
// coalescing off, or never placed keyless records on partitions a grown
// topic added, or never filled a batch, or a change to the schedules that
// never moved a node mid-renewal (where movedRenewalContinues shows), or
// never sent batches to a Kafka 0.11 node (where v3Uncapped shows), or
// never filled buffer.memory (where regressForceKeepsFree and
// waitingNoExtra show), would otherwise pass every schedule.
type chaosCoverage struct {
	schedules     int
	held          int // schedules in which a lingered batch was held (coalescing, issue 19)
	grownKeyless  int // schedules that wrote keyless records to partitions added by CreatePartitions (issue 20)
	midRenewal    int // schedules that moved a node mid-renewal (moves)
	moved         int // schedules that moved a node at all
	v3            int // schedules with a Kafka 0.11 node (Produce v3)
	v3Fed         int // ... that read produce requests
	capped        int // schedules with a node of Produce v4 to v13
	full          int // schedules with a batch of 2+ records within 80-100 % of batch.size or more
	fullByRequest int // the same, in schedules whose max.request.size was the smaller bound
	memFull       int // schedules in which a Produce waited for buffer.memory
	memOver       int // schedules in which a producer held more than buffer.memory (forced growth)
}

func (c *chaosCoverage) add(s scheduleCoverage) {
	c.schedules++
	if s.holds > 0 {
		c.held++
	}
	if s.grownKeyless > 0 {
		c.grownKeyless++
	}
	if s.midRenewal > 0 {
		c.midRenewal++
	}
	if s.moved {
		c.moved++
	}
	if s.v3 {
		c.v3++
	}
	if s.v3Fed {
		c.v3Fed++
	}
	if s.capped {
		c.capped++
	}
	if s.fullness >= 0.8 {
		c.full++
		if s.requestBound {
			c.fullByRequest++
		}
	}
	if s.memFull {
		c.memFull++
	}
	if s.memOver {
		c.memOver++
	}
}

func (c chaosCoverage) String() string {
	return fmt.Sprintf("%d schedules: %d held a lingered batch, %d wrote keyless records to grown partitions, %d filled a batch to 80%% of its bound or more (%d of max.request.size), %d moved a node (%d mid-renewal), %d had a Kafka 0.11 node (Produce v3; %d sent it batches), %d a node of Produce v4 to v13, %d filled buffer.memory (a Produce waited), %d held more than buffer.memory",
		c.schedules, c.held, c.grownKeyless, c.full, c.fullByRequest, c.moved, c.midRenewal, c.v3, c.v3Fed, c.capped, c.memFull, c.memOver)
}

// gaps returns what fewer than one schedule in a hundred of the run (and
// at least one) exercised. Seeds 1-10,000 hold a lingered batch in about
// one in four, write keyless records to grown partitions in one in ten,
// fill a batch bounded by max.request.size in one in twenty-five, and move
// a node while a producer's connection to it drains for its SASL renewal
// in one in thirty (seeds 1-100: 3, 1-200: 6), send batches to a Kafka
// 0.11 node in about one in ten, and fill buffer.memory in one in five,
// holding more than it (batch buffers forced past it) in one in seven.
func (c chaosCoverage) gaps() []string {
	least := max(1, c.schedules/100)
	var g []string
	if c.held < least {
		g = append(g, fmt.Sprintf("coverage: %d of %d schedules held a lingered batch (coalescing)", c.held, c.schedules))
	}
	if c.grownKeyless < least {
		g = append(g, fmt.Sprintf("coverage: %d of %d schedules wrote keyless records to a partition the topic grew by", c.grownKeyless, c.schedules))
	}
	if c.full < least {
		g = append(g, fmt.Sprintf("coverage: %d of %d schedules filled a batch of 2+ records to 80%% of its bound", c.full, c.schedules))
	}
	if c.fullByRequest < least {
		g = append(g, fmt.Sprintf("coverage: %d of %d schedules filled a batch to 80%% of a max.request.size below batch.size", c.fullByRequest, c.schedules))
	}
	if c.midRenewal < least {
		g = append(g, fmt.Sprintf("coverage: %d of %d schedules moved a node mid-renewal", c.midRenewal, c.schedules))
	}
	if c.v3Fed < least {
		g = append(g, fmt.Sprintf("coverage: %d of %d schedules sent batches to a Kafka 0.11 node", c.v3Fed, c.schedules))
	}
	if c.memFull < least {
		g = append(g, fmt.Sprintf("coverage: %d of %d schedules filled buffer.memory (a Produce waited for it)", c.memFull, c.schedules))
	}
	if c.memOver < least {
		g = append(g, fmt.Sprintf("coverage: %d of %d schedules held more than buffer.memory (batch buffers forced past it)", c.memOver, c.schedules))
	}
	return g
}

// TestChaosCoverageNegativeControl: the coverage check of
// TestChaosMixedFaults passes on seeds 1-100 as drawn and fails, each on
// its own count, when the same schedules run with what it looks for
// turned off: coalescing (longhaul.coalesce.requests 0: never hold), the
// grown partitions (a partitioner placing keyless records on the first
// chaosParts partitions only, as a producer that never learned of the
// growth would), full batches (batch.size and max.request.size 1 MiB,
// never reached), moves mid-renewal (no SASL session: nothing renews),
// Kafka 0.11 nodes (none drawn), a full buffer.memory (1 MiB in every
// schedule).
func TestChaosCoverageNegativeControl(t *testing.T) {
	firstParts := PartitionerFunc(func(_ *Record, n int32) (int32, error) { return rand.Int32N(min(n, chaosParts)), nil })
	for _, tc := range []struct {
		name  string
		knob  func(*chaosSchedule)
		wants []string // the gaps found, by their text
	}{
		{"as drawn", func(*chaosSchedule) {}, nil},
		{"coalescing off", func(s *chaosSchedule) { s.coalesce = 0 }, []string{"held a lingered batch"}},
		{"grown partitions unused", func(s *chaosSchedule) { s.partitioner = firstParts }, []string{"grew by"}},
		{"batches never full", func(s *chaosSchedule) { s.batchSize, s.maxRequestSize = 1<<20, 1<<20 },
			[]string{"of its bound", "below batch.size"}},
		{"no SASL sessions", func(s *chaosSchedule) { s.session = 0 }, []string{"mid-renewal"}},
		{"no Kafka 0.11 node", func(s *chaosSchedule) { s.capped = -1 }, []string{"Kafka 0.11"}},
		{"buffer.memory never small", func(s *chaosSchedule) { s.bufferMemory = 1 << 20 },
			[]string{"filled buffer.memory", "held more than buffer.memory"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var cov chaosCoverage
			for seed := uint64(1); seed <= 100; seed++ {
				s := drawSchedule(seed)
				tc.knob(s)
				var sc scheduleCoverage
				synctest.Test(t, func(t *testing.T) { _, sc = runScheduleCovered(t, s) })
				cov.add(sc)
			}
			t.Logf("%v", cov)
			g := cov.gaps()
			require.Len(t, g, len(tc.wants), "gaps: %v", g)
			for i, w := range tc.wants {
				require.Contains(t, g[i], w)
			}
		})
	}
}

// oneThread runs the rest of t's test on one thread (GOMAXPROCS 1),
// unless the environment sets GOMAXPROCS: a synctest bubble's goroutines
// then run one at a time, and a seed takes the same path run after run
// (the package comment above). Call it only from a test that is not
// parallel: the setting is the whole process's.
func oneThread(t *testing.T) {
	if os.Getenv("GOMAXPROCS") != "" {
		return
	}
	prev := runtime.GOMAXPROCS(1)
	t.Cleanup(func() { runtime.GOMAXPROCS(prev) })
}

func envInt(name string, def int) int {
	if s := os.Getenv(name); s != "" {
		if n, err := strconv.Atoi(s); err == nil {
			return n
		}
	}
	return def
}

// TestChaosMixedFaults runs LONGHAUL_CHAOS_SCHEDULES schedules (10000 by
// default, 1000 under -race, 200 with -short) in four parallel shards and
// reports every failing seed with its schedule; a run of chaosCoverageMin
// schedules or more also fails on a coverage gap (chaosCoverage.gaps).
func TestChaosMixedFaults(t *testing.T) {
	total := 10000
	switch {
	case testing.Short():
		total = 200
	case raceEnabled:
		total = 1000
	}
	total = envInt("LONGHAUL_CHAOS_SCHEDULES", total)
	first := uint64(envInt("LONGHAUL_CHAOS_FIRST", 1))
	bug := chaosBug(t)
	draw := func(seed uint64) *chaosSchedule {
		s := drawSchedule(seed)
		if bug != nil {
			bug(&s.regress)
		}
		return s
	}
	if seed := os.Getenv("LONGHAUL_CHAOS_SEED"); seed != "" {
		n, err := strconv.ParseUint(seed, 10, 64)
		require.NoError(t, err)
		oneThread(t)
		s := draw(n)
		t.Logf("%v", s)
		runs := max(1, envInt("LONGHAUL_CHAOS_RUNS", 1))
		var first []string
		failures, paths := 0, map[uint64]bool{}
		for range runs {
			var v []string
			var sc scheduleCoverage
			synctest.Test(t, func(t *testing.T) { v, sc = runScheduleCovered(t, s) })
			paths[sc.sent] = true
			if len(v) > 0 {
				failures++
				if first == nil {
					first = v
				}
			}
		}
		if runs > 1 {
			t.Logf("seed %d: %d of %d runs failed; %d distinct paths (digests of the batches sent)", n, failures, runs, len(paths))
		}
		require.Empty(t, first, "seed %d", n)
		return
	}
	const shards = 4
	var failed atomic.Int64
	var mu sync.Mutex
	kinds := map[string][]uint64{}
	var cov chaosCoverage
	begin := time.Now()
	for sh := range shards {
		t.Run(fmt.Sprintf("shard%d", sh), func(t *testing.T) {
			t.Parallel()
			for i := sh; i < total; i += shards {
				seed := first + uint64(i)
				s := draw(seed)
				var v []string
				var sc scheduleCoverage
				synctest.Test(t, func(t *testing.T) { v, sc = runScheduleCovered(t, s) })
				mu.Lock()
				cov.add(sc)
				mu.Unlock()
				if len(v) == 0 {
					continue
				}
				mu.Lock()
				seen := map[string]bool{}
				for _, x := range v {
					kind := x[:strings.IndexByte(x, ':')]
					if !seen[kind] {
						seen[kind] = true
						kinds[kind] = append(kinds[kind], seed)
					}
				}
				mu.Unlock()
				if failed.Add(1) <= 5 {
					t.Errorf("%v violations (%d): %v\nrerun: LONGHAUL_CHAOS_SEED=%d go test ./producer -run TestChaosMixedFaults$", s, len(v), firstN(v, 5), seed)
				}
			}
		})
	}
	t.Cleanup(func() {
		t.Logf("%d schedules (seeds %d..%d) in %v, %d failed", total, first, first+uint64(total)-1, time.Since(begin), failed.Load())
		for k, seeds := range kinds {
			t.Logf("  %s: %d seeds, e.g. %v", k, len(seeds), seeds[:min(8, len(seeds))])
		}
		// The shards are done (cleanup runs after the subtests): what
		// the run exercised, and what it must have.
		t.Logf("coverage: %v", cov)
		if total >= chaosCoverageMin {
			for _, g := range cov.gaps() {
				t.Error(g)
			}
		}
	})
}

// chaosCoverageMin is the fewest schedules of a run whose coverage is
// checked (chaosCoverage.gaps): the -short run's 200 cover it all.
const chaosCoverageMin = 200

// TestChaosCheckerNegativeControl: the checker finds nothing wrong in a
// clean run's outcome and finds each doctored defect: a duplicate, a
// reorder, a lost ack, a phantom failure (failed as not written but in the
// log), an ErrOrderLost record in the log, a double callback and callbacks
// out of order.
func TestChaosCheckerNegativeControl(t *testing.T) {
	var clean outcome
	synctest.Test(t, func(t *testing.T) {
		c, n := memCluster(t, broker.Config{Topics: []broker.TopicConfig{{Name: "t", Partitions: 2, Window: 20}}})
		p := memProducer(t, c, n)
		l := newLedger("a", "t")
		l.produce(p, 0, 50, 100)
		l.produce(p, 1, 50, 100)
		require.True(t, l.waitAll(time.Minute))
		clean = collectOutcome(c, "t", 2, l)
	})
	require.Empty(t, checkOutcome(clean))
	require.Len(t, clean.logs[0], 50)

	copyOf := func(o outcome) outcome {
		d := outcome{results: map[recKey]recResult{}, order: map[string][]int{}, logs: map[int32][]logEntry{}}
		for k, r := range o.results {
			d.results[k] = r
		}
		for k, s := range o.order {
			d.order[k] = append([]int(nil), s...)
		}
		for k, s := range o.logs {
			d.logs[k] = append([]logEntry(nil), s...)
		}
		return d
	}
	k7 := recKey{"a", 0, 7}
	cases := []struct {
		name, want string
		doctor     func(o *outcome)
	}{
		{"duplicate", "dup:", func(o *outcome) { o.logs[0] = append(o.logs[0], o.logs[0][7]) }},
		{"reorder", "reorder:", func(o *outcome) { o.logs[0][7], o.logs[0][8] = o.logs[0][8], o.logs[0][7] }},
		{"lost ack", "lost:", func(o *outcome) { o.logs[0] = append(o.logs[0][:7], o.logs[0][8:]...) }},
		{"phantom failure", "cause:", func(o *outcome) {
			r := o.results[k7]
			r.err = &DeliveryError{Topic: "t", Partition: 0, Err: kerr.MessageTooLarge}
			o.results[k7] = r
		}},
		{"order lost but written", "cause:", func(o *outcome) {
			r := o.results[k7]
			r.err = &DeliveryError{Topic: "t", Partition: 0, FateUnknown: true, Err: ErrOrderLost}
			o.results[k7] = r
		}},
		{"double callback", "callbacks:", func(o *outcome) {
			r := o.results[k7]
			r.calls = 2
			o.results[k7] = r
		}},
		{"callbacks out of order", "callback order:", func(o *outcome) {
			s := o.order["a/1"]
			s[3], s[4] = s[4], s[3]
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := copyOf(clean)
			tc.doctor(&d)
			v := checkOutcome(d)
			require.NotEmpty(t, v)
			require.True(t, strings.HasPrefix(v[0], tc.want), "got %v", v)
		})
	}
	// A FateUnknown failure that is in the log is honest.
	d := copyOf(clean)
	r := d.results[k7]
	r.err = &DeliveryError{Topic: "t", FateUnknown: true, Err: errors.New("timeout")}
	d.results[k7] = r
	require.Empty(t, checkOutcome(d))
}

// TestChaosCheckerKeyless: keyless records are checked per the partition
// their callback names: a clean keyless run spread over both partitions
// passes, and a reorder within a partition or a record acked on one
// partition but written to the other is found.
func TestChaosCheckerKeyless(t *testing.T) {
	var clean outcome
	synctest.Test(t, func(t *testing.T) {
		c, n := memCluster(t, broker.Config{Topics: []broker.TopicConfig{{Name: "t", Partitions: 2, Window: 20}}})
		p := memProducer(t, c, n)
		l := newLedger("k", "t")
		l.produce(p, keyless, 200, 100)
		require.True(t, l.waitAll(time.Minute))
		require.Empty(t, l.failures())
		clean = collectOutcome(c, "t", 2, l)
	})
	require.Empty(t, checkOutcome(clean))
	require.Greater(t, len(clean.logs[0]), 2, "the sticky partitioner used partition 0")
	require.Greater(t, len(clean.logs[1]), 2, "the sticky partitioner used partition 1")
	require.Len(t, clean.results, 200)
	for k := range clean.results {
		require.NotEqual(t, keyless, k.part, "%v filed under its partition after its callback", k)
	}

	reordered := clean
	reordered.logs = map[int32][]logEntry{0: append([]logEntry(nil), clean.logs[0]...), 1: clean.logs[1]}
	reordered.logs[0][0], reordered.logs[0][1] = reordered.logs[0][1], reordered.logs[0][0]
	v := checkOutcome(reordered)
	require.NotEmpty(t, v)
	require.True(t, strings.HasPrefix(v[0], "reorder:"), "got %v", v)

	moved := clean
	e := clean.logs[0][len(clean.logs[0])-1]
	e.key.part = 1
	moved.logs = map[int32][]logEntry{0: clean.logs[0][:len(clean.logs[0])-1], 1: append(append([]logEntry(nil), clean.logs[1]...), e)}
	v = checkOutcome(moved)
	require.NotEmpty(t, v)
	require.True(t, strings.HasPrefix(v[0], "lost: partition 0"), "got %v", v)
}

// TestChaosBatchBoundsNegativeControl: the chaos checker's size rules
// (batchBounds) pass the batches a producer may send, among them a single
// record larger than batch.size, and find each oversize one fed to them:
// two records past batch.size (the bug of c3e6310: 1,106 bytes against
// 1,024), one record past max.request.size, two batches in one request past
// max.request.size, and two batches in one partition's records.
func TestChaosBatchBoundsNegativeControl(t *testing.T) {
	batch := func(values ...int) []byte {
		var b protocol.BatchBuilder
		for _, n := range values {
			b.Append(1700000000000, nil, make([]byte, n), nil)
		}
		out, err := b.Build(nil, protocol.BatchHeader{ProducerID: 1, BaseSequence: 0})
		require.NoError(t, err)
		return out
	}
	full, alone := batch(400, 400), batch(1500)
	require.LessOrEqual(t, len(full), 1024)
	require.Greater(t, len(alone), 1024)
	bug := batch(400, 400, 200)
	require.Greater(t, len(bug), 1024)
	for _, tc := range []struct {
		name     string
		requests [][][]byte
		want     string // "" for none
	}{
		{"within bounds", [][][]byte{{full}, {alone}, {full, full}, {batch(10)}}, ""},
		{"records past batch.size", [][][]byte{{full}, {bug}}, "a batch of 3 records is"},
		{"record past max.request.size", [][][]byte{{batch(2100)}}, "a batch of 1 record(s) is"},
		{"request past max.request.size", [][][]byte{{full, alone}}, "a request of 2 batches"},
		{"two batches in one partition", [][][]byte{{append(batch(10), batch(10)...)}}, "not one batch"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bb := newBatchBounds(1024, 2048)
			for _, r := range tc.requests {
				bb.request(0, r)
			}
			v, fullness := bb.result()
			if tc.want == "" {
				require.Empty(t, v)
				require.Equal(t, float64(len(full))/1024, fullness)
				return
			}
			require.Len(t, v, 1, "%v", v)
			require.True(t, strings.HasPrefix(v[0], "batch size: "), v[0])
			require.Contains(t, v[0], tc.want)
		})
	}
}
