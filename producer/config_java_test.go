package producer

// Tests that configurations the Java client accepts are read as it reads
// them: delivery.timeout.ms defaulting, buffer.memory below
// max.request.size, batch.size 0, booleans and trimmed values.

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/longhaul-kafka/longhaul/internal/broker"
)

// TestDeliveryTimeoutFollowsJavaDefaulting: a pasted Java config that
// raises request.timeout.ms (or linger.ms) past the default
// delivery.timeout.ms works in the Java client, which raises the unset
// delivery.timeout.ms to linger.ms + request.timeout.ms (KafkaProducer's
// configureDeliveryTimeout); only an explicit delivery.timeout.ms below
// that sum is an error there. It was a ConfigError here, naming a property
// the user never set.
func TestDeliveryTimeoutFollowsJavaDefaulting(t *testing.T) {
	p, err := NewFromProperties(map[string]string{"bootstrap.servers": "127.0.0.1:1", "request.timeout.ms": "200000", "linger.ms": "50"})
	require.NoError(t, err)
	assert.Equal(t, 200050*time.Millisecond, p.cfg.deliveryTimeout)
	require.NoError(t, p.Close(t.Context()))

	q, err := New(BootstrapServers("127.0.0.1:1"), RequestTimeout(150*time.Second))
	require.NoError(t, err)
	assert.Equal(t, 150005*time.Millisecond, q.cfg.deliveryTimeout, "linger.ms 5 + request.timeout.ms")
	require.NoError(t, q.Close(t.Context()))

	// Set explicitly, below the sum: an error, as in Java, whichever
	// order the options come in.
	for _, opts := range [][]Opt{
		{DeliveryTimeout(100 * time.Second), RequestTimeout(150 * time.Second)},
		{RequestTimeout(150 * time.Second), DeliveryTimeout(100 * time.Second)},
	} {
		_, err = New(append([]Opt{BootstrapServers("127.0.0.1:1")}, opts...)...)
		var ce *ConfigError
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, "delivery.timeout.ms", ce.Property)
	}
	// The default is kept when it is large enough.
	r, err := New(BootstrapServers("127.0.0.1:1"))
	require.NoError(t, err)
	assert.Equal(t, 120*time.Second, r.cfg.deliveryTimeout)
	require.NoError(t, r.Close(t.Context()))
}

// TestBufferMemoryBelowMaxRequestSize: the Java client accepts a
// buffer.memory below max.request.size (a small container's producer sets
// buffer.memory alone) and fails only the records larger than
// buffer.memory, as Produce's doc says ("larger than max.request.size or
// buffer.memory ... fails at once"). New refused such a config.
func TestBufferMemoryBelowMaxRequestSize(t *testing.T) {
	c := startCluster(t, broker.Config{Topics: []broker.TopicConfig{{Name: "t", Partitions: 1}}})
	p := newTestProducer(t, c, Property("buffer.memory", "65536"))
	small := &Record{Topic: "t", Value: make([]byte, 40000)}
	big := &Record{Topic: "t", Value: make([]byte, 70000)} // under max.request.size, over buffer.memory
	res := p.ProduceSync(t.Context(), small, big)
	require.NoError(t, res[0].Err)
	require.ErrorIs(t, res[1].Err, ErrRecordTooLarge)
	require.Len(t, c.Records("t", 0), 1)
}

// TestBatchSizeZeroDisablesBatching: the Java client accepts batch.size=0
// ("a batch size of zero will disable batching entirely"); a pasted
// config with it was a ConfigError. It makes every record a batch of its
// own, as a batch.size below any record does.
func TestBatchSizeZeroDisablesBatching(t *testing.T) {
	c := startCluster(t, broker.Config{Topics: []broker.TopicConfig{{Name: "t", Partitions: 1}}})
	p := newTestProducer(t, c, Property("batch.size", "0"), Linger(time.Second))
	recs := []*Record{{Topic: "t", Value: []byte("a")}, {Topic: "t", Value: []byte("b")}, {Topic: "t", Value: []byte("c")}}
	require.NoError(t, p.ProduceSync(t.Context(), recs...).FirstErr())
	assert.Equal(t, int64(3), p.Stats().BatchesSent, "one batch per record")
	require.Len(t, c.Records("t", 0), 3)
}

// TestBooleanPropertiesParseAsJava: the Java client reads a boolean
// property trimmed and in any case ("TRUE", " false "), and nothing else
// ("1", "t" are errors); so does NewFromProperties, for every boolean
// property, enable.idempotence included (which allows only true).
func TestBooleanPropertiesParseAsJava(t *testing.T) {
	for _, name := range []string{"allow.auto.create.topics", "partitioner.ignore.keys", "partitioner.adaptive.partitioning.enable", "enable.idempotence"} {
		for _, v := range []string{"TRUE", " true ", "True"} {
			c := defaultConfig()
			require.NoError(t, Property(name, v).apply(&c), "%s=%q", name, v)
		}
		for _, v := range []string{"1", "t", "yes", ""} {
			c := defaultConfig()
			require.Error(t, Property(name, v).apply(&c), "%s=%q", name, v)
		}
		if name != "enable.idempotence" {
			c := defaultConfig()
			require.NoError(t, Property(name, " FALSE").apply(&c), name)
		}
	}
	c := defaultConfig()
	require.NoError(t, Property("partitioner.ignore.keys", "TRUE").apply(&c))
	assert.True(t, c.ignoreKeys)
	require.NoError(t, Property("allow.auto.create.topics", " False ").apply(&c))
	assert.False(t, c.autoCreateTopics)
}

// TestPropertyValuesTrimmedAsJava: the Java client trims every property
// value before reading it (ConfigDef.parseType), so a pasted config with
// stray spaces works there; every property here reads the trimmed value.
func TestPropertyValuesTrimmedAsJava(t *testing.T) {
	props := map[string]string{
		"bootstrap.servers": " 127.0.0.1:1 ", "security.protocol": " PLAINTEXT ", "acks": " all",
		"partitioner": "murmur2 ", "compression.type": " lz4", "client.id": " app ", "linger.ms": " 7 ",
	}
	p, err := NewFromProperties(props)
	require.NoError(t, err)
	assert.Equal(t, "app", p.cfg.clientID)
	assert.Equal(t, 7*time.Millisecond, p.cfg.linger)
	require.NoError(t, p.Close(t.Context()))
}
