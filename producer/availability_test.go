package producer

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/longhaul-kafka/longhaul/internal/broker"
)

// Issue 20, items 1 and 2: a partition the producer cannot send to (no
// leader, or a leader the broker list does not name) costs neither a core
// nor a storm of Metadata requests. Both run on the real clock: a sender
// that spins never lets a synctest bubble's clock advance. The bounds are
// counts over a fixed interval, far above what a sleeping sender does
// (tens) and far below a spinning one (millions of loop iterations,
// thousands of requests).

const (
	quietInterval = 500 * time.Millisecond
	maxLoops      = 2000 // sender loop iterations per interval
	maxMetadata   = 200  // Metadata requests per interval
)

// leaderless rewrites every Metadata response so that partition part of
// every topic has no leader.
func leaderless(part int32) func(*kmsg.MetadataResponse) {
	return func(m *kmsg.MetadataResponse) {
		for i := range m.Topics {
			for j := range m.Topics[i].Partitions {
				if m.Topics[i].Partitions[j].Partition == part {
					m.Topics[i].Partitions[j].Leader = -1
				}
			}
		}
	}
}

// leaderUnlisted rewrites every Metadata response to leave node out of
// the broker list (a decommissioned broker still named as leader).
func leaderUnlisted(node int32) func(*kmsg.MetadataResponse) {
	return func(m *kmsg.MetadataResponse) {
		keep := m.Brokers[:0]
		for _, b := range m.Brokers {
			if b.NodeID != node {
				keep = append(keep, b)
			}
		}
		m.Brokers = keep
	}
}

// quietCounts produces one record that fills a batch to partition part, lets the producer
// settle, and returns the sender loop iterations and Metadata requests of
// the next quietInterval, then lifts the rewrite and checks the record is
// delivered.
func quietCounts(t *testing.T, rewrite func(*kmsg.MetadataResponse), part int32) (loops, metadata int64) {
	c := startCluster(t, broker.Config{Nodes: 2, Topics: []broker.TopicConfig{{Name: "t", Partitions: 2}}})
	c.RewriteMetadata(rewrite)
	p := newTestProducer(t, c, RetryBackoff(5*time.Millisecond), RetryBackoffMax(100*time.Millisecond), BatchSize(512))
	done := make(chan error, 1)
	// A record that fills its batch: the batch is sealed, ready to go.
	r := &Record{Topic: "t", Value: make([]byte, 600)}
	r.SetPartition(part)
	p.Produce(context.Background(), r, func(_ *Record, err error) { done <- err })
	time.Sleep(300 * time.Millisecond) // backoff reaches its cap
	l0, m0 := p.s.probe.loops.Load(), c.MetadataRequests()
	time.Sleep(quietInterval)
	loops, metadata = p.s.probe.loops.Load()-l0, c.MetadataRequests()-m0
	t.Logf("over %v: %d sender loop iterations, %d Metadata requests", quietInterval, loops, metadata)
	select {
	case err := <-done:
		t.Fatalf("record called back while its partition could not be sent to: %v", err)
	default:
	}
	c.RewriteMetadata(nil)
	select {
	case err := <-done:
		require.NoError(t, err, "delivered once the metadata is good")
	case <-time.After(10 * time.Second):
		t.Fatal("record not delivered after the metadata became good")
	}
	return loops, metadata
}

// Issue 20, item 1: a ready batch for a partition without a leader does
// not make the sender loop spin; it sleeps until something can change.
func TestLeaderlessPartitionDoesNotSpinSender(t *testing.T) {
	t.Parallel()
	loops, metadata := quietCounts(t, leaderless(1), 1)
	require.Less(t, loops, int64(maxLoops), "sender loop iterations while the partition has no leader")
	require.Less(t, metadata, int64(maxMetadata), "Metadata requests while the partition has no leader")
}

// Issue 20, item 2: a leader absent from the broker list makes the
// metadata answer unusable, which backs off like a failure instead of
// being asked again at once.
func TestLeaderAbsentFromBrokerListBacksOffMetadata(t *testing.T) {
	t.Parallel()
	loops, metadata := quietCounts(t, leaderUnlisted(1), 1)
	require.Less(t, metadata, int64(maxMetadata), "Metadata requests while the leader is not in the broker list")
	require.Less(t, loops, int64(maxLoops), "sender loop iterations while the leader is not in the broker list")
}

// TestIdleTopicNotPolledForever: a topic produced to once (a typo, a
// deleted topic) is asked for in metadata until its record failed and it
// sat idle for metadata.max.idle.ms; after that the producer stops asking,
// while a topic in use keeps its metadata (issue 20, item 6). On virtual
// time, so the counts over the interval are exact.
func TestIdleTopicNotPolledForever(t *testing.T) {
	asked := idleTopicPolls(t, false)
	require.LessOrEqual(t, asked, int64(2), "metadata requests in 10 s once the typo went idle")
}

// TestIdleTopicNotPolledForeverNegativeControl: with idle topics still
// asked for, the typo is polled at every refresh (metadata.max.age.ms, 1 s
// here; a topic nothing waits for is not asked for at the backoff's pace,
// TestDeadTopicPolledAtMaxAge): the bound above fails.
func TestIdleTopicNotPolledForeverNegativeControl(t *testing.T) {
	needRegress(t)
	asked := idleTopicPolls(t, true)
	require.GreaterOrEqual(t, asked, int64(8), "metadata requests in 10 s with the typo still asked for")
}

// idleTopicPolls produces to a topic and once to a missing one, waits
// until the missing one has been idle past metadata.max.idle.ms, and
// returns the Metadata requests of the next 10 s; the topic in use still
// works after.
func idleTopicPolls(t *testing.T, pollIdle bool) (asked int64) {
	synctest.Test(t, func(t *testing.T) {
		c, n := memCluster(t, broker.Config{AutoCreateTopics: false,
			Topics: []broker.TopicConfig{{Name: "t", Partitions: 1}}})
		p := memProducer(t, c, n, MaxBlock(time.Second), MetadataMaxIdle(5*time.Second),
			RetryBackoffMax(100*time.Millisecond), MetadataMaxAge(time.Second),
			bug(t, pollIdleTopics, pollIdle))
		l := newLedger("a", "t")
		warmUp(t, p, l, 0)
		typo := newLedger("b", "typo")
		typo.produce(p, 0, 1, 10)
		require.True(t, typo.waitAll(time.Minute))
		require.Len(t, typo.failures(), 1, "the record for a missing topic fails after max.block.ms")
		time.Sleep(6 * time.Second) // past metadata.max.idle.ms
		m0 := c.MetadataRequests()
		time.Sleep(10 * time.Second)
		asked = c.MetadataRequests() - m0
		// The topic in use still works.
		l.produce(p, 0, 5, 10)
		require.True(t, l.waitAll(time.Minute))
		require.Empty(t, l.failures())
	})
	return asked
}

// TestIdleTopicKeepsItsSequences: a topic idle past metadata.max.idle.ms
// is dropped from metadata requests but keeps its sequence numbers:
// producing to it again continues the sequence under the same producer id
// and epoch, with no bump (MetadataMaxIdle's doc). A producer that had
// forgotten them would start again at 0 and need a bump (seen in the log
// and by HookProducerID).
func TestIdleTopicKeepsItsSequences(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, n := memCluster(t, broker.Config{Topics: []broker.TopicConfig{{Name: "t", Partitions: 1}}})
		ids := &idChanges{}
		p := memProducer(t, c, n, MetadataMaxIdle(5*time.Second), Hooks(ids))
		l := newLedger("a", "t")
		l.produce(p, 0, 10, 10)
		require.True(t, l.waitAll(time.Minute))
		time.Sleep(20 * time.Second) // idle past metadata.max.idle.ms (TestIdleTopicNotPolledForever shows it is then not asked for)
		l.produce(p, 0, 10, 10)
		require.True(t, l.waitAll(time.Minute))
		require.Empty(t, l.failures())

		recs := c.Records("t", 0)
		require.Len(t, recs, 20)
		for i, r := range recs {
			require.EqualValues(t, i, r.Sequence, "sequence continues after the idle time")
			require.Equal(t, recs[0].ProducerID, r.ProducerID)
			require.Equal(t, recs[0].ProducerEpoch, r.ProducerEpoch, "no epoch bump")
		}
		require.Equal(t, int64(1), ids.n.Load(), "only the first producer id, no bump")
	})
}

// idChanges counts HookProducerID calls.
type idChanges struct{ n atomic.Int64 }

func (h *idChanges) OnProducerID(int64, int16, int64, int16) { h.n.Add(1) }

// TestConnectionClosedWhileIdleIsRedialedBeforeSending: a broker closes
// idle connections (connections.max.idle.ms). The producer notices the
// close before its next send and dials again, so the first batch after the
// pause is not written to a dead connection and retried after a backoff
// (issue 20, item 7). Two partitions on the same leader: the check runs once
// per pass, before candidates are gathered (a close noticed between two of
// a node's partitions once sent to a nil connection).
func TestConnectionClosedWhileIdleIsRedialedBeforeSending(t *testing.T) {
	retried, took := afterIdleClose(t, false)
	require.Zero(t, retried, "no batch went to the dead connection")
	// retry.backoff.ms is 1 s with 20 % jitter: a backoff paid is >= 800 ms.
	require.Less(t, took, 500*time.Millisecond, "no retry backoff paid")
}

// TestConnectionClosedWhileIdleNegativeControl: without the check before
// sending, the first batches after the pause go to the dead connection
// and are retried after a backoff: both bounds above fail.
func TestConnectionClosedWhileIdleNegativeControl(t *testing.T) {
	needRegress(t)
	retried, took := afterIdleClose(t, true)
	require.Positive(t, retried, "batches written to the dead connection")
	require.GreaterOrEqual(t, took, 800*time.Millisecond, "a retry backoff paid")
}

// afterIdleClose warms up two partitions on one leader, lets the broker
// drop the connection while idle, produces to both, and returns the
// batches retried and the (virtual) time until every record was acked.
func afterIdleClose(t *testing.T, noCheck bool) (retried int64, took time.Duration) {
	synctest.Test(t, func(t *testing.T) {
		c, n := memCluster(t, broker.Config{Topics: []broker.TopicConfig{{Name: "t", Partitions: 2}}})
		p := memProducer(t, c, n, RetryBackoff(time.Second), RetryBackoffMax(time.Second),
			bug(t, noCloseCheck, noCheck))
		l := newLedger("a", "t")
		warmUp(t, p, l, 0, 1)
		c.DropConnections(0)
		time.Sleep(100 * time.Millisecond) // the producer's reader sees the close
		before := p.Stats().BatchesRetried
		start := time.Now()
		l.produce(p, 0, 5, 10)
		l.produce(p, 1, 5, 10)
		require.True(t, l.waitAll(time.Minute))
		require.Empty(t, l.failures())
		retried, took = p.Stats().BatchesRetried-before, time.Since(start)
	})
	return retried, took
}
