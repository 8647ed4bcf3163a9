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

// TestWatchAndRequests: the buffered gauges of a watched producer are its
// Stats while its broker holds the answers and 0 once they came; the
// request latency histogram has one sample per completed produce request,
// each at least the hold for the held ones; after stop the producer no
// longer counts.
func TestWatchAndRequests(t *testing.T) {
	c, err := broker.Start(broker.Config{Topics: []broker.TopicConfig{{Name: "t", Partitions: 1, Window: 20}}})
	require.NoError(t, err)
	defer c.Close()
	m := lhprom.New()
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(m))
	p, err := producer.New(producer.BootstrapServers(c.Addr()), producer.Hooks(m))
	require.NoError(t, err)
	defer p.Close(context.Background())
	stop := m.Watch(p)
	produce(t, p, 1)

	const hold = 2 * time.Second
	c.Stall(0, hold)
	var wg sync.WaitGroup
	for range 10 {
		wg.Add(1)
		r := &producer.Record{Topic: "t", Value: []byte("value")}
		r.SetPartition(0)
		p.Produce(context.Background(), r, func(*producer.Record, error) { wg.Done() })
	}
	assert.Equal(t, 10.0, counterValue(t, reg, "longhaul_producer_buffered_records", nil))
	st := p.Stats()
	require.Positive(t, st.BufferedBytes)
	// The figures settle once the batch is sealed and sent (linger 5 ms);
	// the broker holds it for the rest of the stall.
	require.Eventually(t, func() bool {
		b := p.Stats().BufferedBytes
		return b > 0 && float64(b) == counterValue(t, reg, "longhaul_producer_buffered_bytes", nil)
	}, hold, time.Millisecond)
	wg.Wait()
	assert.Zero(t, counterValue(t, reg, "longhaul_producer_buffered_records", nil))
	assert.Zero(t, counterValue(t, reg, "longhaul_producer_buffered_bytes", nil))

	st = p.Stats()
	require.Len(t, st.Nodes, 1)
	assert.Equal(t, uint64(st.Nodes[0].Requests), histogramCount(t, reg, "longhaul_producer_request_latency_seconds"))
	assert.InDelta(t, st.Nodes[0].RequestTime.Seconds(), histogramSum(t, reg, "longhaul_producer_request_latency_seconds"), 1e-6)
	assert.GreaterOrEqual(t, st.Nodes[0].RequestTime, hold/2, "the held request took most of the hold")
	assert.Zero(t, counterValue(t, reg, "longhaul_producer_requests_in_flight", map[string]string{"node": "0"}))

	stop()
	stop()
	c.Stall(0, hold)
	r := &producer.Record{Topic: "t", Value: []byte("value")}
	r.SetPartition(0)
	res := make(chan error, 1)
	p.Produce(context.Background(), r, func(_ *producer.Record, err error) { res <- err })
	assert.Equal(t, int64(1), p.Stats().BufferedRecords)
	assert.Zero(t, counterValue(t, reg, "longhaul_producer_buffered_records", nil), "no longer watched")
	require.NoError(t, <-res)
	problems, err := testutil.GatherAndLint(reg)
	require.NoError(t, err)
	assert.Empty(t, problems)
}

func histogramSum(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == name {
			var s float64
			for _, mt := range mf.GetMetric() {
				s += mt.GetHistogram().GetSampleSum()
			}
			return s
		}
	}
	t.Fatalf("no %s", name)
	return 0
}
