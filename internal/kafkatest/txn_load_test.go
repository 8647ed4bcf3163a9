package kafkatest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/longhaul-kafka/longhaul/producer"
)

// TestTxnLoadForgetsLastEpochOnKafka checks on Kafka 4.4 (one node,
// transaction version 2) what the embedded broker's coordinator does
// when it loads a transactional id (internal/broker
// TestTxnLoadForgetsLastEpoch, TestTxnNewInstanceForgetsLastEpoch): an
// InitProducerId bump retried at the coordinator that bumped is
// answered the current pair; once the coordinator loaded the id again
// (the node restarted, replaying __transaction_state) the same retry is
// PRODUCER_FENCED, while the current pair bumps; and after a bump without
// an epoch (a new instance) the previous pair's InitProducerId is
// PRODUCER_FENCED, not taken as a retry. About 40 s.
//
//	go test ./internal/kafkatest/ -run TestTxnLoadForgetsLastEpochOnKafka -v
func TestTxnLoadForgetsLastEpochOnKafka(t *testing.T) {
	c := Start(t, Options{Release: Kafka44, BrokerConfig: map[string]string{
		"transaction.state.log.replication.factor": "1",
		"transaction.state.log.min.isr":            "1",
		"offsets.topic.replication.factor":         "1",
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const id = "load-forgets-last-epoch"
	p := newLonghaul(t, c.Bootstrap(), nil, producer.TransactionalID(id))
	require.NoError(t, p.InitTransactions(ctx))
	require.NoError(t, p.Close(ctx))
	st, ok := describeTxn(t, ctx, c, id)
	require.True(t, ok)
	pid, epoch := st.ProducerID, st.ProducerEpoch

	// init sends InitProducerId v5 for id with the expected pair, waiting
	// out a coordinator that loads, and returns the answer.
	init := func(pid int64, epoch int16) *kmsg.InitProducerIDResponse {
		t.Helper()
		for range 300 {
			req := kmsg.NewPtrInitProducerIDRequest()
			req.TransactionalID = kmsg.StringPtr(id)
			req.TransactionTimeoutMillis = 60000
			req.ProducerID, req.ProducerEpoch = pid, epoch
			resp := cuRequest(t, ctx, c, req, 5).(*kmsg.InitProducerIDResponse)
			switch resp.ErrorCode {
			case kerr.CoordinatorLoadInProgress.Code, kerr.CoordinatorNotAvailable.Code, kerr.NotCoordinator.Code, kerr.ConcurrentTransactions.Code:
				time.Sleep(100 * time.Millisecond)
				continue
			}
			return resp
		}
		t.Fatalf("InitProducerId(%d, %d): the coordinator never answered", pid, epoch)
		return nil
	}
	pair := func(what string, r *kmsg.InitProducerIDResponse, pid int64, epoch int16) {
		t.Helper()
		t.Logf("%s: %s, %d/%d", what, errName(r.ErrorCode), r.ProducerID, r.ProducerEpoch)
		require.Zero(t, r.ErrorCode, what)
		require.Equal(t, [2]int64{pid, int64(epoch)}, [2]int64{r.ProducerID, int64(r.ProducerEpoch)}, what)
	}
	fenced := func(what string, r *kmsg.InitProducerIDResponse) {
		t.Helper()
		t.Logf("%s: %s", what, errName(r.ErrorCode))
		require.Equal(t, kerr.ProducerFenced.Code, r.ErrorCode, what)
	}

	pair("bump", init(pid, epoch), pid, epoch+1)
	pair("the bump retried at the coordinator that bumped", init(pid, epoch), pid, epoch+1)
	c.StopNode(0)
	c.RestartNode(t, 0)
	fenced("the bump retried after the coordinator loaded the id", init(pid, epoch))
	pair("the current pair", init(pid, epoch+1), pid, epoch+2)
	pair("a new instance (no epoch)", init(-1, -1), pid, epoch+3)
	fenced("the previous instance's pair", init(pid, epoch+2))
}
