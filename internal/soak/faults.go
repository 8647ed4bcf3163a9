package soak

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/longhaul-kafka/longhaul/internal/broker"
	"github.com/longhaul-kafka/longhaul/producer"
)

// Fault names, as counted in Result.Faults.
const (
	faultDrop      = "drop"         // DropProduceResponses: appended, response lost
	faultClose     = "close_after"  // CloseAfterRequests: appended, connection closed
	faultKill      = "kill_conns"   // DropConnections
	faultMove      = "move"         // MoveLeader to a KIP-1269 node
	faultMoveOld   = "move_old"     // MoveLeader onto an old-mode node
	faultMove24    = "move_kafka24" // MoveLeader onto the Kafka 2.4 node
	faultRestart   = "restart"      // RestartNode
	faultInject    = "inject"       // InjectError with a retriable code
	faultScript    = "script"       // ScriptAnswers: a burst from the whole vocabulary
	faultStall     = "stall"        // Stall past request.timeout.ms
	faultWindow    = "window"       // SetWindow at runtime
	faultExpire    = "expire"       // ExpireIdleProducerIDs after a quiet period
	faultExpireNot = "expire_skipped"
)

// weighted fault choices; expiry runs on its own clock.
var faultWeights = []struct {
	name   string
	weight int
}{
	{faultDrop, 12}, {faultClose, 8}, {faultKill, 6}, {faultMove, 12}, {faultRestart, 4},
	{faultInject, 6}, {faultScript, 10}, {faultStall, 3}, {faultWindow, 6},
}

// retriableCodes are the errors InjectError answers with (no append).
var retriableCodes = []int16{
	kerr.NotEnoughReplicas.Code, kerr.NotLeaderForPartition.Code, kerr.LeaderNotAvailable.Code,
	kerr.RequestTimedOut.Code, kerr.NotEnoughReplicasAfterAppend.Code, kerr.UnknownTopicOrPartition.Code,
	kerr.FencedLeaderEpoch.Code,
}

// naturalCodes are the codes the embedded broker answers on its own
// (internal/broker, 00_produce.go and pidstate.go); a record may fail with
// one of them on any partition. Any other broker code must have been
// injected or scripted for the record's partition.
var naturalCodes = []*kerr.Error{
	kerr.CorruptMessage, kerr.InvalidProducerEpoch, kerr.InvalidRecord, kerr.InvalidRequiredAcks,
	kerr.InvalidTxnState, kerr.MessageTooLarge, kerr.NotLeaderForPartition, kerr.OutOfOrderSequenceNumber,
	kerr.UnknownProducerID, kerr.UnknownTopicID, kerr.UnknownTopicOrPartition, kerr.UnsupportedVersion,
}

// windowChoices are the windows SetWindow picks from.
var windowChoices = []int{5, 8, 20, 50, 200}

// segmentEvery is how often the window check closes a segment.
const segmentEvery = 250 * time.Millisecond

// scheduler draws faults from its rng and applies them; one goroutine.
type scheduler struct {
	cfg       Config
	c         *broker.Cluster
	rng       *rand.Rand
	w         *windowTracker
	log       *slog.Logger
	nodes     int32
	topics    []string
	parts     int32
	old       map[int32]bool
	producers []*producer.Producer
	pause     *sync.RWMutex // held for writing while producers must not produce
	faults    map[string]int
	k24       map[int32]bool        // Kafka 2.4 nodes
	answered  map[tp]map[int16]bool // codes injected or scripted per partition
	watch     *stuckWatch
	stallEnd  time.Time
	grace     time.Duration // for the broker to finish requests of abandoned connections
}

func (s *scheduler) exp(mean time.Duration) time.Duration {
	return time.Duration(s.rng.ExpFloat64() * float64(mean))
}

// run fires faults until end or ctx is done, then clears pending ones.
func (s *scheduler) run(ctx context.Context, end time.Time) {
	if s.cfg.hideStall > 0 {
		t := time.AfterFunc(300*time.Millisecond, func() { s.c.Stall(0, s.cfg.hideStall) })
		defer t.Stop()
	}
	now := time.Now()
	nextFault := now.Add(s.exp(s.cfg.FaultInterval))
	nextTick := now.Add(segmentEvery)
	nextExpire := time.Time{}
	if s.cfg.ExpireInterval > 0 {
		nextExpire = now.Add(s.exp(s.cfg.ExpireInterval))
	}
	for {
		next := earliest(end, nextFault, nextTick, nextExpire)
		if !sleepUntil(ctx, next) {
			break
		}
		now = time.Now()
		if !now.Before(end) {
			break
		}
		switch {
		case !nextExpire.IsZero() && !now.Before(nextExpire):
			s.expire(ctx)
			nextExpire = time.Now().Add(s.exp(s.cfg.ExpireInterval))
		case !now.Before(nextFault):
			s.fault()
			nextFault = time.Now().Add(s.exp(s.cfg.FaultInterval))
		default:
			s.w.closeSegment(now)
			s.watch.check(now)
			nextTick = now.Add(segmentEvery)
		}
	}
	s.clear()
}

// clear cancels pending faults and waits out stalls.
func (s *scheduler) clear() {
	for n := range s.nodes {
		s.c.DropProduceResponses(n, 0)
		s.c.CloseAfterRequests(n, 0)
	}
	for _, t := range s.topics {
		for p := range s.parts {
			s.c.InjectError(t, p, 0, 0)
		}
	}
	time.Sleep(time.Until(s.stallEnd))
}

func (s *scheduler) fault() {
	total := 0
	for _, f := range faultWeights {
		total += f.weight
	}
	k := s.rng.IntN(total)
	name := faultWeights[0].name
	for _, f := range faultWeights {
		if k < f.weight {
			name = f.name
			break
		}
		k -= f.weight
	}
	node := int32(s.rng.IntN(int(s.nodes)))
	p := tp{s.topics[s.rng.IntN(len(s.topics))], int32(s.rng.IntN(int(s.parts)))}
	rt, backoff := s.cfg.RequestTimeout, retryBackoffMax
	// What the fault may cost in time without progress, and whom
	// (see stuck.go): the partitions node leads now, p, or everyone.
	cost := faultCost{at: time.Now()}
	onNode := func() []tp { return s.w.ledBy(node) }
	detail := ""
	var err error
	switch name {
	case faultDrop:
		n := 1 + s.rng.IntN(5)
		s.c.DropProduceResponses(node, n)
		cost.cost, cost.parts = time.Duration(n)*rt, onNode()
		detail = fmt.Sprintf(" n=%d", n)
	case faultClose:
		n := 1 + s.rng.IntN(10)
		s.c.CloseAfterRequests(node, n)
		cost.cost, cost.parts = rt+reconnectAllowance, onNode()
	case faultKill:
		s.c.DropConnections(node)
		cost.cost, cost.parts = rt+reconnectAllowance, onNode()
	case faultMove:
		switch {
		case s.k24[node]:
			name = faultMove24
		case s.old[node]:
			name = faultMoveOld
		}
		err = s.w.moveLeader(p, node, func() error { return s.c.MoveLeader(p.topic, p.part, node) })
		cost.cost, cost.parts = rt+backoff+reconnectAllowance, []tp{p}
	case faultRestart:
		err = s.c.RestartNode(node)
		cost.cost = rt + reconnectAllowance // every partition: metadata and bumps may wait for the node
	case faultInject:
		code := retriableCodes[s.rng.IntN(len(retriableCodes))]
		n := 1 + s.rng.IntN(4)
		s.c.InjectError(p.topic, p.part, code, n)
		s.answer(p, code)
		cost.cost, cost.parts = time.Duration(n)*backoff+rt, []tp{p}
		detail = fmt.Sprintf(" %s x%d", kerr.ErrorForCode(code), n)
	case faultScript:
		answers, names, couples := s.drawScript(p)
		s.c.ScriptAnswers(p.topic, p.part, answers...)
		cost.cost, cost.parts = time.Duration(len(answers))*(backoff+rt), []tp{p}
		cost.couples = couples
		detail = " " + strings.Join(names, ",")
	case faultStall:
		d := time.Duration(float64(s.cfg.RequestTimeout) * (1.2 + s.rng.Float64()))
		end := time.Now().Add(d)
		s.w.stalled(node, end)
		s.c.Stall(node, d)
		if end.After(s.stallEnd) {
			s.stallEnd = end
		}
		cost.cost = d + rt // every partition: a bump may wait for the node
		detail = fmt.Sprintf(" %v", d.Round(time.Millisecond))
	case faultWindow:
		n := windowChoices[s.rng.IntN(len(windowChoices))]
		err = s.w.setWindow(p.topic, n, func() error { return s.c.SetWindow(p.topic, n) })
		cost.cost = backoff
		for q := range s.parts {
			cost.parts = append(cost.parts, tp{p.topic, q})
		}
	}
	if err != nil {
		s.log.Warn("soak: fault failed", "fault", name, "err", err)
		return
	}
	cost.what = fmt.Sprintf("%s node=%d %s[%d]%s", name, node, p.topic, p.part, detail)
	s.watch.add(cost)
	s.faults[name]++
	s.w.note(cost.at, "%s", cost.what)
	s.log.Debug("soak: fault", "fault", name, "node", node, "topic", p.topic, "partition", p.part, "detail", detail)
}

// drawScript draws a burst of 1 to 4 answers for p's next batches: ok,
// appended-then-error (NOT_LEADER_OR_FOLLOWER, REQUEST_TIMED_OUT,
// NOT_ENOUGH_REPLICAS_AFTER_APPEND, DUPLICATE_SEQUENCE_NUMBER), or any
// produce error code without appending, non-retriable ones included, as
// producer/chaos_test.go draws them. couples is true when an answer may
// make the producer bump its epoch (a code it does not simply retry),
// which holds every partition until in-doubt batches are resolved.
func (s *scheduler) drawScript(p tp) (answers []broker.Answer, names []string, couples bool) {
	for range 1 + s.rng.IntN(4) {
		switch s.rng.IntN(4) {
		case 0:
			answers = append(answers, broker.Answer{Mode: broker.Normal})
			names = append(names, "ok")
		case 1:
			e := broker.AfterAppendCodes[s.rng.IntN(len(broker.AfterAppendCodes))]
			answers = append(answers, broker.Answer{Code: e.Code, Mode: broker.AppendThenFail})
			names = append(names, e.Message+"(appended)")
			s.answer(p, e.Code)
		default:
			e := broker.ProduceErrorCodes[s.rng.IntN(len(broker.ProduceErrorCodes))]
			answers = append(answers, broker.Answer{Code: e.Code, Mode: broker.Refuse})
			names = append(names, e.Message)
			s.answer(p, e.Code)
			if !slices.Contains(retriableCodes, e.Code) {
				couples = true
			}
		}
	}
	return answers, names, couples
}

// answer records that p's batches may be answered code: a record of p
// failing with code is then explained.
func (s *scheduler) answer(p tp, code int16) {
	m := s.answered[p]
	if m == nil {
		m = map[int16]bool{}
		s.answered[p] = m
	}
	m[code] = true
}

// expire drops all producer state (KIP-854) after a quiet period, so no
// batch whose response was lost can be retried across the expiry: see the
// package doc. If the producers cannot be flushed in time the expiry is
// skipped and counted as expire_skipped.
func (s *scheduler) expire(ctx context.Context) {
	s.pause.Lock()
	defer s.pause.Unlock()
	s.clear()
	time.Sleep(s.grace) // requests of abandoned connections finish
	fctx, cancel := context.WithTimeout(ctx, s.cfg.DeliveryTimeout+10*time.Second)
	defer cancel()
	for i, p := range s.producers {
		if err := p.Flush(fctx); err != nil {
			s.log.Warn("soak: flush before expiry failed; expiry skipped", "producer", i, "err", err)
			s.faults[faultExpireNot]++
			return
		}
	}
	// Expire only after every partition sat idle longer than the
	// producers' idle re-arm (1 s): real brokers expire a producer id only
	// after producer.id.expiration.ms without writes, so the producer's
	// first batch after the pause goes alone and cannot be overtaken.
	// Only ids idle longer than the re-arm expire, as a broker expires
	// only ids idle past producer.id.expiration.ms.
	time.Sleep(max(s.grace, expireIdle))
	s.c.ExpireIdleProducerIDs(idleRearm)
	s.faults[faultExpire]++
	s.log.Debug("soak: producer ids expired")
}

// idleRearm is the producers' longhaul.idle.rearm.ms (producer.IdleRearm):
// a partition with no acknowledgement for this long sends its next batch
// alone. Expiry drops only ids idle longer than it.
const idleRearm = time.Second

// expireIdle is how long the producers sit flushed and idle before an
// expiry: more than idleRearm, with room for timer slop on a loaded
// machine.
const expireIdle = 1200 * time.Millisecond

func earliest(ts ...time.Time) time.Time {
	var e time.Time
	for _, t := range ts {
		if !t.IsZero() && (e.IsZero() || t.Before(e)) {
			e = t
		}
	}
	return e
}

// sleepUntil waits until t; false if ctx is done first.
func sleepUntil(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err() == nil
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return true
	case <-ctx.Done():
		return false
	}
}
