package producertest_test

// Tests of sentences of the transactional docs (package producer's
// GroupMetadata and TransactionOffset, this package's coordinator faults)
// that need a real consumer group or a raw request: kgo reads what the
// cluster holds.

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/longhaul-kafka/longhaul/producer"
	"github.com/longhaul-kafka/longhaul/producer/producertest"
)

// offsetFetch asks group's coordinator for its committed offset of
// topic/0.
func offsetFetch(t *testing.T, c *producertest.Cluster, group, topic string) kmsg.OffsetFetchResponseGroupTopicPartition {
	t.Helper()
	resp := rawCoordinatorRequest(t, c, c.GroupCoordinator(group), offsetFetchRequest(group, topic)).(*kmsg.OffsetFetchResponse)
	require.Len(t, resp.Groups, 1)
	require.Zero(t, resp.Groups[0].ErrorCode)
	require.Len(t, resp.Groups[0].Topics, 1)
	require.Len(t, resp.Groups[0].Topics[0].Partitions, 1)
	return resp.Groups[0].Topics[0].Partitions[0]
}

// offsetFetchRequest is an OffsetFetch (v8+, the form kgo sends to the
// cluster) of group's offset of topic/0.
func offsetFetchRequest(group, topic string) *kmsg.OffsetFetchRequest {
	req := kmsg.NewPtrOffsetFetchRequest()
	g := kmsg.NewOffsetFetchRequestGroup()
	g.Group = group
	rt := kmsg.NewOffsetFetchRequestGroupTopic()
	rt.Topic, rt.Partitions = topic, []int32{0}
	g.Topics = append(g.Topics, rt)
	req.Groups = append(req.Groups, g)
	return req
}

// TestTxnDocsOffsetMetadataAndLeaderEpoch: TransactionOffset's
// "LeaderEpoch is the leader epoch of the last record consumed" and
// "Metadata is stored with the offset": a committed transaction's offset
// is fetched back with both, as a consumer's OffsetFetch sees it.
func TestTxnDocsOffsetMetadataAndLeaderEpoch(t *testing.T) {
	c := producertest.NewCluster(t, 1, producertest.Topic{Name: "in"}, producertest.Topic{Name: "t"})
	ctx := t.Context()
	p := newProducer(t, c, producer.TransactionalID("md"))
	require.NoError(t, p.BeginTransaction())
	require.NoError(t, produce(t, p, "t", 0, "a"))
	require.NoError(t, p.SendOffsetsToTransaction(ctx, producer.GroupMetadata{GroupID: "g", Generation: -1},
		[]producer.TransactionOffset{{Topic: "in", Partition: 0, Offset: 12, LeaderEpoch: 3, Metadata: "checkpoint-7"}}))
	require.NoError(t, p.CommitTransaction(ctx))
	require.Eventually(t, func() bool { _, ok := c.CommittedOffset("g", "in", 0); return ok }, 10*time.Second, time.Millisecond)
	got := offsetFetch(t, c, "g", "in")
	assert.Equal(t, int64(12), got.Offset)
	assert.Equal(t, int32(3), got.LeaderEpoch)
	require.NotNil(t, got.Metadata)
	assert.Equal(t, "checkpoint-7", *got.Metadata)
}

// TestTxnDocsInjectCoordinatorErrorScope: InjectCoordinatorError "makes the
// next n requests to any transaction or group coordinator (finding one
// included) answer the Kafka error code": a FindCoordinator and a group
// coordinator's OffsetFetch answer it.
func TestTxnDocsInjectCoordinatorErrorScope(t *testing.T) {
	c := producertest.NewCluster(t, 1, producertest.Topic{Name: "in"})
	find := kmsg.NewPtrFindCoordinatorRequest()
	find.Version = 4
	find.CoordinatorType = 1
	find.CoordinatorKeys = []string{"some-id"}
	c.InjectCoordinatorError(kerr.CoordinatorLoadInProgress.Code, 1)
	fr := rawCoordinatorRequest(t, c, 0, find).(*kmsg.FindCoordinatorResponse)
	require.Len(t, fr.Coordinators, 1)
	assert.Equal(t, kerr.CoordinatorLoadInProgress.Code, fr.Coordinators[0].ErrorCode, "finding one")
	fr = rawCoordinatorRequest(t, c, 0, find).(*kmsg.FindCoordinatorResponse)
	assert.Zero(t, fr.Coordinators[0].ErrorCode, "only the next n")

	c.InjectCoordinatorError(kerr.NotCoordinator.Code, 1)
	or := rawCoordinatorRequest(t, c, c.GroupCoordinator("g"), offsetFetchRequest("g", "in")).(*kmsg.OffsetFetchResponse)
	require.Len(t, or.Groups, 1)
	assert.Equal(t, kerr.NotCoordinator.Code, or.Groups[0].ErrorCode, "a group coordinator's request")
}

// groupMember is a kgo consumer of topic "in" in group g, joined.
func groupMember(t *testing.T, c *producertest.Cluster, g string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.Addr()), kgo.ConsumerGroup(g), kgo.ConsumeTopics("in"),
		kgo.HeartbeatInterval(100 * time.Millisecond)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	go func() {
		for {
			if fs := cl.PollFetches(t.Context()); fs.IsClientClosed() || t.Context().Err() != nil {
				return
			}
		}
	}()
	return cl
}

// generation waits until cl is in a generation above after and returns its
// membership.
func generation(t *testing.T, cl *kgo.Client, after int32) (string, int32) {
	t.Helper()
	var member string
	var gen int32
	require.Eventually(t, func() bool {
		member, gen = cl.GroupMetadata()
		return member != "" && gen > after
	}, 30*time.Second, 5*time.Millisecond)
	return member, gen
}

// TestTxnDocsGroupMetadataFencesZombie: GroupMetadata "so that the group
// coordinator refuses a zombie's commit (KIP-447): a consumer that lost
// its membership (a rebalance since) cannot commit", with InstanceID "the
// static member's group.instance.id", and SendOffsetsToTransaction's "the
// transaction is then abortable": offsets sent with a member's metadata
// from before a rebalance are refused (ILLEGAL_GENERATION), with another
// member's id under a static member's instance id too (FENCED_INSTANCE_ID);
// the current metadata commits.
func TestTxnDocsGroupMetadataFencesZombie(t *testing.T) {
	c := producertest.NewCluster(t, 1, producertest.Topic{Name: "in"}, producertest.Topic{Name: "t"})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	a := groupMember(t, c, "g", kgo.InstanceID("static-a"))
	memberA, genA := generation(t, a, 0)
	b := groupMember(t, c, "g") // a rebalance
	var memberA2 string
	var genA2 int32
	require.Eventually(t, func() bool { // both members in the generation after it
		var genB int32
		memberA2, genA2 = a.GroupMetadata()
		_, genB = b.GroupMetadata()
		return genA2 > genA && genB == genA2
	}, 30*time.Second, 5*time.Millisecond)
	require.Equal(t, memberA, memberA2, "a static member keeps its id")

	p := newProducer(t, c, producer.TransactionalID("zombie"))
	offs := []producer.TransactionOffset{{Topic: "in", Partition: 0, Offset: 1, LeaderEpoch: -1}}
	send := func(g producer.GroupMetadata) error {
		require.NoError(t, p.BeginTransaction())
		err := p.SendOffsetsToTransaction(ctx, g, offs)
		if err != nil {
			require.ErrorIs(t, p.CommitTransaction(ctx), producer.ErrTransactionAbortable, "the transaction is then abortable")
			require.NoError(t, p.AbortTransaction(ctx))
			return err
		}
		return p.CommitTransaction(ctx)
	}
	instance := "static-a"
	err := send(producer.GroupMetadata{GroupID: "g", Generation: genA, MemberID: memberA, InstanceID: &instance})
	require.ErrorIs(t, err, producer.ErrTransactionAbortable)
	require.ErrorIs(t, err, kerr.IllegalGeneration, "the membership before the rebalance")

	err = send(producer.GroupMetadata{GroupID: "g", Generation: genA2, MemberID: "not-" + memberA, InstanceID: &instance})
	require.ErrorIs(t, err, kerr.FencedInstanceID, "another member under the static member's instance id")
	err = send(producer.GroupMetadata{GroupID: "g", Generation: genA2, MemberID: "not-" + memberA})
	require.True(t, errors.Is(err, kerr.UnknownMemberID), "without the instance id: %v", err)

	require.NoError(t, send(producer.GroupMetadata{GroupID: "g", Generation: genA2, MemberID: memberA, InstanceID: &instance}), "the current membership")
	require.Eventually(t, func() bool { _, ok := c.CommittedOffset("g", "in", 0); return ok }, 10*time.Second, time.Millisecond)
}
