package producer

// Tests that Stats, PartitionStats, NodeStats and InFlightLimit report what
// their docs say the producer did.

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/longhaul-kafka/longhaul/internal/broker"
)

// TestStatsFieldsMeanWhatTheySay checks the documented meaning of the
// fields of Stats, PartitionStats and NodeStats, and of InFlightLimit,
// against what the producer did: two topics over two nodes, a first batch
// in flight (gated), a batch retried after NOT_ENOUGH_REPLICAS, a record
// failed by the broker after it was accepted, one rejected before (not
// counted), and a partition whose leader metadata does not name.
func TestStatsFieldsMeanWhatTheySay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, n := memCluster(t, broker.Config{Nodes: 2, RTT: 10 * time.Millisecond, Topics: []broker.TopicConfig{
			{Name: "b", Partitions: 3, Window: 10}, {Name: "a", Partitions: 2, Window: 12},
		}})
		c.RewriteMetadata(func(m *kmsg.MetadataResponse) {
			for i := range m.Topics {
				if m.Topics[i].Topic != nil && *m.Topics[i].Topic == "b" {
					for j := range m.Topics[i].Partitions {
						if m.Topics[i].Partitions[j].Partition == 2 {
							m.Topics[i].Partitions[j].Leader = -1
						}
					}
				}
			}
		})
		p := memProducer(t, c, n)
		st := p.Stats()
		require.Equal(t, int64(-1), st.ProducerID, "before InitProducerId answered")
		require.Empty(t, st.Partitions)

		send := func(topic string, part int32) *Record { return toPartition(topic, part, []byte("v")) }
		// A first batch to b/1 (led by node 1): in flight and gated
		// until its answer 10 ms later.
		firstErr := make(chan error, 1)
		p.Produce(context.Background(), send("b", 1), func(_ *Record, err error) { firstErr <- err })
		var inFlight PartitionStats
		for range 100 {
			time.Sleep(time.Millisecond)
			for _, ps := range p.Stats().Partitions {
				if ps.Topic == "b" && ps.Partition == 1 && ps.InFlight > 0 {
					inFlight = ps
				}
			}
			if inFlight.InFlight > 0 {
				break
			}
		}
		require.Equal(t, 1, inFlight.InFlight, "batches in flight now")
		require.True(t, inFlight.Gated, "a first batch: at most one in flight until one is acked")
		require.Equal(t, 5, inFlight.Limit, "5 until learned from a ProduceResponse")
		nodes := p.Stats().Nodes
		require.Len(t, nodes, 2)
		require.Equal(t, 1, nodes[1].RequestsInFlight)
		require.Zero(t, nodes[0].RequestsInFlight)
		require.NoError(t, <-firstErr)

		c.InjectError("a", 0, kerr.NotEnoughReplicas.Code, 1)
		require.NoError(t, p.ProduceSync(context.Background(), send("a", 0)).FirstErr(), "retried")
		c.InjectError("a", 1, kerr.InvalidRecord.Code, 1)
		require.Error(t, p.ProduceSync(context.Background(), send("a", 1)).FirstErr(), "failed by the broker")
		require.ErrorIs(t, p.ProduceSync(context.Background(), &Record{Value: []byte("no topic")}).FirstErr(), ErrInvalidRecord)

		st = p.Stats()
		require.GreaterOrEqual(t, st.ProducerID, int64(0))
		require.Equal(t, int64(2), st.RecordsSent, "records acknowledged: b/1 and a/0")
		require.Equal(t, int64(1), st.RecordsFailed, "the record the broker failed, not the one rejected before")
		require.Equal(t, int64(4), st.BatchesSent, "b/1, a/0 twice, a/1")
		require.Equal(t, int64(1), st.BatchesRetried)

		type key struct {
			topic string
			part  int32
		}
		var order []key
		got := map[key]PartitionStats{}
		for _, ps := range st.Partitions {
			order = append(order, key{ps.Topic, ps.Partition})
			got[key{ps.Topic, ps.Partition}] = ps
		}
		require.Equal(t, []key{{"a", 0}, {"a", 1}, {"b", 0}, {"b", 1}, {"b", 2}}, order, "sorted by topic, then partition")
		for k, ps := range got {
			assert.Zero(t, ps.InFlight, "%v", k)
			acked := k == key{"a", 0} || k == key{"b", 1}
			assert.Equal(t, !acked, ps.Gated, "%v: gated until a batch is acked", k)
			if k.part < 2 || k.topic == "a" {
				assert.Equal(t, k.part%2, ps.Leader, "%v: partition p led by node p%%2", k)
			}
		}
		assert.Equal(t, int32(-1), got[key{"b", 2}].Leader, "leader unknown")
		assert.Equal(t, 12, got[key{"a", 0}].Limit, "the broker's window, once learned")
		assert.Equal(t, 10, got[key{"b", 1}].Limit)
		assert.Equal(t, 5, got[key{"b", 0}].Limit, "never produced to: 5")
		assert.Equal(t, int64(2), got[key{"a", 0}].BatchesSent, "retries included")
		assert.Equal(t, int64(1), got[key{"a", 0}].BatchesRetried)
		assert.Equal(t, int64(1), got[key{"a", 1}].BatchesSent)
		assert.Zero(t, got[key{"a", 1}].BatchesRetried)
		assert.Zero(t, got[key{"b", 0}].BatchesSent)

		require.Len(t, st.Nodes, 2)
		for i, nd := range st.Nodes {
			assert.Equal(t, int32(i), nd.ID, "sorted by id")
			assert.True(t, nd.Connected)
			assert.Zero(t, nd.RequestsInFlight)
		}
		assert.Equal(t, 12, p.InFlightLimit("a", 0))
		assert.Equal(t, 5, p.InFlightLimit("b", 0), "not learned")
		assert.Equal(t, 5, p.InFlightLimit("a", 7), "a partition it does not know")
		assert.Equal(t, 5, p.InFlightLimit("nope", 0), "a topic it does not know")
	})
}

// TestProduceRequestsPerBatches: BatchesSent per ProduceRequests is how
// many partitions' batches a request carried on average: records for
// three partitions of one node flushed together go in one request of
// three batches; then one partition alone takes a request of one.
func TestProduceRequestsPerBatches(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, n := memCluster(t, broker.Config{RTT: 10 * time.Millisecond, Topics: []broker.TopicConfig{{Name: "t", Partitions: 3}}})
		p := memProducer(t, c, n, Linger(time.Minute), DeliveryTimeout(2*time.Minute))
		require.NoError(t, p.ProduceSync(context.Background(), &Record{Topic: "t", Key: []byte("k"), Value: []byte("metadata")}).FirstErr())
		st := p.Stats()
		r0, b0 := st.ProduceRequests, st.BatchesSent
		for part := range int32(3) {
			r := &Record{Topic: "t", Value: []byte("v")}
			r.SetPartition(part)
			p.Produce(context.Background(), r, func(_ *Record, err error) { assert.NoError(t, err) })
		}
		require.NoError(t, p.Flush(context.Background()))
		st = p.Stats()
		require.Equal(t, int64(1), st.ProduceRequests-r0)
		require.Equal(t, int64(3), st.BatchesSent-b0, "three partitions' batches in one request")
		r := &Record{Topic: "t", Value: []byte("v")}
		r.SetPartition(1)
		require.NoError(t, p.ProduceSync(context.Background(), r).FirstErr())
		st = p.Stats()
		require.Equal(t, int64(2), st.ProduceRequests-r0)
		require.Equal(t, int64(4), st.BatchesSent-b0)
	})
}

// TestLimitUnderMaxWindow: InFlightLimit and PartitionStats.Limit report
// the limit the producer applies, longhaul.max.window included (as
// HookWindowChanged's "every partition starts at 5 (or max.window if
// lower)" says): below the default before the window is learned, and the
// cap, not the broker's window, after. Their docs said "5 until learned,
// then the broker's window".
func TestLimitUnderMaxWindow(t *testing.T) {
	c := startCluster(t, broker.Config{Topics: []broker.TopicConfig{{Name: "t", Partitions: 2, Window: 20}}})
	p := newTestProducer(t, c, MaxWindow(3))
	r := &Record{Topic: "t", Value: []byte("v")}
	r.SetPartition(0)
	require.NoError(t, p.ProduceSync(t.Context(), r).FirstErr())
	assert.Equal(t, 3, p.InFlightLimit("t", 0), "learned 20, capped at 3")
	assert.Equal(t, 3, p.InFlightLimit("t", 1), "not learned: 5, capped at 3")
	assert.Equal(t, 5, p.InFlightLimit("t", 2), "a partition it does not know")
	limits := map[int32]int{}
	for _, ps := range p.Stats().Partitions {
		limits[ps.Partition] = ps.Limit
	}
	assert.Equal(t, map[int32]int{0: 3, 1: 3}, limits)

	// Without the cap the same steps give the documented 5 and the
	// broker's window: the cap is what changed them.
	q := newTestProducer(t, c)
	require.NoError(t, q.ProduceSync(t.Context(), r).FirstErr())
	assert.Equal(t, 20, q.InFlightLimit("t", 0))
	assert.Equal(t, 5, q.InFlightLimit("t", 1))
}

// TestRecordsFailedCountsEveryAcceptedFailure: Stats.RecordsFailed is
// "records failed after they were accepted". Records accepted while their
// topic's partitions were unknown that then failed (max.block.ms,
// ErrTopicMetadata), and buffered records ProduceSync withdrew when its
// context ended, were accepted (HookRecordDone saw them) but not counted:
// only failed batches were. On virtual time: on a loaded machine the
// real-time version's topic "t" could still lack its metadata after
// max.block.ms (50 ms), failing the second record for that instead.
func TestRecordsFailedCountsEveryAcceptedFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, n := memCluster(t, broker.Config{Topics: []broker.TopicConfig{{Name: "t", Partitions: 1}}})
		var done atomic.Int64
		p := memProducer(t, c, n, MaxBlock(50*time.Millisecond), Linger(10*time.Second), DeliveryTimeout(time.Minute), Hooks(recordDoneFunc(func(*Record, error) { done.Add(1) })))

		res := p.ProduceSync(t.Context(), &Record{Topic: "nope", Value: []byte("v")})
		require.ErrorIs(t, res.FirstErr(), ErrTopicMetadata)
		assert.Equal(t, int64(1), p.Stats().RecordsFailed, "failed waiting for its topic's partitions")

		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		defer cancel()
		res = p.ProduceSync(ctx, &Record{Topic: "t", Value: []byte("v")}) // lingers: withdrawn
		require.ErrorIs(t, res.FirstErr(), context.DeadlineExceeded)
		require.False(t, IsFateUnknown(res.FirstErr()))
		require.NoError(t, p.Flush(t.Context()))
		assert.Equal(t, int64(2), p.Stats().RecordsFailed, "withdrawn by ProduceSync")
		assert.Equal(t, int64(2), done.Load(), "both were accepted: HookRecordDone saw them")
		assert.Zero(t, p.Stats().RecordsSent)
	})
}

// recordDoneFunc adapts a function to HookRecordDone.
type recordDoneFunc func(*Record, error)

func (f recordDoneFunc) OnRecordDone(r *Record, err error) { f(r, err) }

// TestPartitionStatsDraining checks each sentence of PartitionStats.Draining
// by watching one partition's stats every virtual millisecond: three
// batches sent 5 ms apart over a 20 ms round trip, the first refused with
// NOT_ENOUGH_REPLICAS. While the two others are in flight the partition is
// Draining, InFlight counts them, and nothing is sent (neither the retry
// nor a record produced meanwhile); once they are back it is Gated, not
// Draining, with one batch in flight until an ack opens it. A reset while
// it drains (what a re-created topic does, topicRecreated) arms the
// gate at once: Gated and Draining together.
func TestPartitionStatsDraining(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, n := memCluster(t, broker.Config{RTT: 20 * time.Millisecond, Topics: []broker.TopicConfig{{Name: "t", Partitions: 1, Window: 20}}})
		p := memProducer(t, c, n)
		require.NoError(t, p.ProduceSync(t.Context(), toPartition("t", 0, []byte("open"))).FirstErr())
		part := func() PartitionStats {
			ps := p.Stats().Partitions
			require.Len(t, ps, 1)
			return ps[0]
		}
		require.False(t, part().Gated, "acked: open")
		c.ScriptAnswers("t", 0, broker.Answer{Code: kerr.NotEnoughReplicas.Code})

		var errs []error
		var mu sync.Mutex
		done := func(_ *Record, err error) { mu.Lock(); errs = append(errs, err); mu.Unlock() }
		type seen struct {
			PartitionStats
			at    int
			reset bool // the partition was reset before this sample
		}
		var log []seen
		reset := false
		for ms := range 200 {
			if ms < 15 && ms%5 == 0 {
				p.Produce(t.Context(), toPartition("t", 0, []byte("v")), done)
			}
			time.Sleep(time.Millisecond)
			synctest.Wait()
			ps := part()
			log = append(log, seen{ps, ms, reset})
			if ps.Draining && ps.InFlight == 1 && !reset {
				// Produced while draining: it waits too.
				p.Produce(t.Context(), toPartition("t", 0, []byte("meanwhile")), done)
				p.acc.mu.Lock()
				adm := p.acc.topics["t"].ts.parts[0].admission
				p.acc.mu.Unlock()
				p.limiter.Reset(adm)
				reset = true
			}
		}
		require.NoError(t, p.Flush(t.Context()))
		for _, err := range errs {
			assert.NoError(t, err)
		}

		first := -1
		for i, s := range log {
			if s.Draining {
				if first < 0 {
					first = i
				}
				assert.Positive(t, s.InFlight, "at %d ms: draining counts the batches in flight", s.at)
				assert.Equal(t, log[first].BatchesSent, s.BatchesSent, "at %d ms: nothing sent while draining", s.at)
				assert.Equal(t, s.reset, s.Gated, "at %d ms: gated while draining only once reset", s.at)
			}
		}
		require.GreaterOrEqual(t, first, 0, "the partition drained")
		assert.Equal(t, 2, log[first].InFlight, "the two batches sent after the refused one")
		last := first
		for last < len(log) && log[last].Draining {
			last++
		}
		require.Less(t, last, len(log), "draining ended")
		require.True(t, log[last-1].reset, "the reset came while draining")
		assert.True(t, log[last].Gated, "drained: gated")
		var sentGated bool
		for _, s := range log[last:] {
			if s.Gated {
				assert.LessOrEqual(t, s.InFlight, 1, "at %d ms: one at a time while gated", s.at)
				sentGated = sentGated || s.InFlight == 1
			}
		}
		assert.True(t, sentGated, "the retry went alone")
		assert.False(t, log[len(log)-1].Gated, "acked again: open")
		assert.Greater(t, part().BatchesSent, log[first].BatchesSent, "sent again")
	})
}

// TestStatsProducerIdentity: ProducerID and ProducerEpoch are the
// identity InitProducerId gave, and EpochBumps counts the identities taken
// after the first to recover: OUT_OF_ORDER_SEQUENCE_NUMBER on the oldest
// batch bumps the epoch (same id, epoch one higher), INVALID_PRODUCER_EPOCH
// takes a new producer id; both count. Stats is read all along from
// another goroutine while records flow (under -race: safe to call from any
// goroutine).
func TestStatsProducerIdentity(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, n := memCluster(t, broker.Config{RTT: 5 * time.Millisecond, Topics: []broker.TopicConfig{{Name: "t", Partitions: 1}}})
		p := memProducer(t, c, n)
		stop := make(chan struct{})
		reads := make(chan int)
		go func() {
			k := 0
			for {
				select {
				case <-stop:
					reads <- k
					return
				default:
				}
				_ = p.Stats()
				k++
				time.Sleep(time.Millisecond)
			}
		}()
		require.NoError(t, p.ProduceSync(t.Context(), toPartition("t", 0, []byte("first"))).FirstErr())
		st := p.Stats()
		id := st.ProducerID
		require.GreaterOrEqual(t, id, int64(0))
		assert.Zero(t, st.ProducerEpoch)
		assert.Zero(t, st.EpochBumps)

		c.InjectError("t", 0, kerr.OutOfOrderSequenceNumber.Code, 1)
		require.NoError(t, p.ProduceSync(t.Context(), toPartition("t", 0, []byte("gap"))).FirstErr())
		st = p.Stats()
		assert.Equal(t, id, st.ProducerID, "bumped: the same id")
		assert.Equal(t, int16(1), st.ProducerEpoch, "epoch one higher")
		assert.Equal(t, int64(1), st.EpochBumps)

		c.InjectError("t", 0, kerr.InvalidProducerEpoch.Code, 1)
		require.NoError(t, p.ProduceSync(t.Context(), toPartition("t", 0, []byte("fenced"))).FirstErr())
		st = p.Stats()
		assert.NotEqual(t, id, st.ProducerID, "a new producer id")
		assert.Equal(t, int64(2), st.EpochBumps)
		close(stop)
		assert.Positive(t, <-reads)
	})
}
