package soak

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/longhaul-kafka/longhaul/internal/broker"
	"github.com/longhaul-kafka/longhaul/producer"
)

// Fault names, as counted in Result.Faults.
const (
	faultDrop      = "drop"        // DropProduceResponses: appended, response lost
	faultClose     = "close_after" // CloseAfterRequests: appended, connection closed
	faultKill      = "kill_conns"  // DropConnections
	faultMove      = "move"        // MoveLeader to a KIP-1269 node
	faultMoveOld   = "move_old"    // MoveLeader onto an old-mode node
	faultRestart   = "restart"     // RestartNode
	faultInject    = "inject"      // InjectError with a retriable code
	faultStall     = "stall"       // Stall past request.timeout.ms
	faultWindow    = "window"      // SetWindow at runtime
	faultExpire    = "expire"      // ExpireProducerIDs after a quiet period
	faultExpireNot = "expire_skipped"
)

// weighted fault choices; expiry runs on its own clock.
var faultWeights = []struct {
	name   string
	weight int
}{
	{faultDrop, 12}, {faultClose, 8}, {faultKill, 6}, {faultMove, 12}, {faultRestart, 4},
	{faultInject, 10}, {faultStall, 3}, {faultWindow, 6},
}

// retriableCodes are the errors InjectError answers with (no append).
var retriableCodes = []int16{
	kerr.NotEnoughReplicas.Code, kerr.NotLeaderForPartition.Code, kerr.LeaderNotAvailable.Code,
	kerr.RequestTimedOut.Code, kerr.NotEnoughReplicasAfterAppend.Code, kerr.UnknownTopicOrPartition.Code,
	kerr.FencedLeaderEpoch.Code,
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
	stallEnd  time.Time
	grace     time.Duration // for the broker to finish requests of abandoned connections
}

func (s *scheduler) exp(mean time.Duration) time.Duration {
	return time.Duration(s.rng.ExpFloat64() * float64(mean))
}

// run fires faults until end or ctx is done, then clears pending ones.
func (s *scheduler) run(ctx context.Context, end time.Time) {
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
	var err error
	switch name {
	case faultDrop:
		s.c.DropProduceResponses(node, 1+s.rng.IntN(5))
	case faultClose:
		s.c.CloseAfterRequests(node, 1+s.rng.IntN(10))
	case faultKill:
		s.c.DropConnections(node)
	case faultMove:
		if s.old[node] {
			name = faultMoveOld
		}
		err = s.w.moveLeader(p, node, func() error { return s.c.MoveLeader(p.topic, p.part, node) })
	case faultRestart:
		err = s.c.RestartNode(node)
	case faultInject:
		code := retriableCodes[s.rng.IntN(len(retriableCodes))]
		s.c.InjectError(p.topic, p.part, code, 1+s.rng.IntN(4))
	case faultStall:
		d := time.Duration(float64(s.cfg.RequestTimeout) * (1.2 + s.rng.Float64()))
		end := time.Now().Add(d)
		s.w.stalled(node, end)
		s.c.Stall(node, d)
		if end.After(s.stallEnd) {
			s.stallEnd = end
		}
	case faultWindow:
		n := windowChoices[s.rng.IntN(len(windowChoices))]
		err = s.w.setWindow(p.topic, n, func() error { return s.c.SetWindow(p.topic, n) })
	}
	if err != nil {
		s.log.Warn("soak: fault failed", "fault", name, "err", err)
		return
	}
	s.faults[name]++
	s.w.note(time.Now(), "%s node=%d %s[%d]", name, node, p.topic, p.part)
	s.log.Debug("soak: fault", "fault", name, "node", node, "topic", p.topic, "partition", p.part)
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
	time.Sleep(max(s.grace, expireIdle))
	s.c.ExpireProducerIDs()
	s.faults[faultExpire]++
	s.log.Debug("soak: producer ids expired")
}

// expireIdle is how long the producers sit flushed and idle before an
// expiry: more than the producer's idle re-arm of 1 s (producer/sender.go,
// idleRearm), with room for timer slop on a loaded machine.
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
