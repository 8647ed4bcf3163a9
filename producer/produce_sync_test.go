package producer

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/longhaul-kafka/longhaul/internal/broker"
)

// TestProduceSyncResults: one result per record, in order, each written at
// the offset its Record reports.
func TestProduceSyncResults(t *testing.T) {
	c := startCluster(t, broker.Config{Nodes: 1, Topics: []broker.TopicConfig{{Name: "t", Partitions: 2}}})
	p := newTestProducer(t, c)
	recs := make([]*Record, 6)
	for i := range recs {
		recs[i] = &Record{Topic: "t", Value: fmt.Appendf(nil, "v%d", i)}
		recs[i].SetPartition(int32(i % 2))
	}
	bad := &Record{Topic: "t", Value: []byte("bad")}
	bad.SetPartition(7)
	res := p.ProduceSync(context.Background(), append(recs, bad)...)
	require.Len(t, res, 7)
	for i, r := range res[:6] {
		require.NoError(t, r.Err)
		assert.Same(t, recs[i], r.Record)
		log := c.Records("t", r.Record.Partition())
		require.Greater(t, int64(len(log)), r.Record.Offset)
		assert.Equal(t, r.Record.Value, log[r.Record.Offset].Value)
	}
	assert.Same(t, bad, res[6].Record)
	assert.ErrorIs(t, res[6].Err, ErrInvalidRecord)
	assert.Equal(t, int64(-1), bad.Offset, "a failed record's Offset is -1")
	assert.ErrorIs(t, res.FirstErr(), ErrInvalidRecord)
	assert.NoError(t, res[:6].FirstErr())
}

// TestProduceSyncWithdrawsUnsent: records still lingering in a batch when
// ctx ends are withdrawn: ProduceSync returns with ctx's error for each, not
// FateUnknown, Offset -1, and they never reach the log, while another
// caller's record in the same batch is still delivered and buffer.memory is
// given back.
func TestProduceSyncWithdrawsUnsent(t *testing.T) {
	c := startCluster(t, broker.Config{Nodes: 1, Topics: []broker.TopicConfig{{Name: "t", Partitions: 1}}})
	p := newTestProducer(t, c, Linger(time.Hour), DeliveryTimeout(2*time.Hour))
	// Learn the partitions first, so the records below go to a batch.
	p.Produce(context.Background(), &Record{Topic: "t", Value: []byte("warm")}, nil)
	require.NoError(t, p.Flush(context.Background()))
	other := &Record{Topic: "t", Value: []byte("other")}
	otherDone := make(chan error, 1)
	p.Produce(context.Background(), other, func(_ *Record, err error) { otherDone <- err })
	recs := []*Record{{Topic: "t", Value: []byte("a")}, {Topic: "t", Value: []byte("b")}}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	res := p.ProduceSync(ctx, recs...)
	for _, r := range res {
		require.ErrorIs(t, r.Err, context.DeadlineExceeded)
		assert.False(t, IsFateUnknown(r.Err), "withdrawn records were never sent")
		assert.NotErrorIs(t, r.Err, ErrInFlight)
		assert.Equal(t, int64(-1), r.Record.Offset)
	}
	require.NoError(t, p.Flush(context.Background()))
	require.NoError(t, <-otherDone)
	var values []string
	for _, lr := range c.Records("t", 0) {
		values = append(values, string(lr.Value))
	}
	assert.Equal(t, []string{"warm", "other"}, values)
	assert.True(t, p.mem.TryAcquire(p.cfg.bufferMemory), "buffer.memory fully given back")
	p.mem.Release(p.cfg.bufferMemory)
}

// TestProduceSyncWithdrawsWaiting: records waiting for their topic's
// partitions when ctx ends are withdrawn with ctx's error.
func TestProduceSyncWithdrawsWaiting(t *testing.T) {
	c := startCluster(t, broker.Config{Nodes: 1, Topics: []broker.TopicConfig{{Name: "t", Partitions: 1}}})
	p := newTestProducer(t, c, MaxBlock(time.Hour), DeliveryTimeout(2*time.Hour))
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	res := p.ProduceSync(ctx, &Record{Topic: "nowhere", Value: []byte("x")})
	require.ErrorIs(t, res.FirstErr(), context.DeadlineExceeded)
	assert.False(t, IsFateUnknown(res.FirstErr()))
	p.acc.mu.Lock()
	assert.Empty(t, p.acc.topics["nowhere"].waiting)
	p.acc.mu.Unlock()
}

// TestProduceSyncInFlight: a record already sent when ctx ends cannot be
// withdrawn: its result is FateUnknown with ErrInFlight and ctx's error, it
// completes in the background, and after a Flush its Offset is set and it
// is in the log.
func TestProduceSyncInFlight(t *testing.T) {
	// Virtual time: the record must be in flight when ctx ends at 200 ms
	// and still unanswered then, which a 1 s stall on a real clock does
	// not promise on a loaded machine.
	synctest.Test(t, func(t *testing.T) {
		c := virtualCluster(t, broker.Config{Nodes: 1, Topics: []broker.TopicConfig{{Name: "t", Partitions: 1}}})
		p := newTestProducer(t, c)
		require.NoError(t, produceOne(t, p, &Record{Topic: "t", Value: []byte("warm")}))
		c.Stall(0, time.Second)
		r := &Record{Topic: "t", Value: []byte("sent")}
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		res := p.ProduceSync(ctx, r)
		err := res.FirstErr()
		require.ErrorIs(t, err, ErrInFlight)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.True(t, IsFateUnknown(err))
		require.NoError(t, p.Flush(context.Background()))
		assert.Equal(t, int64(1), r.Offset, "written in the background")
		assert.Len(t, c.Records("t", 0), 2)
	})
}
