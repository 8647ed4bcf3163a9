package producer

import (
	"net"
	"strconv"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/longhaul-kafka/longhaul/internal/broker"
	"github.com/longhaul-kafka/longhaul/internal/memnet"
	"github.com/longhaul-kafka/longhaul/protocol"
)

// hintProxy relays a one-node cluster and turns the first `forge` Produce
// answers into NOT_LEADER_OR_FOLLOWER carrying the KIP-951 hint
// {leader, epoch}; with endpoint, the answer's NodeEndpoints give the
// hinted node the relay's own address. The batch was appended: the retry
// is answered as a duplicate.
func hintProxy(t *testing.T, forge int, leader, epoch int32, endpoint bool) (*broker.Cluster, *memnet.Network, string) {
	c, n := memCluster(t, broker.Config{Topics: []broker.TopicConfig{{Name: "t", Partitions: 1}}})
	var forged atomic.Int32
	var endpoints []kmsg.ProduceResponseBroker // set once the relay listens, before any Produce
	addr := editProxy(t, n, c.Addr(), func(r kmsg.Response) {
		pr, ok := r.(*kmsg.ProduceResponse)
		if !ok || forged.Add(1) > int32(forge) {
			return
		}
		for i := range pr.Topics {
			for j := range pr.Topics[i].Partitions {
				p := &pr.Topics[i].Partitions[j]
				p.ErrorCode = kerr.NotLeaderForPartition.Code
				p.BaseOffset = -1
				p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch = leader, epoch
			}
		}
		pr.Brokers = endpoints
	})
	if endpoint {
		host, port, err := net.SplitHostPort(addr)
		require.NoError(t, err)
		pn, err := strconv.Atoi(port)
		require.NoError(t, err)
		e := kmsg.NewProduceResponseBroker()
		e.NodeID, e.Host, e.Port = leader, host, int32(pn)
		endpoints = []kmsg.ProduceResponseBroker{e}
	}
	return c, n, addr
}

// TestLeaderHintToUnknownNode: a NOT_LEADER_OR_FOLLOWER hint naming node 9,
// which neither the metadata nor the answer's NodeEndpoints list, is not
// taken (the Java client's Metadata.updatePartitionLeadership skips such a
// hint too): the record is delivered by its real leader, node 0, at once,
// with a handful of Metadata requests. Before the fix the hint pinned the
// partition to node 9 at epoch 1, every Metadata answer naming node 0 at
// epoch 0 was dropped as stale and counted as good (no backoff): 4,995
// Metadata requests in 5 s, the record failing at delivery.timeout.ms.
func TestLeaderHintToUnknownNode(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, n, addr := hintProxy(t, 1, 9, 1, false)
		c.SetRTT(0, time.Millisecond) // virtual time moves: a spin ends at delivery.timeout.ms
		p := memProducer(t, c, n, BootstrapServers(addr), DeliveryTimeout(5*time.Second))
		before := c.MetadataRequests()
		start := time.Now()
		res := p.ProduceSync(t.Context(), &Record{Topic: "t", Value: []byte("v")})
		took := time.Since(start)
		asked := c.MetadataRequests() - before
		t.Logf("outcome after %v (virtual): %v; %d Metadata requests", took, res[0].Err, asked)
		require.NoError(t, res[0].Err)
		assert.Less(t, took, time.Second, "delivered by the real leader, not at delivery.timeout.ms")
		assert.Less(t, asked, int64(10), "no Metadata storm")
		assert.Len(t, c.Records("t", 0), 1)
	})
}

// onSender runs f on the sender goroutine and waits for it.
func onSender(p *Producer, f func(s *sender)) {
	done := make(chan struct{})
	p.post(func() { f(p.s); close(done) })
	<-done
}

// partitionLeader is the leader and epoch the sender holds for t[0].
func partitionLeader(p *Producer) (leader, epoch int32) {
	onSender(p, func(s *sender) {
		ps := s.p.acc.topics["t"].ts.parts[0]
		leader, epoch = ps.admission.Leader()
	})
	return leader, epoch
}

// TestLeaderHintInNodeEndpoints: a hint naming a node the metadata does
// not list is taken when the answer's NodeEndpoints give its address: the
// retry goes to node 9 (here the same broker behind the relay), and
// metadata still naming node 0 at epoch 0 is stale and does not undo it.
func TestLeaderHintInNodeEndpoints(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, n, addr := hintProxy(t, 1, 9, 1, true)
		p := memProducer(t, c, n, BootstrapServers(addr), DeliveryTimeout(5*time.Second))
		res := p.ProduceSync(t.Context(), &Record{Topic: "t", Value: []byte("v")})
		require.NoError(t, res[0].Err)
		time.Sleep(time.Second) // the refresh the answer asked for has come
		leader, epoch := partitionLeader(p)
		assert.Equal(t, [2]int32{9, 1}, [2]int32{leader, epoch}, "the hint was taken and kept")
		assert.Len(t, c.Records("t", 0), 1)
	})
}

// TestLeaderEpochDoesNotPinUnreachable: whatever put a partition at a node
// without an address (here the test, on the sender goroutine), a higher
// epoch there does not make metadata naming a reachable leader at a lower
// epoch stale: the next record is delivered at once, without a Metadata
// storm.
func TestLeaderEpochDoesNotPinUnreachable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, n := memCluster(t, broker.Config{Topics: []broker.TopicConfig{{Name: "t", Partitions: 1}}})
		c.SetRTT(0, time.Millisecond)
		p := memProducer(t, c, n, DeliveryTimeout(5*time.Second))
		require.NoError(t, p.ProduceSync(t.Context(), &Record{Topic: "t", Value: []byte("a")})[0].Err)
		onSender(p, func(s *sender) { s.updateLeader(s.p.acc.topics["t"].ts.parts[0], 9, 5) })
		before := c.MetadataRequests()
		start := time.Now()
		res := p.ProduceSync(t.Context(), &Record{Topic: "t", Value: []byte("b")})
		took, asked := time.Since(start), c.MetadataRequests()-before
		t.Logf("outcome after %v (virtual): %v; %d Metadata requests", took, res[0].Err, asked)
		require.NoError(t, res[0].Err)
		assert.Less(t, took, time.Second)
		assert.Less(t, asked, int64(10))
		leader, _ := partitionLeader(p)
		assert.Equal(t, int32(0), leader)
	})
}

// TestUnchangedMetadataBacksOff: an answer to a wanted Metadata request
// that changes nothing counts as a failure for the metadata backoff (the
// next wanted request waits, longer each time); an unchanged answer to the
// periodic refresh leaves the count alone, and an answer that changes
// something resets it.
func TestUnchangedMetadataBacksOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, n := memCluster(t, broker.Config{Topics: []broker.TopicConfig{{Name: "t", Partitions: 1}}})
		p := memProducer(t, c, n, RetryBackoff(100*time.Millisecond), RetryBackoffMax(time.Second))
		require.NoError(t, p.ProduceSync(t.Context(), &Record{Topic: "t", Value: []byte("a")})[0].Err)
		leader, epoch := partitionLeader(p)
		var id [16]byte
		onSender(p, func(s *sender) { id = s.p.acc.topics["t"].ts.id })
		same := func() *protocol.MetadataResult {
			return &protocol.MetadataResult{Brokers: map[int32]string{0: c.Addr()}, ControllerID: 0,
				Topics: map[string]protocol.TopicMetadata{"t": {ID: id, Partitions: []protocol.PartitionMetadata{{Partition: 0, Leader: leader, LeaderEpoch: epoch}}}}}
		}
		var waits []time.Duration
		var failures []int
		apply := func(res *protocol.MetadataResult, asked bool) {
			onSender(p, func(s *sender) {
				s.metaBusy = true // as maintainMetadata leaves it
				s.applyMetadata(res, asked)
				waits = append(waits, time.Until(s.metaRetryAt).Round(10*time.Millisecond))
				failures = append(failures, s.metaFailures)
			})
		}
		apply(same(), true)
		apply(same(), true)
		apply(same(), true)
		apply(same(), false)
		moved := same()
		moved.Topics["t"].Partitions[0].LeaderEpoch++
		apply(moved, true)
		t.Logf("retry waits %v, failures %v", waits, failures)
		assert.Equal(t, []int{1, 2, 3, 3, 0}, failures)
		assert.Greater(t, waits[0], 80*time.Millisecond, "the first unchanged answer waits retry.backoff.ms")
		assert.Greater(t, waits[2], waits[0], "and the wait grows")
	})
}
