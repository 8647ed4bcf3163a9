package producer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/longhaul-kafka/longhaul/internal/broker"
)

// Topology changes an operator makes (issue 20, items 3 and 4): a topic
// deleted and created again (a new topic id, maybe fewer partitions) and
// a topic grown with CreatePartitions, on virtual time against the
// embedded broker.

// Issue 20, item 3: a topic deleted and re-created while producing. Produce
// v13+ names topics by id, so batches sent to the old id get
// UNKNOWN_TOPIC_ID; the producer refreshes metadata at once and goes on
// with the new id. Records acked on the old topic are gone with it;
// records not yet acked are written to the new one exactly once, in order.
// The new topic's partitions are new logs without our state: the first
// batch to each goes alone (the first-batch gate) — scripted here to be
// refused, which would let a second batch in flight land first and cost
// ErrOrderLost — and its leader epochs start again at 0 (partition 0 had
// moved to node 1, epoch 1; the new partition 0 is led by node 0 at epoch
// 0, which must not be dismissed as stale).
func TestRecreatedTopicContinuesWithNewIDExactlyOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		topic := broker.TopicConfig{Name: "t", Partitions: 2, Window: 20}
		c, n := memCluster(t, broker.Config{Nodes: 2, RTT: 20 * time.Millisecond, Topics: []broker.TopicConfig{topic}})
		p := memProducer(t, c, n, Linger(0))
		old := newLedger("old", "t")
		warmUp(t, p, old, 0, 1)
		require.NoError(t, c.MoveLeader("t", 0, 1))
		more := newLedger("old2", "t")
		more.produce(p, 0, 50, 100) // learns the move (KIP-951 hint)
		require.True(t, more.waitAll(time.Minute))
		require.Empty(t, more.failures())
		oldID, _ := c.TopicID("t")

		// Delete while batches are in flight, then re-create at once.
		l := newLedger("new", "t")
		l.produce(p, 0, 100, 100)
		l.produce(p, 1, 100, 100)
		time.Sleep(5 * time.Millisecond)
		gone, err := c.DeleteTopic("t")
		require.NoError(t, err)
		require.NoError(t, c.CreateTopic(topic))
		newID, _ := c.TopicID("t")
		require.NotEqual(t, oldID, newID)
		for part := range int32(2) {
			c.ScriptAnswers("t", part, broker.Answer{Code: kerr.NotEnoughReplicas.Code})
		}
		start := time.Now()
		require.True(t, l.waitAll(time.Minute), "callbacks")
		require.Empty(t, firstN(l.failures(), 3), "records not acked before the deletion")
		require.Less(t, time.Since(start), 2*time.Second, "recovered at once, not after metadata.max.age.ms or delivery.timeout.ms")

		// Every record of l acked is in the old log or the new one, each
		// log holds it at most once and in order; with no response lost,
		// none is in both.
		o := collectOutcome(c, "t", 2, l)
		o.addDeleted(gone)
		require.Empty(t, checkOutcome(o))
		for part, entries := range o.logs {
			for _, e := range entries {
				for _, x := range o.gone[0][part] {
					require.NotEqual(t, e.key, x.key, "written to both topics")
				}
			}
		}
		require.NotEmpty(t, o.gone[0][0], "records acked on the old topic")
		require.NotEmpty(t, o.logs[0], "records went to the new topic")
		require.NotEmpty(t, o.logs[1], "records went to the new topic")
		require.Equal(t, 0, c.PendingAnswers("t", 0), "the scripted refusal was used")
	})
}

// keyedLedger produces keyed records and keeps their callbacks' results.
type keyedLedger struct {
	mu   sync.Mutex
	wg   sync.WaitGroup
	errs map[string]error
	part map[string]int32
}

func (k *keyedLedger) produce(p *Producer, prefix string, n int) {
	for i := range n {
		key := fmt.Sprintf("%s-%d", prefix, i)
		k.wg.Add(1)
		p.Produce(context.Background(), &Record{Topic: "t", Key: []byte(key), Value: make([]byte, 100)}, func(r *Record, err error) {
			k.mu.Lock()
			k.errs[key], k.part[key] = err, r.Partition()
			k.mu.Unlock()
			k.wg.Done()
		})
	}
}

func (k *keyedLedger) wait(t *testing.T) {
	done := make(chan struct{})
	go func() { k.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("callbacks missing")
	}
}

// Issue 20, item 4: a topic re-created with fewer partitions. Keyed
// records map over the current count, as the Java client does; records
// waiting for a partition that no longer exists fail with
// ErrPartitionGone, naming it, instead of retrying until
// delivery.timeout.ms; records for the partitions that remain are
// delivered.
func TestRecreatedWithFewerPartitionsMapsKeysOverCurrentCount(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, n := memCluster(t, broker.Config{Nodes: 2, RTT: 20 * time.Millisecond,
			Topics: []broker.TopicConfig{{Name: "t", Partitions: 4, Window: 20}}})
		p := memProducer(t, c, n)
		warm := &keyedLedger{errs: map[string]error{}, part: map[string]int32{}}
		warm.produce(p, "warm", 200)
		warm.wait(t)

		_, err := c.DeleteTopic("t")
		require.NoError(t, err)
		waiting := &keyedLedger{errs: map[string]error{}, part: map[string]int32{}}
		waiting.produce(p, "waiting", 200) // placed over 4 partitions, refused by the deleted id
		time.Sleep(200 * time.Millisecond)
		require.NoError(t, c.CreateTopic(broker.TopicConfig{Name: "t", Partitions: 2, Window: 20}))
		start := time.Now()
		waiting.wait(t)
		require.Less(t, time.Since(start), 2*time.Second, "outcomes at once, not at delivery.timeout.ms")
		gone, kept := 0, 0
		for key, err := range waiting.errs {
			part := keyPartition([]byte(key), 4)
			if part >= 2 {
				gone++
				require.ErrorIs(t, err, ErrPartitionGone, key)
				var de *DeliveryError
				require.True(t, errors.As(err, &de))
				require.Equal(t, part, de.Partition)
				require.Contains(t, err.Error(), fmt.Sprintf("t[%d]", part))
				continue
			}
			kept++
			require.NoError(t, err, key)
		}
		require.Positive(t, gone)
		require.Positive(t, kept)

		after := &keyedLedger{errs: map[string]error{}, part: map[string]int32{}}
		after.produce(p, "after", 200)
		after.wait(t)
		for key, err := range after.errs {
			require.NoError(t, err, key)
			require.Equal(t, keyPartition([]byte(key), 2), after.part[key], key)
		}
		for part := range int32(2) {
			for _, r := range c.Records("t", part) {
				require.Equal(t, part, keyPartition(r.Key, 2), "key %s in the log of partition %d", r.Key, part)
			}
		}
		// A partition asked for by number that no longer exists is
		// refused at Produce with a clear error.
		r := &Record{Topic: "t", Value: []byte("v")}
		r.SetPartition(3)
		err = p.ProduceSync(context.Background(), r).FirstErr()
		require.ErrorIs(t, err, ErrInvalidRecord)
		require.Contains(t, err.Error(), "partitions 0..1")
	})
}

// Issue 20, item 4: partitions added with CreatePartitions are used once
// metadata names them: keyed records map over the new count, keyless ones
// reach the new partitions.
func TestCreatePartitionsNewPartitionsUsed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, n := memCluster(t, broker.Config{Nodes: 2, RTT: 20 * time.Millisecond,
			Topics: []broker.TopicConfig{{Name: "t", Partitions: 2, Window: 20}}})
		p := memProducer(t, c, n, MetadataMaxAge(500*time.Millisecond))
		before := &keyedLedger{errs: map[string]error{}, part: map[string]int32{}}
		before.produce(p, "before", 100)
		before.wait(t)
		require.NoError(t, c.CreatePartitions("t", 5))
		time.Sleep(time.Second) // metadata.max.age.ms passes
		after := &keyedLedger{errs: map[string]error{}, part: map[string]int32{}}
		after.produce(p, "after", 200)
		after.wait(t)
		for key, err := range after.errs {
			require.NoError(t, err, key)
			require.Equal(t, keyPartition([]byte(key), 5), after.part[key], key)
		}
		for i := range 2000 {
			err := p.ProduceSync(context.Background(), &Record{Topic: "t", Value: []byte(fmt.Sprint(i))}).FirstErr()
			require.NoError(t, err)
		}
		for part := int32(2); part < 5; part++ {
			require.NotEmpty(t, c.Records("t", part), "partition %d added by CreatePartitions", part)
		}
	})
}

// Issue 20, item 3: a re-created topic seen first in a periodic metadata
// refresh (the producer was idle meanwhile, so no batch failed on the
// old id) still arms every partition's first-batch gate: the next burst's
// first batch goes alone. Scripted to be refused, it would otherwise let
// its successors, in flight with it, be written first (ErrOrderLost).
func TestRecreatedTopicSeenInMetadataArmsGate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		topic := broker.TopicConfig{Name: "t", Partitions: 2, Window: 20}
		c, n := memCluster(t, broker.Config{Nodes: 2, RTT: 20 * time.Millisecond, Topics: []broker.TopicConfig{topic}})
		p := memProducer(t, c, n, Linger(0), MetadataMaxAge(200*time.Millisecond))
		old := newLedger("old", "t")
		warmUp(t, p, old, 0, 1)
		require.Equal(t, 20, p.InFlightLimit("t", 1))
		gone, err := c.DeleteTopic("t")
		require.NoError(t, err)
		require.NoError(t, c.CreateTopic(topic))
		time.Sleep(time.Second) // metadata.max.age.ms passes: the new id is known
		c.ScriptAnswers("t", 1, broker.Answer{Code: kerr.NotEnoughReplicas.Code})
		l := newLedger("new", "t")
		l.produce(p, 1, 100, 100)
		require.True(t, l.waitAll(time.Minute), "callbacks")
		require.Empty(t, firstN(l.failures(), 3))
		o := collectOutcome(c, "t", 2, old, l)
		o.addDeleted(gone)
		require.Empty(t, checkOutcome(o))
		require.Len(t, o.logs[1], 100)
	})
}

// staleHintRun: partition 0 of a one-partition topic is led by node 2 at
// epoch 1; node 2 starts answering in 300 ms, the partition moves to node
// 1 (epoch 2), and a batch goes to node 2, which refuses it at once with
// NOT_LEADER_OR_FOLLOWER and the KIP-951 hint "node 1, epoch 2", written
// 300 ms later. Meanwhile the topic is deleted and created again (its
// partition 0 led by node 0 at epoch 0), and the producer learns the new
// topic id from metadata before the old answer, the last batch in flight,
// arrives; 20 more records follow it. It returns the
// outcome and the records' failures; oldHints brings back the old rule (a
// hint applied whatever topic id the answered request named).
func staleHintRun(t *testing.T, oldHints bool) (v, failures []string) {
	synctest.Test(t, func(t *testing.T) {
		topic := broker.TopicConfig{Name: "t", Partitions: 1, Window: 20}
		c, n := memCluster(t, broker.Config{Nodes: 3, RTT: 5 * time.Millisecond, Topics: []broker.TopicConfig{topic}})
		require.NoError(t, c.MoveLeader("t", 0, 2))
		p := memProducer(t, c, n, Linger(0), MetadataMaxAge(20*time.Millisecond),
			bug(t, oldTopicHints, oldHints))
		l := newLedger("a", "t")
		warmUp(t, p, l, 0)
		c.SetRTT(2, 300*time.Millisecond)
		require.NoError(t, c.MoveLeader("t", 0, 1))
		l.produce(p, 0, 1, 100)
		time.Sleep(20 * time.Millisecond) // node 2 has refused it, its answer on the way
		gone, err := c.DeleteTopic("t")
		require.NoError(t, err)
		require.NoError(t, c.CreateTopic(topic))
		leader, epoch := c.Leader("t", 0)
		require.Equal(t, []int32{0, 0}, []int32{leader, epoch}, "the new partition 0: node 0, epoch 0")
		time.Sleep(400 * time.Millisecond) // the old answer, the last in flight, has arrived
		l.produce(p, 0, 20, 100)
		require.True(t, l.waitAll(time.Minute), "callbacks")
		o := collectOutcome(c, "t", 1, l)
		o.addDeleted(gone)
		v, failures = checkOutcome(o), l.failures()
	})
	return v, failures
}

// TestStaleTopicHintIgnored: a KIP-951 leader hint in the answer to a
// request that named a deleted incarnation of the topic is not applied to
// the re-created one: its epoch (2) is above every epoch of the new topic,
// which counts from 0 again, so it would make every later metadata answer
// look stale and keep the partition at a node that does not lead it until
// delivery.timeout.ms (chaos seed 58973). With the fix every record is
// written once and in order, none fails; the negative control (the hint
// applied) fails the records with ErrDeliveryTimeout.
func TestStaleTopicHintIgnored(t *testing.T) {
	v, failures := staleHintRun(t, false)
	require.Empty(t, v)
	require.Empty(t, failures)

	needRegress(t)
	v, failures = staleHintRun(t, true)
	t.Logf("negative control: %d records failed: %v", len(failures), firstN(failures, 1))
	require.Empty(t, v)
	require.NotEmpty(t, failures, "negative control: the stale hint starves the partition")
	require.Contains(t, failures[0], ErrDeliveryTimeout.Error())
}
