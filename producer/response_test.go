package producer

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/longhaul-kafka/longhaul/internal/broker"
)

// ackOffsets records the baseOffset of every OnBatchAcked.
type ackOffsets struct {
	mu      sync.Mutex
	offsets []int64
}

func (a *ackOffsets) OnBatchAcked(_ BatchInfo, baseOffset int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.offsets = append(a.offsets, baseOffset)
}

// TestDuplicateAnswerIsSuccessWithoutOffset checks the promises for a
// DUPLICATE_SEQUENCE_NUMBER answer (brokers before 1.1 acknowledge a retry
// they had written that way, without its offset): HookBatchAcked gets
// baseOffset -1, the records succeed with Record.Offset -1 (Offset's doc),
// and the partition goes on in sequence: the next batch is written after
// it, each record once.
func TestDuplicateAnswerIsSuccessWithoutOffset(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, n := memCluster(t, broker.Config{Topics: []broker.TopicConfig{{Name: "t", Partitions: 1}}})
		h := &ackOffsets{}
		p := memProducer(t, c, n, Hooks(h))
		ctx := context.Background()
		require.NoError(t, p.ProduceSync(ctx, toPartition("t", 0, []byte("first"))).FirstErr())

		c.ScriptAnswers("t", 0, broker.Answer{Code: kerr.DuplicateSequenceNumber.Code, Mode: broker.AppendThenFail})
		dup := toPartition("t", 0, []byte("second"))
		require.NoError(t, p.ProduceSync(ctx, dup).FirstErr())
		require.EqualValues(t, -1, dup.Offset, "a duplicate answer tells no offset")

		next := toPartition("t", 0, []byte("third"))
		require.NoError(t, p.ProduceSync(ctx, next).FirstErr())
		require.EqualValues(t, 2, next.Offset)

		h.mu.Lock()
		offsets := append([]int64(nil), h.offsets...)
		h.mu.Unlock()
		require.Equal(t, []int64{0, -1, 2}, offsets)
		var values []string
		for _, r := range c.Records("t", 0) {
			values = append(values, string(r.Value))
		}
		require.Equal(t, []string{"first", "second", "third"}, values)
	})
}
