package protocol

import (
	"context"
	"fmt"
	"math"
	"net"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// This file holds the requests of a transactional producer (KIP-98,
// KIP-447, KIP-890). Like the rest of the package they return error codes
// as numbers without interpreting them or retrying; err is only for
// transport and decoding failures, and for a request this connection
// cannot send at the versions the transaction needs.

// API keys of the transactional requests.
const (
	keyFindCoordinator    int16 = 10
	keyInitProducerID     int16 = 22
	keyAddPartitionsToTxn int16 = 24
	keyAddOffsetsToTxn    int16 = 25
	keyEndTxn             int16 = 26
	keyTxnOffsetCommit    int16 = 28
)

// Versions the transactional requests are sent at, at most. InitProducerId
// v6 carries two-phase commit (KIP-939), which no Kafka release serves as
// stable; AddPartitionsToTxn v4+ is the brokers' own batched form;
// TxnOffsetCommit v6 names topics by id.
const (
	maxTxnInitProducerID     int16 = 5
	maxTxnAddPartitionsToTxn int16 = 3
	maxTxnOffsetCommit       int16 = 5
	maxTxnEndTxn             int16 = 5
	// Under transaction version 1 EndTxn and TxnOffsetCommit stay at v4
	// and Produce at v11: the next versions mean "the partition or the
	// offsets are added by this request" (KIP-890 part 2).
	maxTV1EndTxn          int16 = 4
	maxTV1TxnOffsetCommit int16 = 4
	// MaxTV1ProduceVersion is the highest Produce version a transactional
	// batch may be sent at under transaction version 1: from v12 a
	// broker with transaction version 2 adds the partition to the
	// transaction itself, which a version 1 transaction does not expect.
	MaxTV1ProduceVersion int16 = 11
)

// FeatureTransactionVersion is the finalized feature that tells which
// transaction protocol a cluster runs (KIP-890, KIP-1022).
const FeatureTransactionVersion = "transaction.version"

// FinalizedFeature returns the finalized max level of the feature name from
// the ApiVersions answer that opened c (v3+, KIP-584); ok is false when the
// broker reported no such feature (older brokers report none).
func (c *Conn) FinalizedFeature(name string) (level int16, ok bool) {
	level, ok = c.features[name]
	return level, ok
}

// FinalizedFeaturesEpoch returns the epoch of the finalized features c was
// told, -1 when the broker reported none. Brokers learn feature changes at
// different moments; the answer with the highest epoch is the newest.
func (c *Conn) FinalizedFeaturesEpoch() int64 { return c.featuresEpoch }

// TxnVersion returns the transaction protocol c can run: 2 when the
// cluster finalized transaction.version 2 or more and c negotiated Produce
// v12+, EndTxn v5+ and TxnOffsetCommit v5+ (partitions and offsets are
// added implicitly and every EndTxn returns the next epoch); 1 when c has
// InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn and
// TxnOffsetCommit (Kafka 0.11+: the client adds partitions and offsets
// itself; transaction versions 0 and 1 look the same to a client); 0 when
// it cannot run transactions at all.
func TxnVersion(c *Conn) int {
	for _, k := range []int16{keyInitProducerID, keyAddPartitionsToTxn, keyAddOffsetsToTxn, keyEndTxn, keyTxnOffsetCommit} {
		if _, ok := c.Version(k); !ok {
			return 0
		}
	}
	if pv, ok := c.Version(0); !ok || pv < 3 {
		return 0
	}
	tv, _ := c.FinalizedFeature(FeatureTransactionVersion)
	pv, _ := c.Version(0)
	ev, _ := c.Version(keyEndTxn)
	ov, _ := c.Version(keyTxnOffsetCommit)
	if tv >= 2 && pv >= 12 && ev >= 5 && ov >= 5 {
		return 2
	}
	return 1
}

// TxnProducer names the producer a transactional request is for: its
// transactional id and the producer id and epoch InitProducerId gave it.
type TxnProducer struct {
	TransactionalID string
	ProducerID      int64
	Epoch           int16
}

// Coordinator key types of [FindCoordinator].
const (
	CoordinatorGroup       int8 = 0 // a consumer group's coordinator
	CoordinatorTransaction int8 = 1 // a transactional id's coordinator
)

// CoordinatorResult is the answer of [FindCoordinator] for one key.
type CoordinatorResult struct {
	// ErrorCode is the key's error code, 0 for none.
	ErrorCode int16
	// ErrorMessage is the broker's message, "" if none.
	ErrorMessage string
	// NodeID and Addr ("host:port") name the coordinator when ErrorCode
	// is 0.
	NodeID int32
	Addr   string
}

// FindCoordinator asks c for the coordinator of key: a group
// ([CoordinatorGroup]) or a transactional id ([CoordinatorTransaction]).
// FindCoordinator v4+ is sent in its batched form with the one key. A
// transactional id needs v1+ (Kafka 0.11); without it the error wraps
// [ErrUnsupportedVersion]. An answer without an error code that names no
// usable coordinator (node id below 0, no host, a port outside 1..65535),
// or a batched answer that lacks the key, is an error wrapping
// [ErrMalformedResponse].
func FindCoordinator(ctx context.Context, c *Conn, keyType int8, key string) (CoordinatorResult, error) {
	v, ok := c.Version(keyFindCoordinator)
	if !ok || (keyType != CoordinatorGroup && v < 1) {
		return CoordinatorResult{}, fmt.Errorf("%w: broker %s cannot find coordinators of key type %d", ErrUnsupportedVersion, c.Addr(), keyType)
	}
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorType = keyType
	if v >= 4 {
		req.CoordinatorKeys = []string{key}
	} else {
		req.CoordinatorKey = key
	}
	r, err := c.Do(ctx, req)
	if err != nil {
		return CoordinatorResult{}, err
	}
	return findCoordinatorResult(r.(*kmsg.FindCoordinatorResponse), key)
}

// findCoordinatorResult turns the answer for key into our result.
func findCoordinatorResult(resp *kmsg.FindCoordinatorResponse, key string) (CoordinatorResult, error) {
	var out CoordinatorResult
	var host string
	var port int32
	if resp.Version >= 4 {
		found := false
		for _, co := range resp.Coordinators {
			if co.Key != key {
				continue
			}
			found = true
			out.ErrorCode, out.NodeID = co.ErrorCode, co.NodeID
			out.ErrorMessage = deref(co.ErrorMessage)
			host, port = co.Host, co.Port
			break
		}
		if !found {
			return CoordinatorResult{}, fmt.Errorf("%w: FindCoordinator answer lacks key %q", ErrMalformedResponse, key)
		}
	} else {
		out.ErrorCode, out.NodeID = resp.ErrorCode, resp.NodeID
		out.ErrorMessage = deref(resp.ErrorMessage)
		host, port = resp.Host, resp.Port
	}
	if out.ErrorCode != 0 {
		out.NodeID = -1
		return out, nil
	}
	if out.NodeID < 0 || host == "" || port <= 0 || port > math.MaxUint16 {
		return CoordinatorResult{}, fmt.Errorf("%w: FindCoordinator for %q names node %d at %q port %d without an error code",
			ErrMalformedResponse, key, out.NodeID, host, port)
	}
	out.Addr = net.JoinHostPort(host, strconv.Itoa(int(port)))
	return out, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// InitTxnResult is the answer of [InitTransactionalID].
type InitTxnResult struct {
	// ErrorCode is the error code, 0 for none; with one, ProducerID and
	// Epoch are -1.
	ErrorCode  int16
	ProducerID int64
	Epoch      int16
}

// InitTransactionalID sends InitProducerId for transactionalID to its
// transaction coordinator c, with the transaction timeout (rounded down to
// milliseconds; it must be between 1 ms and math.MaxInt32 ms, the broker
// caps it at transaction.max.timeout.ms). Pass -1, -1 as producerID and
// epoch for the first call of a producer; pass its current ones to bump the
// epoch and learn whether another producer took the id (KIP-360, v3+: on
// older brokers the current ones are not sent, and the coordinator bumps
// the epoch of the id all the same). It is sent at v5 at most: v6 asks for
// two-phase commit (KIP-939). An empty transactional id or a timeout out of
// range is refused without sending. An answer without an error code whose
// id or epoch is negative is an error wrapping [ErrMalformedResponse].
func InitTransactionalID(ctx context.Context, c *Conn, transactionalID string, timeout time.Duration, producerID int64, epoch int16) (InitTxnResult, error) {
	fail := InitTxnResult{ProducerID: -1, Epoch: -1}
	if transactionalID == "" {
		return fail, fmt.Errorf("protocol: InitProducerId with an empty transactional id")
	}
	ms := timeout.Milliseconds()
	if ms < 1 || ms > math.MaxInt32 {
		return fail, fmt.Errorf("protocol: transaction timeout %v out of range (1ms..%dms)", timeout, math.MaxInt32)
	}
	if _, ok := c.Version(keyInitProducerID); !ok {
		return fail, fmt.Errorf("%w: broker %s has no InitProducerId (Kafka before 0.11)", ErrUnsupportedVersion, c.Addr())
	}
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionalID = &transactionalID
	req.TransactionTimeoutMillis = int32(ms)
	req.ProducerID, req.ProducerEpoch = -1, -1
	if v, _ := c.Version(keyInitProducerID); v >= 3 {
		req.ProducerID, req.ProducerEpoch = producerID, epoch
	}
	r, err := c.do(ctx, req, maxTxnInitProducerID)
	if err != nil {
		return fail, err
	}
	return initTxnResult(r.(*kmsg.InitProducerIDResponse), c.Addr())
}

func initTxnResult(resp *kmsg.InitProducerIDResponse, addr string) (InitTxnResult, error) {
	if resp.ErrorCode != 0 {
		return InitTxnResult{ErrorCode: resp.ErrorCode, ProducerID: -1, Epoch: -1}, nil
	}
	if resp.ProducerID < 0 || resp.ProducerEpoch < 0 {
		return InitTxnResult{ProducerID: -1, Epoch: -1}, fmt.Errorf("%w: InitProducerId from %s gave producer id %d epoch %d without an error code",
			ErrMalformedResponse, addr, resp.ProducerID, resp.ProducerEpoch)
	}
	return InitTxnResult{ProducerID: resp.ProducerID, Epoch: resp.ProducerEpoch}, nil
}

// TopicPartition names one partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// PartitionErrorCode is one partition's error code in an answer.
type PartitionErrorCode struct {
	TopicPartition
	ErrorCode int16
}

// AddPartitionsToTxn adds partitions to p's open transaction at the
// transaction coordinator c (transaction version 1: under version 2 the
// first Produce of a partition adds it). It is sent in the clients' form,
// v3 at most. The result has one entry per distinct partition asked, in
// the order asked; an answer that lacks one is an error wrapping
// [ErrMalformedResponse], partitions not asked for are ignored.
func AddPartitionsToTxn(ctx context.Context, c *Conn, p TxnProducer, partitions []TopicPartition) ([]PartitionErrorCode, error) {
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch = p.TransactionalID, p.ProducerID, p.Epoch
	idx := map[string]int{}
	asked := map[TopicPartition]bool{}
	var order []TopicPartition
	for _, tp := range partitions {
		if asked[tp] {
			continue
		}
		asked[tp] = true
		order = append(order, tp)
		i, ok := idx[tp.Topic]
		if !ok {
			i = len(req.Topics)
			idx[tp.Topic] = i
			rt := kmsg.NewAddPartitionsToTxnRequestTopic()
			rt.Topic = tp.Topic
			req.Topics = append(req.Topics, rt)
		}
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, tp.Partition)
	}
	r, err := c.do(ctx, req, maxTxnAddPartitionsToTxn)
	if err != nil {
		return nil, err
	}
	return addPartitionsResult(r.(*kmsg.AddPartitionsToTxnResponse), order)
}

func addPartitionsResult(resp *kmsg.AddPartitionsToTxnResponse, order []TopicPartition) ([]PartitionErrorCode, error) {
	got := make(map[TopicPartition]int16, len(order))
	for _, t := range resp.Topics {
		for _, pp := range t.Partitions {
			got[TopicPartition{t.Topic, pp.Partition}] = pp.ErrorCode
		}
	}
	return inOrder("AddPartitionsToTxn", got, order)
}

// inOrder lists got's codes for order, failing on one missing.
func inOrder(api string, got map[TopicPartition]int16, order []TopicPartition) ([]PartitionErrorCode, error) {
	out := make([]PartitionErrorCode, 0, len(order))
	for _, tp := range order {
		code, ok := got[tp]
		if !ok {
			return nil, fmt.Errorf("%w: %s answer lacks %s/%d", ErrMalformedResponse, api, tp.Topic, tp.Partition)
		}
		out = append(out, PartitionErrorCode{tp, code})
	}
	return out, nil
}

// AddOffsetsToTxn adds the offsets partition of group to p's open
// transaction at the transaction coordinator c (transaction version 1;
// under version 2 [TxnOffsetCommit] adds it). It returns the error code.
func AddOffsetsToTxn(ctx context.Context, c *Conn, p TxnProducer, group string) (errorCode int16, err error) {
	req := kmsg.NewPtrAddOffsetsToTxnRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch = p.TransactionalID, p.ProducerID, p.Epoch
	req.Group = group
	r, err := c.Do(ctx, req)
	if err != nil {
		return 0, err
	}
	return r.(*kmsg.AddOffsetsToTxnResponse).ErrorCode, nil
}

// EndTxnResult is the answer of [EndTxn].
type EndTxnResult struct {
	// ErrorCode is the error code, 0 for none.
	ErrorCode int16
	// ProducerID and Epoch are, under transaction version 2 (EndTxn v5)
	// and without an error, what the next transaction uses: the epoch
	// one higher, or a new producer id at epoch 0 when the epoch would
	// overflow. Otherwise they are -1.
	ProducerID int64
	Epoch      int16
}

// EndTxn commits (commit true) or aborts p's transaction at the
// transaction coordinator c, under transaction version tv (1 or 2, as the
// transaction began: see [TxnVersion]). Version 2 needs EndTxn v5, else
// the error wraps [ErrUnsupportedVersion]; version 1 sends v4 at most. A v5
// answer without an error code whose producer id or epoch is negative is
// an error wrapping [ErrMalformedResponse].
func EndTxn(ctx context.Context, c *Conn, p TxnProducer, commit bool, tv int) (EndTxnResult, error) {
	fail := EndTxnResult{ProducerID: -1, Epoch: -1}
	atMost := maxTV1EndTxn
	if tv >= 2 {
		if v, _ := c.Version(keyEndTxn); v < 5 {
			return fail, fmt.Errorf("%w: transaction version 2 needs EndTxn v5, broker %s has v%d", ErrUnsupportedVersion, c.Addr(), v)
		}
		atMost = maxTxnEndTxn
	}
	req := kmsg.NewPtrEndTxnRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch = p.TransactionalID, p.ProducerID, p.Epoch
	req.Commit = commit
	r, err := c.do(ctx, req, atMost)
	if err != nil {
		return fail, err
	}
	return endTxnResult(r.(*kmsg.EndTxnResponse), c.Addr())
}

func endTxnResult(resp *kmsg.EndTxnResponse, addr string) (EndTxnResult, error) {
	out := EndTxnResult{ErrorCode: resp.ErrorCode, ProducerID: -1, Epoch: -1}
	if resp.ErrorCode != 0 || resp.Version < 5 {
		return out, nil
	}
	if resp.ProducerID < 0 || resp.ProducerEpoch < 0 {
		return EndTxnResult{ProducerID: -1, Epoch: -1}, fmt.Errorf("%w: EndTxn v%d from %s gave producer id %d epoch %d without an error code",
			ErrMalformedResponse, resp.Version, addr, resp.ProducerID, resp.ProducerEpoch)
	}
	out.ProducerID, out.Epoch = resp.ProducerID, resp.ProducerEpoch
	return out, nil
}

// GroupMetadata is what a consumer knows of its group membership, sent
// with offsets committed in a transaction so the group coordinator can
// refuse a zombie's commit (KIP-447).
type GroupMetadata struct {
	GroupID string
	// Generation is the group's generation, -1 if unknown.
	Generation int32
	// MemberID is the consumer's member id, "" if unknown.
	MemberID string
	// InstanceID is the static member's group.instance.id, nil if none.
	InstanceID *string
}

// TxnOffset is one offset committed by [TxnOffsetCommit].
type TxnOffset struct {
	TopicPartition
	// Offset is the next offset the consumer reads.
	Offset int64
	// LeaderEpoch is the leader epoch of the last record consumed, -1 if
	// unknown (sent from v2).
	LeaderEpoch int32
	// Metadata is the commit's metadata, nil for none.
	Metadata *string
}

// TxnOffsetCommit commits offsets within p's transaction at the group
// coordinator c of g.GroupID, under transaction version tv (1 or 2, as
// the transaction began). Version 2 needs TxnOffsetCommit v5 (which also
// adds the group to the transaction), else the error wraps
// [ErrUnsupportedVersion]; version 1 sends v4 at most, after
// [AddOffsetsToTxn]. The group metadata is sent from v3 (Kafka 2.5); a
// broker below that cannot fence zombies, so metadata other than
// generation -1 and an empty member id is refused there with an error
// wrapping [ErrUnsupportedVersion]. The result has one entry per distinct
// partition asked, in the order asked; an answer that lacks one is an
// error wrapping [ErrMalformedResponse].
func TxnOffsetCommit(ctx context.Context, c *Conn, p TxnProducer, g GroupMetadata, offsets []TxnOffset, tv int) ([]PartitionErrorCode, error) {
	v, ok := c.Version(keyTxnOffsetCommit)
	if !ok {
		return nil, fmt.Errorf("%w: broker %s has no TxnOffsetCommit", ErrUnsupportedVersion, c.Addr())
	}
	atMost := maxTV1TxnOffsetCommit
	if tv >= 2 {
		if v < 5 {
			return nil, fmt.Errorf("%w: transaction version 2 needs TxnOffsetCommit v5, broker %s has v%d", ErrUnsupportedVersion, c.Addr(), v)
		}
		atMost = maxTxnOffsetCommit
	}
	if min(v, atMost) < 3 && (g.Generation != -1 || g.MemberID != "" || g.InstanceID != nil) {
		return nil, fmt.Errorf("%w: broker %s has TxnOffsetCommit v%d, group metadata needs v3 (Kafka 2.5)", ErrUnsupportedVersion, c.Addr(), v)
	}
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch = p.TransactionalID, p.ProducerID, p.Epoch
	req.Group, req.Generation, req.MemberID, req.InstanceID = g.GroupID, g.Generation, g.MemberID, g.InstanceID
	idx := map[string]int{}
	asked := map[TopicPartition]bool{}
	var order []TopicPartition
	for _, o := range offsets {
		if asked[o.TopicPartition] {
			continue
		}
		asked[o.TopicPartition] = true
		order = append(order, o.TopicPartition)
		i, ok := idx[o.Topic]
		if !ok {
			i = len(req.Topics)
			idx[o.Topic] = i
			rt := kmsg.NewTxnOffsetCommitRequestTopic()
			rt.Topic = o.Topic
			req.Topics = append(req.Topics, rt)
		}
		rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata = o.Partition, o.Offset, o.LeaderEpoch, o.Metadata
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
	}
	r, err := c.do(ctx, req, atMost)
	if err != nil {
		return nil, err
	}
	return txnOffsetCommitResult(r.(*kmsg.TxnOffsetCommitResponse), order)
}

func txnOffsetCommitResult(resp *kmsg.TxnOffsetCommitResponse, order []TopicPartition) ([]PartitionErrorCode, error) {
	got := make(map[TopicPartition]int16, len(order))
	for _, t := range resp.Topics {
		for _, pp := range t.Partitions {
			got[TopicPartition{t.Topic, pp.Partition}] = pp.ErrorCode
		}
	}
	return inOrder("TxnOffsetCommit", got, order)
}
