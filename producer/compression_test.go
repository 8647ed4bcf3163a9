package producer

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/longhaul-kafka/longhaul/internal/broker"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
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

// wireBytes counts the bytes of acknowledged batches (after compression).
type wireBytes struct{ n atomic.Int64 }

func (w *wireBytes) OnBatchAcked(b BatchInfo, _ int64) { w.n.Add(int64(b.Bytes)) }

// compressible is text-like: stronger levels find more to gain in it.
func compressible(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 1))
	words := []string{"kafka", "producer", "window", "batch", "partition", "leader", "epoch", "sequence", "record", "offset"}
	var b bytes.Buffer
	for b.Len() < n {
		fmt.Fprintf(&b, "%s %d ", words[r.IntN(len(words))], r.IntN(1000))
	}
	return b.Bytes()[:n]
}

// compression.gzip.level, compression.lz4.level and compression.zstd.level
// reach the wire: the same records take fewer bytes at the strongest level
// than at the fastest (equal sizes would mean the level was ignored), and
// read back intact.
func TestCompressionLevelsReachTheWire(t *testing.T) {
	cases := []struct {
		codec, prop        string
		fastest, strongest string
	}{
		{"gzip", "compression.gzip.level", "1", "9"},
		{"lz4", "compression.lz4.level", "9", "17"},
		{"zstd", "compression.zstd.level", "1", "19"},
	}
	for _, tc := range cases {
		t.Run(tc.codec, func(t *testing.T) {
			c := startCluster(t, broker.Config{Topics: []broker.TopicConfig{{Name: "t", Partitions: 1}}})
			size := func(level string) int64 {
				w := &wireBytes{}
				p := newTestProducer(t, c, Compression(tc.codec), Property(tc.prop, level), Hooks(w), BatchSize(64<<10))
				var rs []*Record
				for i := range 20 {
					rs = append(rs, &Record{Topic: "t", Value: compressible(uint64(i), 4000)})
				}
				require.NoError(t, p.ProduceSync(context.Background(), rs...).FirstErr())
				require.NoError(t, p.Close(context.Background()))
				return w.n.Load()
			}
			fast, strong := size(tc.fastest), size(tc.strongest)
			assert.Less(t, strong, fast, "%s=%s vs %s", tc.prop, tc.strongest, tc.fastest)
			recs := c.Records("t", 0)
			require.Len(t, recs, 40)
			for i, r := range recs {
				require.Equal(t, compressible(uint64(i%20), 4000), r.Value)
			}
		})
	}
}

// Java's defaults and ranges; a value outside the range is refused naming
// the property.
func TestCompressionLevelProperties(t *testing.T) {
	for name, want := range map[string]string{"compression.gzip.level": "-1", "compression.lz4.level": "9", "compression.zstd.level": "3"} {
		def, ok := PropertyDefault(name)
		require.True(t, ok, name)
		assert.Equal(t, want, def, name)
	}
	good := map[string][]string{
		"compression.gzip.level": {"-1", "1", "9"},
		"compression.lz4.level":  {"1", "17"},
		"compression.zstd.level": {"-131072", "0", "22"},
	}
	bad := map[string][]string{
		"compression.gzip.level": {"0", "-2", "10", "x"},
		"compression.lz4.level":  {"0", "18"},
		"compression.zstd.level": {"-131073", "23"},
	}
	for name, vs := range good {
		for _, v := range vs {
			p, err := NewFromProperties(map[string]string{"bootstrap.servers": "127.0.0.1:1", name: v})
			require.NoError(t, err, "%s=%s", name, v)
			require.NoError(t, p.Close(context.Background()))
		}
	}
	for name, vs := range bad {
		for _, v := range vs {
			_, err := NewFromProperties(map[string]string{"bootstrap.servers": "127.0.0.1:1", name: v})
			var ce *ConfigError
			require.ErrorAs(t, err, &ce, "%s=%s", name, v)
			assert.Equal(t, name, ce.Property)
		}
	}
	// The level of the chosen codec is the one used; the others are kept
	// for when the codec changes.
	c := defaultConfig()
	c.bootstrap = []string{"127.0.0.1:1"}
	require.NoError(t, c.setProperty("compression.type", "zstd"))
	require.NoError(t, c.setProperty("compression.zstd.level", "7"))
	require.NoError(t, c.setProperty("compression.gzip.level", "2"))
	require.NoError(t, c.validate())
	assert.Equal(t, 7, c.compressionLevel)
	require.NoError(t, c.setProperty("compression.type", "snappy"))
	require.NoError(t, c.validate())
	assert.Zero(t, c.compressionLevel)
}
