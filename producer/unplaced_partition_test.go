package producer

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-kafka/longhaul/internal/broker"
)

// TestUnplacedRecordPartitionIsMinusOne checks Record.Partition's "-1 for
// a record neither placed nor given a partition, for example one that
// failed while its topic's partitions were unknown", also for a Record
// reused after a success placed it (its old partition must not show), and
// for a keyed record, whose partition needs the count too. Offset is -1 as
// after any failure.
func TestUnplacedRecordPartitionIsMinusOne(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, n := memCluster(t, broker.Config{Topics: []broker.TopicConfig{{Name: "t", Partitions: 4}}})
		p := memProducer(t, c, n, MaxBlock(300*time.Millisecond))
		ctx := context.Background()
		reused := &Record{Topic: "t", Key: []byte("k3"), Value: []byte("v")}
		require.NoError(t, p.ProduceSync(ctx, reused).FirstErr())
		require.GreaterOrEqual(t, reused.Partition(), int32(0))
		require.GreaterOrEqual(t, reused.Offset, int64(0))

		reused.Topic = "missing"
		keyless := &Record{Topic: "missing", Value: []byte("v")}
		for _, r := range []*Record{reused, keyless} {
			err := p.ProduceSync(ctx, r).FirstErr()
			require.ErrorIs(t, err, ErrTopicMetadata)
			require.EqualValues(t, -1, r.Partition(), "key %q", r.Key)
			require.EqualValues(t, -1, r.Offset)
			require.False(t, r.PartitionFixed())
		}
	})
}
