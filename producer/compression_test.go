package producer

import (
	"bytes"
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/longhaul-kafka/longhaul/internal/broker"
)

// TestCompressionSkippedWhenItDoesNotHelp: with compression.type=lz4, a
// batch of random bytes (which lz4 cannot shrink) is written uncompressed
// and a batch of repetitive bytes compressed; both read back intact with
// kgo, which reports each batch's codec.
func TestCompressionSkippedWhenItDoesNotHelp(t *testing.T) {
	c := startCluster(t, broker.Config{Nodes: 1, Topics: []broker.TopicConfig{{Name: "t", Partitions: 2}}})
	p := newTestProducer(t, c, Compression("lz4"))
	random := make([]byte, 2000)
	_, _ = rand.NewChaCha8([32]byte{7}).Read(random)
	repetitive := bytes.Repeat([]byte("longhaul"), 250)
	rr := &Record{Topic: "t", Value: random}
	rr.SetPartition(0)
	rp := &Record{Topic: "t", Value: repetitive}
	rp.SetPartition(1)
	require.NoError(t, produceOne(t, p, rr))
	require.NoError(t, produceOne(t, p, rp))

	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addr()), kgo.ConsumeTopics("t"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	codec := map[int32]uint8{}
	for len(codec) < 2 {
		fs := cl.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "read back %d of 2 records", len(codec))
		fs.EachRecord(func(r *kgo.Record) {
			codec[r.Partition] = r.Attrs.CompressionType()
			if r.Partition == 0 {
				assert.Equal(t, random, r.Value)
			} else {
				assert.Equal(t, repetitive, r.Value)
			}
		})
	}
	assert.Equal(t, uint8(0), codec[0], "random bytes: sent uncompressed")
	assert.Equal(t, uint8(3), codec[1], "repetitive bytes: lz4 (3)")
}
