package lhotel_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/longhaul-kafka/longhaul/internal/broker"
	"github.com/longhaul-kafka/longhaul/producer"
	"github.com/longhaul-kafka/longhaul/producer/plugin/lhotel"
)

// ackCounter counts HookBatchAcked calls, to compare with the histogram.
type ackCounter struct{ atomic.Int64 }

func (a *ackCounter) OnBatchAcked(producer.BatchInfo, int64) { a.Add(1) }

func produce(t *testing.T, p *producer.Producer, n int) {
	t.Helper()
	recs := make([]*producer.Record, n)
	for i := range recs {
		recs[i] = &producer.Record{Topic: "t", Value: []byte("value")}
		recs[i].SetPartition(0)
	}
	require.NoError(t, p.ProduceSync(context.Background(), recs...).FirstErr())
}

// TestMetricsFromAProducer: a producer feeding Metrics against a broker
// whose topic retains 20 batches, read with a ManualReader.
func TestMetricsFromAProducer(t *testing.T) {
	c, err := broker.Start(broker.Config{Topics: []broker.TopicConfig{{Name: "t", Partitions: 1, Window: 20}}})
	require.NoError(t, err)
	defer c.Close()

	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	m, err := lhotel.New(mp)
	require.NoError(t, err)
	acked := &ackCounter{}
	p, err := producer.New(producer.BootstrapServers(c.Addr()), producer.RetryBackoff(time.Millisecond), producer.Hooks(m, acked))
	require.NoError(t, err)

	produce(t, p, 30)
	c.InjectError("t", 0, kerr.NotEnoughReplicas.Code, 1)
	produce(t, p, 1)
	c.SetProduceThrottle(0, 1500*time.Millisecond)
	produce(t, p, 1)
	c.SetProduceThrottle(0, 0)
	require.NoError(t, p.Close(context.Background()))

	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(context.Background(), &rm))
	require.Len(t, rm.ScopeMetrics, 1)
	assert.Equal(t, lhotel.ScopeName, rm.ScopeMetrics[0].Scope.Name)
	got := map[string]metricdata.Metrics{}
	for _, mt := range rm.ScopeMetrics[0].Metrics {
		got[mt.Name] = mt
	}

	part := attribute.NewSet(attribute.String("messaging.destination.name", "t"), attribute.Int("messaging.destination.partition.id", 0))
	window := got["longhaul.producer.window"].Data.(metricdata.Gauge[int64])
	require.Len(t, window.DataPoints, 1)
	assert.Equal(t, part, window.DataPoints[0].Attributes)
	assert.Equal(t, int64(c.Window("t")), window.DataPoints[0].Value, "the window gauge is the topic's window")

	inflight := got["longhaul.producer.batches.in_flight"].Data.(metricdata.Sum[int64])
	require.Len(t, inflight.DataPoints, 1)
	assert.Zero(t, inflight.DataPoints[0].Value)

	sumOf := func(name string, attrs ...attribute.KeyValue) float64 {
		set := attribute.NewSet(attrs...)
		total, found := 0.0, false
		for _, dp := range got[name].Data.(metricdata.Sum[float64]).DataPoints {
			if dp.Attributes.Equals(&set) {
				total, found = total+dp.Value, true
			}
		}
		require.True(t, found, "no %s point with %v", name, attrs)
		return total
	}
	topic := attribute.String("messaging.destination.name", "t")
	assert.Equal(t, 32.0, sumOf("longhaul.producer.records", topic))
	assert.Equal(t, 1.0, sumOf("longhaul.producer.batch.errors", topic, attribute.String("error.type", "NOT_ENOUGH_REPLICAS")))
	assert.Equal(t, 1.0, sumOf("longhaul.producer.batch.retries", topic))
	assert.Equal(t, 1.5, sumOf("longhaul.producer.throttle", attribute.Int("longhaul.broker.node", 0)))
	assert.Equal(t, 1.0, sumOf("longhaul.producer.producer_id.changes"))
	assert.Equal(t, 1.0, sumOf("longhaul.producer.window.changes", topic, attribute.String("longhaul.window.cause", "learned")))
	assert.Equal(t, 1.0, sumOf("longhaul.producer.broker.disconnects", attribute.Int("longhaul.broker.node", 0)), "Close gives up the connection")
	assert.Positive(t, sumOf("longhaul.producer.bytes", topic))

	lat := got["longhaul.producer.batch.duration"].Data.(metricdata.Histogram[float64])
	require.Len(t, lat.DataPoints, 1)
	assert.Equal(t, uint64(acked.Load()), lat.DataPoints[0].Count, "one latency sample per acknowledged batch")
	assert.Equal(t, "s", got["longhaul.producer.batch.duration"].Unit)
}

// TestWatchAndRequests: a watched producer's buffered gauges are its Stats
// while its broker holds the answers and 0 once they came; the request
// duration histogram has one sample per completed produce request; after
// Unregister the producer is no longer observed.
func TestWatchAndRequests(t *testing.T) {
	c, err := broker.Start(broker.Config{Topics: []broker.TopicConfig{{Name: "t", Partitions: 1, Window: 20}}})
	require.NoError(t, err)
	defer c.Close()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	m, err := lhotel.New(mp)
	require.NoError(t, err)
	p, err := producer.New(producer.BootstrapServers(c.Addr()), producer.Hooks(m))
	require.NoError(t, err)
	defer p.Close(context.Background())
	reg, err := m.Watch(p, "orders")
	require.NoError(t, err)
	produce(t, p, 1)

	collect := func() map[string]metricdata.Metrics {
		var rm metricdata.ResourceMetrics
		require.NoError(t, reader.Collect(context.Background(), &rm))
		got := map[string]metricdata.Metrics{}
		for _, sm := range rm.ScopeMetrics {
			for _, mt := range sm.Metrics {
				got[mt.Name] = mt
			}
		}
		return got
	}
	name := attribute.NewSet(attribute.String("longhaul.producer", "orders"))
	gauge := func(got map[string]metricdata.Metrics, n string) (int64, bool) {
		g, ok := got[n].Data.(metricdata.Gauge[int64])
		if !ok || len(g.DataPoints) != 1 {
			return 0, false
		}
		assert.Equal(t, name, g.DataPoints[0].Attributes)
		return g.DataPoints[0].Value, true
	}

	const hold = 2 * time.Second
	c.Stall(0, hold)
	var wg sync.WaitGroup
	for range 10 {
		wg.Add(1)
		r := &producer.Record{Topic: "t", Value: []byte("value")}
		r.SetPartition(0)
		p.Produce(context.Background(), r, func(*producer.Record, error) { wg.Done() })
	}
	recs, ok := gauge(collect(), "longhaul.producer.buffered.records")
	require.True(t, ok)
	assert.Equal(t, int64(10), recs)
	// Settled once the batch is sealed and sent (linger 5 ms); the broker
	// holds it for the rest of the stall.
	require.Eventually(t, func() bool {
		b := p.Stats().BufferedBytes
		v, _ := gauge(collect(), "longhaul.producer.buffered.bytes")
		return b > 0 && v == b
	}, hold, time.Millisecond)
	wg.Wait()
	got := collect()
	recs, _ = gauge(got, "longhaul.producer.buffered.records")
	bytes, _ := gauge(got, "longhaul.producer.buffered.bytes")
	assert.Zero(t, recs)
	assert.Zero(t, bytes)

	st := p.Stats()
	lat := got["longhaul.producer.request.duration"].Data.(metricdata.Histogram[float64])
	require.Len(t, lat.DataPoints, 1)
	assert.Equal(t, uint64(st.Nodes[0].Requests), lat.DataPoints[0].Count)
	assert.InDelta(t, st.Nodes[0].RequestTime.Seconds(), lat.DataPoints[0].Sum, 1e-6)
	assert.Equal(t, "s", got["longhaul.producer.request.duration"].Unit)
	inflight := got["longhaul.producer.requests.in_flight"].Data.(metricdata.Gauge[int64])
	require.Len(t, inflight.DataPoints, 1)
	assert.Zero(t, inflight.DataPoints[0].Value)
	// The four gauges, each with its own unit and description.
	for name, unit := range map[string]string{"longhaul.producer.window": "{batch}", "longhaul.producer.requests.in_flight": "{request}",
		"longhaul.producer.buffered.bytes": "By", "longhaul.producer.buffered.records": "{record}"} {
		assert.Equal(t, unit, got[name].Unit, name)
		assert.NotEmpty(t, got[name].Description, name)
	}
	assert.NotEqual(t, got["longhaul.producer.buffered.bytes"].Description, got["longhaul.producer.buffered.records"].Description)

	require.NoError(t, reg.Unregister())
	_, ok = gauge(collect(), "longhaul.producer.buffered.records")
	assert.False(t, ok, "no longer observed")
}
