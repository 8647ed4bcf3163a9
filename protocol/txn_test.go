package protocol

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// txnBroker is a fakeBroker that records every transactional request it
// gets (with the version it came at) and answers with answer, or with the
// request's default response when answer is nil or returns nil.
type txnBroker struct {
	*fakeBroker
	mu     sync.Mutex
	got    []kmsg.Request
	answer func(req kmsg.Request) kmsg.Response
}

func newTxnBroker(t *testing.T, tv int16) *txnBroker {
	tb := &txnBroker{fakeBroker: newFakeBroker(t)}
	if tv >= 0 {
		tb.features = []kmsg.ApiVersionsResponseFinalizedFeature{{Name: FeatureTransactionVersion, MaxVersionLevel: tv, MinVersionLevel: tv}}
		tb.featuresEpoch = 7
	}
	tb.handle = func(h RequestHeader, req kmsg.Request, reply func(any)) {
		tb.mu.Lock()
		tb.got = append(tb.got, req)
		ans := tb.answer
		tb.mu.Unlock()
		var resp kmsg.Response
		if ans != nil {
			resp = ans(req)
		}
		if resp == nil {
			resp = req.ResponseKind()
		}
		reply(resp)
	}
	return tb
}

func (tb *txnBroker) setAnswer(f func(req kmsg.Request) kmsg.Response) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	tb.answer = f
}

func (tb *txnBroker) last() kmsg.Request {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	return tb.got[len(tb.got)-1]
}

func (tb *txnBroker) dial(t *testing.T) *Conn { return dialT(t, tb.listen(), DialConfig{}) }

var testTxnProducer = TxnProducer{TransactionalID: "tx", ProducerID: 42, Epoch: 3}

// TestFinalizedFeatures: the features and epoch of the ApiVersions answer
// that opened the connection are what the Conn reports; a broker that
// reports none gives epoch -1 and no feature.
func TestFinalizedFeatures(t *testing.T) {
	c := newTxnBroker(t, 2).dial(t)
	lvl, ok := c.FinalizedFeature(FeatureTransactionVersion)
	require.True(t, ok)
	require.Equal(t, int16(2), lvl)
	require.Equal(t, int64(7), c.FinalizedFeaturesEpoch())
	_, ok = c.FinalizedFeature("metadata.version")
	require.False(t, ok)

	c = newTxnBroker(t, -1).dial(t)
	_, ok = c.FinalizedFeature(FeatureTransactionVersion)
	require.False(t, ok)
	require.Equal(t, int64(-1), c.FinalizedFeaturesEpoch())
}

// TestTxnVersion: transaction version 2 needs the feature and the three
// request versions that carry it; anything less is version 1; a broker
// without the transactional requests (or without idempotent Produce) can
// run none.
func TestTxnVersion(t *testing.T) {
	for _, tc := range []struct {
		name string
		tv   int16 // -1: no feature reported
		cap  map[int16]int16
		drop int16 // a key the broker lacks, -1 none
		want int
	}{
		{"tv2", 2, nil, -1, 2},
		{"tv3 is 2", 3, nil, -1, 2},
		{"tv1", 1, nil, -1, 1},
		{"tv0", 0, nil, -1, 1},
		{"no feature", -1, nil, -1, 1},
		{"tv2 with Produce v11", 2, map[int16]int16{0: 11}, -1, 1},
		{"tv2 with EndTxn v4", 2, map[int16]int16{26: 4}, -1, 1},
		{"tv2 with TxnOffsetCommit v4", 2, map[int16]int16{28: 4}, -1, 1},
		{"no AddPartitionsToTxn", 2, nil, 24, 0},
		{"no EndTxn", 1, nil, 26, 0},
		{"Produce v2", 1, map[int16]int16{0: 2}, -1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newTxnBroker(t, tc.tv)
			if tc.drop >= 0 {
				b.keys = withKey(b.keys, tc.drop, 0, -1)
			}
			c := dialT(t, b.listen(), DialConfig{MaxVersions: tc.cap})
			require.Equal(t, tc.want, TxnVersion(c))
		})
	}
}

// TestFindCoordinatorForms: v4+ sends the batched form and reads the
// key's entry; v1-3 the single key; v0 cannot name a transactional id.
func TestFindCoordinatorForms(t *testing.T) {
	for v := int16(0); v <= 6; v++ {
		t.Run(fmt.Sprintf("v%d", v), func(t *testing.T) {
			b := newTxnBroker(t, 2)
			b.keys = withKey(b.keys, keyFindCoordinator, 0, v)
			b.setAnswer(func(req kmsg.Request) kmsg.Response {
				r := req.(*kmsg.FindCoordinatorRequest)
				resp := r.ResponseKind().(*kmsg.FindCoordinatorResponse)
				if r.Version >= 4 {
					resp.Coordinators = []kmsg.FindCoordinatorResponseCoordinator{
						{Key: "other", NodeID: 9, Host: "h9", Port: 9},
						{Key: r.CoordinatorKeys[0], NodeID: 3, Host: "h3", Port: 9093},
					}
				} else {
					resp.NodeID, resp.Host, resp.Port = 3, "h3", 9093
				}
				return resp
			})
			c := b.dial(t)
			res, err := FindCoordinator(context.Background(), c, CoordinatorTransaction, "tx")
			if v == 0 {
				require.ErrorIs(t, err, ErrUnsupportedVersion)
				res, err = FindCoordinator(context.Background(), c, CoordinatorGroup, "g")
			}
			require.NoError(t, err)
			require.Equal(t, CoordinatorResult{NodeID: 3, Addr: "h3:9093"}, res)
			r := b.last().(*kmsg.FindCoordinatorRequest)
			require.Equal(t, v, r.Version)
			if v >= 4 {
				require.Equal(t, []string{"tx"}, r.CoordinatorKeys)
				require.Equal(t, CoordinatorTransaction, r.CoordinatorType)
			} else if v >= 1 {
				require.Equal(t, "tx", r.CoordinatorKey)
				require.Equal(t, CoordinatorTransaction, r.CoordinatorType)
			} else {
				require.Equal(t, "g", r.CoordinatorKey)
			}
		})
	}
}

// TestFindCoordinatorAnswers: error codes come back as numbers with the
// message; an answer that names no usable coordinator, or lacks the key,
// is malformed.
func TestFindCoordinatorAnswers(t *testing.T) {
	msg := "loading"
	for _, tc := range []struct {
		name  string
		co    []kmsg.FindCoordinatorResponseCoordinator
		want  CoordinatorResult
		valid bool
	}{
		{"error", []kmsg.FindCoordinatorResponseCoordinator{{Key: "tx", NodeID: -1, ErrorCode: kerr.CoordinatorLoadInProgress.Code, ErrorMessage: &msg}},
			CoordinatorResult{ErrorCode: kerr.CoordinatorLoadInProgress.Code, ErrorMessage: "loading", NodeID: -1}, true},
		{"missing key", []kmsg.FindCoordinatorResponseCoordinator{{Key: "other", NodeID: 1, Host: "h", Port: 1}}, CoordinatorResult{}, false},
		{"no node", []kmsg.FindCoordinatorResponseCoordinator{{Key: "tx", NodeID: -1, Host: "h", Port: 1}}, CoordinatorResult{}, false},
		{"no host", []kmsg.FindCoordinatorResponseCoordinator{{Key: "tx", NodeID: 1, Port: 1}}, CoordinatorResult{}, false},
		{"port 0", []kmsg.FindCoordinatorResponseCoordinator{{Key: "tx", NodeID: 1, Host: "h"}}, CoordinatorResult{}, false},
		{"port 70000", []kmsg.FindCoordinatorResponseCoordinator{{Key: "tx", NodeID: 1, Host: "h", Port: 70000}}, CoordinatorResult{}, false},
		{"ok node 0", []kmsg.FindCoordinatorResponseCoordinator{{Key: "tx", NodeID: 0, Host: "::1", Port: 65535}}, CoordinatorResult{Addr: "[::1]:65535"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newTxnBroker(t, 2)
			b.setAnswer(func(req kmsg.Request) kmsg.Response {
				resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
				resp.Coordinators = tc.co
				return resp
			})
			c := b.dial(t)
			res, err := FindCoordinator(context.Background(), c, CoordinatorTransaction, "tx")
			if !tc.valid {
				require.ErrorIs(t, err, ErrMalformedResponse)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, res)
			// The connection survives a malformed answer: it decoded.
			require.NoError(t, c.Err())
		})
	}
}

// TestInitTransactionalID: the transactional id and timeout are sent;
// the current id and epoch only from v3 (KIP-360); v5 at most; bad
// arguments are refused without sending.
func TestInitTransactionalID(t *testing.T) {
	for _, v := range []int16{0, 2, 3, 5} {
		t.Run(fmt.Sprintf("v%d", v), func(t *testing.T) {
			b := newTxnBroker(t, 2)
			b.keys = withKey(b.keys, keyInitProducerID, 0, v)
			b.setAnswer(func(req kmsg.Request) kmsg.Response {
				resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
				resp.ProducerID, resp.ProducerEpoch = 42, 4
				return resp
			})
			c := b.dial(t)
			res, err := InitTransactionalID(context.Background(), c, "tx", 90*time.Second, 42, 3)
			require.NoError(t, err)
			require.Equal(t, InitTxnResult{ProducerID: 42, Epoch: 4}, res)
			r := b.last().(*kmsg.InitProducerIDRequest)
			require.Equal(t, v, r.Version)
			require.Equal(t, "tx", *r.TransactionalID)
			require.Equal(t, int32(90000), r.TransactionTimeoutMillis)
			if v >= 3 {
				require.Equal(t, int64(42), r.ProducerID)
				require.Equal(t, int16(3), r.ProducerEpoch)
			}
		})
	}
	b := newTxnBroker(t, 2)
	c := b.dial(t)
	for _, tc := range []struct {
		id string
		to time.Duration
	}{{"", time.Minute}, {"tx", 0}, {"tx", time.Microsecond}, {"tx", -time.Second}, {"tx", 25 * 24 * time.Hour}} {
		res, err := InitTransactionalID(context.Background(), c, tc.id, tc.to, -1, -1)
		require.Error(t, err, "%q %v", tc.id, tc.to)
		require.Equal(t, InitTxnResult{ProducerID: -1, Epoch: -1}, res)
	}
	b.mu.Lock()
	require.Empty(t, b.got, "refused calls sent nothing")
	b.mu.Unlock()

	b.setAnswer(func(req kmsg.Request) kmsg.Response {
		resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
		resp.ErrorCode = kerr.ConcurrentTransactions.Code
		resp.ProducerID, resp.ProducerEpoch = 5, 5
		return resp
	})
	res, err := InitTransactionalID(context.Background(), c, "tx", time.Minute, -1, -1)
	require.NoError(t, err)
	require.Equal(t, InitTxnResult{ErrorCode: kerr.ConcurrentTransactions.Code, ProducerID: -1, Epoch: -1}, res)

	b.setAnswer(func(req kmsg.Request) kmsg.Response {
		resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
		resp.ProducerID, resp.ProducerEpoch = -1, 0
		return resp
	})
	_, err = InitTransactionalID(context.Background(), c, "tx", time.Minute, -1, -1)
	require.ErrorIs(t, err, ErrMalformedResponse)

	b = newTxnBroker(t, 2)
	b.keys = withKey(b.keys, keyInitProducerID, 0, -1)
	_, err = InitTransactionalID(context.Background(), b.dial(t), "tx", time.Minute, -1, -1)
	require.ErrorIs(t, err, ErrUnsupportedVersion)
}

// TestAddPartitionsToTxn: partitions are grouped by topic without
// duplicates, sent at v3 at most (the broker offers 5), and the answer
// lists each asked partition in order; one missing is malformed.
func TestAddPartitionsToTxn(t *testing.T) {
	b := newTxnBroker(t, 1)
	var drop atomic.Pointer[TopicPartition]
	b.setAnswer(func(req kmsg.Request) kmsg.Response {
		r := req.(*kmsg.AddPartitionsToTxnRequest)
		resp := r.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
		for _, rt := range r.Topics {
			t := kmsg.AddPartitionsToTxnResponseTopic{Topic: rt.Topic}
			for _, p := range rt.Partitions {
				if d := drop.Load(); d != nil && *d == (TopicPartition{rt.Topic, p}) {
					continue
				}
				code := int16(0)
				if p == 1 {
					code = kerr.TopicAuthorizationFailed.Code
				}
				t.Partitions = append(t.Partitions, kmsg.AddPartitionsToTxnResponseTopicPartition{Partition: p, ErrorCode: code})
			}
			resp.Topics = append(resp.Topics, t)
		}
		resp.Topics = append(resp.Topics, kmsg.AddPartitionsToTxnResponseTopic{Topic: "unasked", Partitions: []kmsg.AddPartitionsToTxnResponseTopicPartition{{Partition: 0}}})
		return resp
	})
	c := b.dial(t)
	asked := []TopicPartition{{"a", 0}, {"b", 1}, {"a", 1}, {"a", 0}}
	res, err := AddPartitionsToTxn(context.Background(), c, testTxnProducer, asked)
	require.NoError(t, err)
	require.Equal(t, []PartitionErrorCode{
		{TopicPartition{"a", 0}, 0},
		{TopicPartition{"b", 1}, kerr.TopicAuthorizationFailed.Code},
		{TopicPartition{"a", 1}, kerr.TopicAuthorizationFailed.Code},
	}, res)
	r := b.last().(*kmsg.AddPartitionsToTxnRequest)
	require.Equal(t, int16(3), r.Version)
	require.Equal(t, "tx", r.TransactionalID)
	require.Equal(t, int64(42), r.ProducerID)
	require.Equal(t, int16(3), r.ProducerEpoch)
	require.Len(t, r.Topics, 2)
	require.Equal(t, []int32{0, 1}, r.Topics[0].Partitions)

	drop.Store(&TopicPartition{"b", 1})
	_, err = AddPartitionsToTxn(context.Background(), c, testTxnProducer, asked)
	require.ErrorIs(t, err, ErrMalformedResponse)
}

// TestAddOffsetsToTxn sends the group and the producer and returns the
// code.
func TestAddOffsetsToTxn(t *testing.T) {
	b := newTxnBroker(t, 1)
	b.setAnswer(func(req kmsg.Request) kmsg.Response {
		resp := req.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return resp
	})
	code, err := AddOffsetsToTxn(context.Background(), b.dial(t), testTxnProducer, "g")
	require.NoError(t, err)
	require.Equal(t, kerr.GroupAuthorizationFailed.Code, code)
	r := b.last().(*kmsg.AddOffsetsToTxnRequest)
	require.Equal(t, "g", r.Group)
	require.Equal(t, "tx", r.TransactionalID)
	require.Equal(t, int64(42), r.ProducerID)
}

// TestEndTxnVersions: transaction version 1 sends v4 at most (the broker
// offers 5) and gets no next epoch; version 2 sends v5 and returns the
// next producer id and epoch, and refuses a broker without v5.
func TestEndTxnVersions(t *testing.T) {
	b := newTxnBroker(t, 2)
	b.setAnswer(func(req kmsg.Request) kmsg.Response {
		resp := req.ResponseKind().(*kmsg.EndTxnResponse)
		resp.ProducerID, resp.ProducerEpoch = 42, 4
		return resp
	})
	c := b.dial(t)
	res, err := EndTxn(context.Background(), c, testTxnProducer, true, 1)
	require.NoError(t, err)
	require.Equal(t, EndTxnResult{ProducerID: -1, Epoch: -1}, res)
	r := b.last().(*kmsg.EndTxnRequest)
	require.Equal(t, int16(4), r.Version)
	require.True(t, r.Commit)

	res, err = EndTxn(context.Background(), c, testTxnProducer, false, 2)
	require.NoError(t, err)
	require.Equal(t, EndTxnResult{ProducerID: 42, Epoch: 4}, res)
	r = b.last().(*kmsg.EndTxnRequest)
	require.Equal(t, int16(5), r.Version)
	require.False(t, r.Commit)
	require.Equal(t, int16(3), r.ProducerEpoch)

	b.setAnswer(func(req kmsg.Request) kmsg.Response {
		resp := req.ResponseKind().(*kmsg.EndTxnResponse)
		resp.ProducerID, resp.ProducerEpoch = 42, -1
		return resp
	})
	_, err = EndTxn(context.Background(), c, testTxnProducer, true, 2)
	require.ErrorIs(t, err, ErrMalformedResponse)
	b.setAnswer(func(req kmsg.Request) kmsg.Response {
		resp := req.ResponseKind().(*kmsg.EndTxnResponse)
		resp.ErrorCode = kerr.ProducerFenced.Code
		resp.ProducerID, resp.ProducerEpoch = -1, -1
		return resp
	})
	res, err = EndTxn(context.Background(), c, testTxnProducer, true, 2)
	require.NoError(t, err)
	require.Equal(t, EndTxnResult{ErrorCode: kerr.ProducerFenced.Code, ProducerID: -1, Epoch: -1}, res)

	old := newTxnBroker(t, 1)
	old.keys = withKey(old.keys, keyEndTxn, 0, 4)
	_, err = EndTxn(context.Background(), old.dial(t), testTxnProducer, true, 2)
	require.ErrorIs(t, err, ErrUnsupportedVersion)
	// A broker whose lowest EndTxn is above the version-1 cap refuses
	// version 1 rather than taking a version that adds partitions.
	high := newTxnBroker(t, 2)
	high.keys = withKey(high.keys, keyEndTxn, 5, 5)
	_, err = EndTxn(context.Background(), high.dial(t), testTxnProducer, true, 1)
	require.ErrorIs(t, err, ErrUnsupportedVersion)
}

// TestTxnOffsetCommit: the group metadata goes out from v3; version 1
// sends v4 at most, version 2 v5 (never v6, which names topics by id);
// metadata a broker below v3 cannot carry is refused.
func TestTxnOffsetCommit(t *testing.T) {
	inst := "static-1"
	g := GroupMetadata{GroupID: "g", Generation: 12, MemberID: "m-1", InstanceID: &inst}
	offs := []TxnOffset{
		{TopicPartition: TopicPartition{"in", 0}, Offset: 100, LeaderEpoch: 2},
		{TopicPartition: TopicPartition{"in", 3}, Offset: 7, LeaderEpoch: -1},
	}
	for _, tc := range []struct {
		tv      int
		brokerV int16
		wantV   int16
		err     error
	}{
		{1, 6, 4, nil}, {2, 6, 5, nil}, {1, 3, 3, nil}, {2, 4, 0, ErrUnsupportedVersion}, {1, 2, 0, ErrUnsupportedVersion},
	} {
		t.Run(fmt.Sprintf("tv%d broker v%d", tc.tv, tc.brokerV), func(t *testing.T) {
			b := newTxnBroker(t, int16(tc.tv))
			b.keys = withKey(b.keys, keyTxnOffsetCommit, 0, tc.brokerV)
			b.setAnswer(func(req kmsg.Request) kmsg.Response {
				r := req.(*kmsg.TxnOffsetCommitRequest)
				resp := r.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
				for _, rt := range r.Topics {
					t := kmsg.TxnOffsetCommitResponseTopic{Topic: rt.Topic}
					for _, p := range rt.Partitions {
						t.Partitions = append(t.Partitions, kmsg.TxnOffsetCommitResponseTopicPartition{Partition: p.Partition, ErrorCode: kerr.IllegalGeneration.Code})
					}
					resp.Topics = append(resp.Topics, t)
				}
				return resp
			})
			res, err := TxnOffsetCommit(context.Background(), b.dial(t), testTxnProducer, g, offs, tc.tv)
			if tc.err != nil {
				require.ErrorIs(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, []PartitionErrorCode{
				{TopicPartition{"in", 0}, kerr.IllegalGeneration.Code},
				{TopicPartition{"in", 3}, kerr.IllegalGeneration.Code},
			}, res)
			r := b.last().(*kmsg.TxnOffsetCommitRequest)
			require.Equal(t, tc.wantV, r.Version)
			require.Equal(t, "g", r.Group)
			require.Equal(t, int32(12), r.Generation)
			require.Equal(t, "m-1", r.MemberID)
			require.Equal(t, "static-1", *r.InstanceID)
			require.Len(t, r.Topics, 1)
			require.Equal(t, int64(100), r.Topics[0].Partitions[0].Offset)
			require.Equal(t, int32(2), r.Topics[0].Partitions[0].LeaderEpoch)
		})
	}
	// Without group metadata a v2 broker takes the commit.
	b := newTxnBroker(t, 1)
	b.keys = withKey(b.keys, keyTxnOffsetCommit, 0, 2)
	b.setAnswer(func(req kmsg.Request) kmsg.Response {
		resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
		resp.Topics = []kmsg.TxnOffsetCommitResponseTopic{{Topic: "in", Partitions: []kmsg.TxnOffsetCommitResponseTopicPartition{{Partition: 0}}}}
		return resp
	})
	c := b.dial(t)
	res, err := TxnOffsetCommit(context.Background(), c, testTxnProducer, GroupMetadata{GroupID: "g", Generation: -1}, offs[:1], 1)
	require.NoError(t, err)
	require.Equal(t, []PartitionErrorCode{{TopicPartition{"in", 0}, 0}}, res)
	// An answer lacking a partition is malformed.
	_, err = TxnOffsetCommit(context.Background(), c, testTxnProducer, GroupMetadata{GroupID: "g", Generation: -1}, offs, 1)
	require.ErrorIs(t, err, ErrMalformedResponse)
}
