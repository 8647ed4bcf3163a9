package kafkatest

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/longhaul-kafka/longhaul/protocol"
)

// TestTxnFirstSequenceProbe checks, with raw requests, what the
// producer's gate decision at the transaction version 2 epoch bump rests
// on (producer/DESIGN.md, "The gate at the version 2 bump"): a version 2
// transaction's first batch on a fresh partition, sent at base sequence 7
// with Produce v12, is written by Kafka 4.0.1 (it takes a first batch at
// any sequence, as for an idempotent producer without state) and refused
// OUT_OF_ORDER_SEQUENCE_NUMBER by Kafka 4.4.0 (the answer has no message;
// the broker logs "Expected sequence 0 for transactions v2", KAFKA-18202,
// from 4.1). Both are formatted at transaction.version 2 and probed the
// same way: FindCoordinator, InitProducerId with a transactional id, then
// the Produce, which adds the partition to the transaction (KIP-890). On
// 4.0.1 the transaction is then committed (EndTxn) and the record read
// read_committed. One single-node cluster per release.
//
//	go test ./internal/kafkatest/ -run TestTxnFirstSequenceProbe -v
func TestTxnFirstSequenceProbe(t *testing.T) {
	for _, tc := range []struct {
		release  Release
		accepted bool
	}{
		{Kafka40, true},
		{Kafka44, false},
	} {
		t.Run(tc.release.version(), func(t *testing.T) {
			began := time.Now()
			c := Start(t, Options{Release: tc.release, Features: map[string]int{protocol.FeatureTransactionVersion: 2}})
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			addr := c.DirectAddr(0)
			av, err := APIVersions(ctx, addr)
			require.NoError(t, err)
			level := int16(-1)
			for _, f := range av.FinalizedFeatures {
				if f.Name == protocol.FeatureTransactionVersion {
					level = f.MaxVersionLevel
				}
			}
			require.EqualValues(t, 2, level, "finalized transaction.version")
			_, maxProduce, _ := VersionRange(av, produceKey)
			require.GreaterOrEqual(t, maxProduce, int16(12), "Produce v12: partitions added by the Produce")

			const topic = "probe-first-seq"
			c.CreateTopic(t, topic, 1, 1, nil)
			txnID := "probe-first-seq-" + tc.release.version()
			// FindCoordinator creates the transaction state topic; before,
			// InitProducerId is answered NOT_COORDINATOR.
			require.Zero(t, txnCoordinator(t, ctx, c, txnID), "the coordinator of a single node")
			pid, epoch := initTxnProducerID(t, ctx, addr, txnID)

			conn, err := Dial(ctx, addr)
			require.NoError(t, err)
			defer conn.Close()
			req := kmsg.NewPtrProduceRequest()
			req.Version = 12
			req.TransactionID = &txnID
			req.Acks = -1
			req.TimeoutMillis = 30000
			rt := kmsg.NewProduceRequestTopic()
			rt.Topic = topic
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.Partition = 0
			rp.Records = TransactionalBatch(pid, epoch, 7, [][]byte{[]byte("first-at-7")})
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			var pr kmsg.ProduceResponseTopicPartition
			for {
				resp, err := conn.Request(ctx, req)
				require.NoError(t, err, "Produce v12")
				r := resp.(*kmsg.ProduceResponse)
				require.Len(t, r.Topics, 1)
				require.Len(t, r.Topics[0].Partitions, 1)
				pr = r.Topics[0].Partitions[0]
				err = kerr.ErrorForCode(pr.ErrorCode)
				// The leader verifies the partition with the coordinator
				// first; a coordinator still loading is retried, as a
				// producer would.
				if err == nil || errors.Is(err, kerr.OutOfOrderSequenceNumber) || !kerr.IsRetriable(err) {
					break
				}
				t.Logf("Produce v12: %v, again", err)
				select {
				case <-ctx.Done():
					t.Fatalf("Produce v12: %v (last %v)", ctx.Err(), err)
				case <-time.After(100 * time.Millisecond):
				}
			}
			t.Logf("Kafka %s, transaction.version 2, Produce v12, first batch of producer %d epoch %d at sequence 7: error %v, message %q, base offset %d (%v with the cluster start)",
				tc.release.version(), pid, epoch, kerr.ErrorForCode(pr.ErrorCode), deref(pr.ErrorMessage), pr.BaseOffset, time.Since(began).Round(time.Millisecond))
			if tc.accepted {
				require.Zero(t, pr.ErrorCode, "Kafka %s writes the first batch at sequence 7: %v %s", tc.release.version(), kerr.ErrorForCode(pr.ErrorCode), deref(pr.ErrorMessage))
				require.Zero(t, pr.BaseOffset, "written at the partition's start")
				// And it is the transaction's data: committed, it is read.
				endTxnCommit(t, ctx, addr, txnID, pid, epoch)
				got := readCommittedTopic(t, c, topic, 1)
				require.Equal(t, []string{"first-at-7"}, got[0], "read_committed after the commit")
				return
			}
			require.ErrorIs(t, kerr.ErrorForCode(pr.ErrorCode), kerr.OutOfOrderSequenceNumber)
			// The answer carries no message; the broker logs the reason.
			const why = "Expected sequence 0 for transactions v2"
			deadline := time.Now().Add(30 * time.Second)
			for {
				log, err := os.ReadFile(c.LogFile(0))
				require.NoError(t, err)
				if strings.Contains(string(log), why) {
					break
				}
				require.True(t, time.Now().Before(deadline), "the broker log does not say %q", why)
				time.Sleep(100 * time.Millisecond)
			}
		})
	}
}

// initTxnProducerID sends InitProducerId for transactional id txnID to
// the broker at addr, its coordinator, retrying while the coordinator is
// loading its partition of the transaction state topic.
func initTxnProducerID(t *testing.T, ctx context.Context, addr, txnID string) (int64, int16) {
	t.Helper()
	for {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionalID = &txnID
		req.TransactionTimeoutMillis = 60000
		resp, err := requestNode(ctx, addr, req)
		if err == nil {
			ip := resp.(*kmsg.InitProducerIDResponse)
			if err = kerr.ErrorForCode(ip.ErrorCode); err == nil {
				return ip.ProducerID, ip.ProducerEpoch
			}
			if !kerr.IsRetriable(err) {
				t.Fatalf("InitProducerId %s: %v", txnID, err)
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("InitProducerId %s: %v (last %v)", txnID, ctx.Err(), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// endTxnCommit commits the open transaction of txnID with EndTxn at the
// highest version both sides know (v5 under transaction version 2).
func endTxnCommit(t *testing.T, ctx context.Context, addr, txnID string, pid int64, epoch int16) {
	t.Helper()
	for {
		req := kmsg.NewPtrEndTxnRequest()
		req.TransactionalID = txnID
		req.ProducerID, req.ProducerEpoch, req.Commit = pid, epoch, true
		resp, err := requestNode(ctx, addr, req)
		require.NoError(t, err, "EndTxn")
		err = kerr.ErrorForCode(resp.(*kmsg.EndTxnResponse).ErrorCode)
		if err == nil {
			return
		}
		require.True(t, kerr.IsRetriable(err), "EndTxn: %v", err)
		select {
		case <-ctx.Done():
			t.Fatalf("EndTxn: %v (last %v)", ctx.Err(), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
