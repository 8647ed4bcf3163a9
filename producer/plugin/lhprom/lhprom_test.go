package lhprom_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/longhaul-kafka/longhaul/internal/broker"
	"github.com/longhaul-kafka/longhaul/producer"
	"github.com/longhaul-kafka/longhaul/producer/plugin/lhprom"
)

// acks adds up what HookBatchAcked reports, to compare with the metrics.
type acks struct {
	mu             sync.Mutex
	batches, bytes int
}

func (a *acks) OnBatchAcked(b producer.BatchInfo, _ int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.batches++
	a.bytes += b.Bytes
}

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
// whose topic retains 20 batches; /metrics is scraped over HTTP.
func TestMetricsFromAProducer(t *testing.T) {
	c, err := broker.Start(broker.Config{Topics: []broker.TopicConfig{{Name: "t", Partitions: 1, Window: 20}}})
	require.NoError(t, err)
	defer c.Close()

	m := lhprom.New(lhprom.ConstLabels(prometheus.Labels{"producer": "test"}))
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(m))
	a := &acks{}
	p, err := producer.New(producer.BootstrapServers(c.Addr()), producer.RetryBackoff(time.Millisecond), producer.Hooks(m, a))
	require.NoError(t, err)
	defer p.Close(context.Background())

	produce(t, p, 30)
	c.InjectError("t", 0, kerr.NotEnoughReplicas.Code, 1)
	produce(t, p, 1)
	c.SetProduceThrottle(0, 1500*time.Millisecond)
	produce(t, p, 1)
	c.SetProduceThrottle(0, 0)
	c.DropConnections(0)
	produce(t, p, 1) // finds the connection closed, dials again

	// The window gauge is the topic's window.
	assert.Equal(t, float64(c.Window("t")), counterValue(t, reg, "longhaul_producer_window", map[string]string{"topic": "t", "partition": "0"}))
	assert.Equal(t, 33.0, counterValue(t, reg, "longhaul_producer_records_total", map[string]string{"result": "ok"}))
	assert.Equal(t, 1.0, counterValue(t, reg, "longhaul_producer_batch_errors_total", map[string]string{"error": "NOT_ENOUGH_REPLICAS"}))
	assert.Equal(t, 1.0, counterValue(t, reg, "longhaul_producer_batch_retries_total", nil))
	assert.Equal(t, 0.0, counterValue(t, reg, "longhaul_producer_batches_in_flight", nil))
	assert.Equal(t, 1.5, counterValue(t, reg, "longhaul_producer_throttle_seconds_total", nil))
	assert.Equal(t, 1.0, counterValue(t, reg, "longhaul_producer_broker_disconnects_total", map[string]string{"node": "0"}))
	assert.Equal(t, 2.0, counterValue(t, reg, "longhaul_producer_broker_connects_total", map[string]string{"node": "0", "result": "ok"}))
	assert.Equal(t, 1.0, counterValue(t, reg, "longhaul_producer_producer_id_changes_total", nil))
	// learned 5 -> 20 on the first ack and again after the reconnect.
	assert.Equal(t, 2.0, counterValue(t, reg, "longhaul_producer_window_changes_total", map[string]string{"cause": "learned"}))
	assert.Equal(t, 1.0, counterValue(t, reg, "longhaul_producer_window_changes_total", map[string]string{"cause": "reconnect"}))
	a.mu.Lock()
	assert.Equal(t, float64(a.bytes), counterValue(t, reg, "longhaul_producer_bytes_total", nil))
	assert.Equal(t, uint64(a.batches), histogramCount(t, reg, "longhaul_producer_batch_latency_seconds"))
	a.mu.Unlock()
	problems, err := testutil.GatherAndLint(reg)
	require.NoError(t, err)
	assert.Empty(t, problems)

	// Served over HTTP as a user would.
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	assert.Contains(t, string(body), `longhaul_producer_window{partition="0",producer="test",topic="t"} 20`)
}

// TestNamespace: the namespace option renames every metric.
func TestNamespace(t *testing.T) {
	m := lhprom.New(lhprom.Namespace("app"))
	m.OnWindowChanged("t", 3, 5, 50, producer.WindowLearned)
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(m))
	n, err := testutil.GatherAndCount(reg, "app_producer_window")
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	assert.Equal(t, 50.0, counterValue(t, reg, "app_producer_window", map[string]string{"partition": "3"}))
}

// counterValue adds up the counter or gauge samples of name whose labels
// include want.
func counterValue(t *testing.T, reg *prometheus.Registry, name string, want map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	total, found := 0.0, false
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metrics:
		for _, mt := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range mt.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			for k, v := range want {
				if labels[k] != v {
					continue metrics
				}
			}
			found = true
			switch {
			case mt.Counter != nil:
				total += mt.Counter.GetValue()
			case mt.Gauge != nil:
				total += mt.Gauge.GetValue()
			}
		}
	}
	require.True(t, found, "no sample of %s with %v", name, want)
	return total
}

func histogramCount(t *testing.T, reg *prometheus.Registry, name string) uint64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == name {
			var n uint64
			for _, mt := range mf.GetMetric() {
				n += mt.GetHistogram().GetSampleCount()
			}
			return n
		}
	}
	t.Fatalf("no %s", name)
	return 0
}
