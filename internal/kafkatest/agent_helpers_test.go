package kafkatest

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/longhaul-kafka/longhaul/producer"
)

// windowConfig is KIP-1269's topic config, as the agent defines it.
const windowConfig = "producer.state.batches.to.retain"

// windowTopic returns topic configs with the given window (nil for 5, the
// default: nothing set).
func windowTopic(n int) map[string]string {
	if n == 5 {
		return nil
	}
	return map[string]string{windowConfig: fmt.Sprint(n)}
}

// sizedValue is value(i) padded with '.' to size bytes (at least 24).
func sizedValue(i, size int) []byte {
	v := value(i)
	for len(v) < size {
		v = append(v, '.')
	}
	return v
}

// topicRun produces n records of size bytes to partition 0 of one topic
// in the background and records each outcome, as lhRun does.
type topicRun struct {
	topic   string
	n, size int
	outcome []Outcome
	acked   int64
	failed  int64
	errs    map[string]int
	mu      sync.Mutex
	done    chan struct{}
	halt    atomic.Bool
}

// stop makes the run produce no more records; the ones already produced
// are still waited for.
func (r *topicRun) stop() { r.halt.Store(true) }

func startTopicRun(p *producer.Producer, topic string, n, size int) *topicRun {
	r := &topicRun{topic: topic, n: n, size: size, outcome: make([]Outcome, n), errs: map[string]int{}, done: make(chan struct{})}
	go func() {
		var wg sync.WaitGroup
		wg.Add(n)
		for i := range n {
			if r.halt.Load() {
				wg.Add(-(n - i))
				r.mu.Lock()
				r.n = i
				r.mu.Unlock()
				break
			}
			rec := &producer.Record{Topic: topic, Value: sizedValue(i, size)}
			rec.SetPartition(0)
			p.Produce(context.Background(), rec, func(_ *producer.Record, err error) {
				defer wg.Done()
				r.mu.Lock()
				defer r.mu.Unlock()
				switch {
				case err == nil:
					r.outcome[i] = Acked
					r.acked++
					return
				case producer.IsFateUnknown(err):
					r.outcome[i] = MaybeWritten
				default:
					r.outcome[i] = NotWritten
				}
				r.failed++
				r.errs[errKind(err)]++
			})
		}
		wg.Wait()
		close(r.done)
	}()
	return r
}

// ackedCount returns how many records are acknowledged so far.
func (r *topicRun) ackedCount() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.acked
}

// wait waits for every callback and returns what was sent (partition 0).
func (r *topicRun) wait(t testing.TB, timeout time.Duration) map[int32][]Sent {
	t.Helper()
	select {
	case <-r.done:
	case <-time.After(timeout):
		t.Fatalf("%s: only %d records acknowledged after %v", r.topic, r.ackedCount(), timeout)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	s := make([]Sent, r.n)
	for i := range r.n {
		s[i] = Sent{Value: sizedValue(i, r.size), Outcome: r.outcome[i]}
	}
	return map[int32][]Sent{0: s}
}

func (r *topicRun) failures() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.failed == 0 {
		return ""
	}
	return fmt.Sprintf("%d failed: %v", r.failed, r.errs)
}

// windowWatch samples producer Stats and keeps, per partition, the limits
// seen (with sample counts), the largest InFlight and every sample where
// InFlight exceeded Limit or Limit exceeded what the broker may announce.
type windowWatch struct {
	samples     int
	limits      map[tp]map[int]int
	limitOrder  map[tp][]int // distinct limits in the order they appeared
	maxInFlight map[tp]int
	violations  []string
	draining    map[tp]int // partitions above a lowered limit: their InFlight then
	// leaderLimits counts samples per partition, leader and limit.
	leaderLimits map[tp]map[int32]map[int]int
	// leaderOrder is each partition's sequence of distinct leaders.
	leaderOrder map[tp][]int32
}

// watchWindows samples p.Stats() every interval; maxWindow(topic) is the
// largest window the broker may announce for topic at that moment.
func watchWindows(p *producer.Producer, interval time.Duration, maxWindow func(topic string) int) (stop func() *windowWatch) {
	w := &windowWatch{limits: map[tp]map[int]int{}, limitOrder: map[tp][]int{}, maxInFlight: map[tp]int{}, draining: map[tp]int{},
		leaderLimits: map[tp]map[int32]map[int]int{}, leaderOrder: map[tp][]int32{}}
	quit, exited := make(chan struct{}), make(chan struct{})
	observe := func() {
		w.samples++
		for _, ps := range p.Stats().Partitions {
			k := tp{ps.Topic, ps.Partition}
			if w.limits[k] == nil {
				w.limits[k] = map[int]int{}
			}
			w.limits[k][ps.Limit]++
			if w.leaderLimits[k] == nil {
				w.leaderLimits[k] = map[int32]map[int]int{}
			}
			if w.leaderLimits[k][ps.Leader] == nil {
				w.leaderLimits[k][ps.Leader] = map[int]int{}
			}
			w.leaderLimits[k][ps.Leader][ps.Limit]++
			if o := w.leaderOrder[k]; ps.Leader >= 0 && (len(o) == 0 || o[len(o)-1] != ps.Leader) {
				w.leaderOrder[k] = append(o, ps.Leader)
			}
			lowered := false
			if o := w.limitOrder[k]; len(o) == 0 || o[len(o)-1] != ps.Limit {
				lowered = len(o) > 0 && ps.Limit < o[len(o)-1]
				w.limitOrder[k] = append(o, ps.Limit)
			}
			w.maxInFlight[k] = max(w.maxInFlight[k], ps.InFlight)
			// Batches sent under a larger limit stay in flight when it is
			// lowered; until they drain below it, none may be added.
			over := ps.InFlight > ps.Limit
			if d, ok := w.draining[k]; ok {
				if ps.InFlight > d {
					w.violations = append(w.violations, fmt.Sprintf("sample %d: %v InFlight grew %d -> %d above lowered Limit %d", w.samples, k, d, ps.InFlight, ps.Limit))
				}
				over = false
			}
			if ps.InFlight > ps.Limit && (lowered || w.draining[k] > 0) {
				w.draining[k] = ps.InFlight
				over = false
			} else {
				delete(w.draining, k)
			}
			if over || ps.InFlight > maxWindow(ps.Topic) || ps.Limit > maxWindow(ps.Topic) {
				w.violations = append(w.violations, fmt.Sprintf("sample %d: %v InFlight %d Limit %d (broker window at most %d)", w.samples, k, ps.InFlight, ps.Limit, maxWindow(ps.Topic)))
			}
		}
	}
	go func() {
		defer close(exited)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			observe()
			select {
			case <-quit:
				observe()
				return
			case <-tick.C:
			}
		}
	}()
	var once sync.Once
	return func() *windowWatch {
		once.Do(func() { close(quit) })
		<-exited
		return w
	}
}

func (w *windowWatch) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d samples", w.samples)
	for _, k := range slices.SortedFunc(maps.Keys(w.limits), func(a, b tp) int { return strings.Compare(a.String(), b.String()) }) {
		fmt.Fprintf(&b, "; %v limits %v (order %v) max in flight %d", k, w.limits[k], w.limitOrder[k], w.maxInFlight[k])
	}
	return b.String()
}

// checkDuplicate asserts a Produce partition response is the answer to a
// retried batch: no error (or DUPLICATE_SEQUENCE_NUMBER) and the batch's
// original base offset.
func isDuplicateAnswer(code int16, offset, original int64) bool {
	err := kerr.ErrorForCode(code)
	return (err == nil || err == kerr.DuplicateSequenceNumber) && offset == original
}
