package producer

import (
	"context"
	gonet "net"
	"slices"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/longhaul-kafka/longhaul/internal/broker"
	"github.com/longhaul-kafka/longhaul/internal/otlp"
	"github.com/longhaul-kafka/longhaul/protocol"
)

// Client metrics push (KIP-714, enable.metrics.push) against the embedded
// broker's GetTelemetrySubscriptions and PushTelemetry, on virtual time.

const pushInterval = 10 * time.Second

// telemetryRun starts a cluster with the subscription tc (nil: none), a
// producer with opts, produces n records to "t" and returns both.
func telemetryRun(t *testing.T, tc *broker.TelemetryConfig, n int, opts ...Opt) (*broker.Cluster, *Producer) {
	c, net := memCluster(t, broker.Config{RTT: 20 * time.Millisecond, Topics: []broker.TopicConfig{{Name: "t", Partitions: 2}}})
	if tc != nil {
		c.SetTelemetry(tc)
	}
	p := memProducer(t, c, net, opts...)
	recs := make([]*Record, n)
	for i := range recs {
		recs[i] = &Record{Topic: "t", Value: []byte("value")}
	}
	require.NoError(t, p.ProduceSync(context.Background(), recs...).FirstErr())
	return c, p
}

func metricNames(p otlp.Payload) []string {
	var names []string
	for _, m := range p.Metrics {
		names = append(names, m.Name)
	}
	return names
}

func metricByName(p otlp.Payload, name string) (otlp.Metric, bool) {
	for _, m := range p.Metrics {
		if m.Name == name {
			return m, true
		}
	}
	return otlp.Metric{}, false
}

// TestMetricsPush: the producer subscribes once, pushes every interval
// after a first push at 0.5 to 1.5 intervals, compresses with the broker's
// first codec, and ends with a terminating push at Close carrying the final
// figures: every Java-named metric the producer has, cumulative sums since
// its start, the request latency at least the link's round trip.
func TestMetricsPush(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, p := telemetryRun(t, &broker.TelemetryConfig{Metrics: []string{"org.apache.kafka.producer."}, PushInterval: pushInterval,
			Compression: []protocol.Codec{protocol.CodecZstd, protocol.CodecGzip}}, 1, ClientID("orders"))
		// The interval figures count from the subscription: the records
		// go once it is loaded (a round trip after the first connection).
		time.Sleep(time.Second)
		require.True(t, p.tel.active.Load())
		produceN(t, p, "t", 0, "value", 19)
		time.Sleep(44 * time.Second)
		require.NoError(t, p.Close(context.Background()))

		asks := c.TelemetrySubscriptionAsks()
		require.Len(t, asks, 1)
		assert.Equal(t, [16]byte{}, asks[0].ClientInstanceID, "a new client asks with the zero id")
		pushes := c.TelemetryPushes()
		require.GreaterOrEqual(t, len(pushes), 4)
		first := pushes[0].At.Sub(asks[0].At)
		assert.True(t, first >= pushInterval/2 && first < pushInterval*3/2, "first push %v after the subscription", first)
		for i, ps := range pushes {
			assert.Zero(t, ps.ErrorCode)
			assert.Equal(t, protocol.CodecZstd, ps.Codec)
			assert.Equal(t, "orders", ps.ClientID)
			assert.NotEqual(t, [16]byte{}, ps.ClientInstanceID)
			assert.Equal(t, i == len(pushes)-1, ps.Terminating, "push %d", i)
			if i > 0 && !ps.Terminating {
				assert.GreaterOrEqual(t, ps.At.Sub(pushes[i-1].At), pushInterval, "push %d", i)
			}
		}
		last := pushes[len(pushes)-1].Payload
		assert.Equal(t, []otlp.Attr{{Key: "client_id", Value: "orders"}}, last.Resource)
		want := []string{"record.queue.time.avg", "record.queue.time.max", "request.latency.avg", "request.latency.max",
			"node.request.latency.avg", "node.request.latency.max", "produce.throttle.time.avg", "produce.throttle.time.max",
			"buffer.total.bytes", "buffer.available.bytes", "record.send.total", "record.error.total", "record.retry.total",
			"request.total", "connection.creation.total"}
		for i := range want {
			want[i] = telemetryPrefix + want[i]
		}
		// The first push had latencies (the records were acknowledged
		// before it); the terminating one has the same names.
		assert.Equal(t, want, metricNames(pushes[0].Payload))
		assert.Equal(t, want, metricNames(last))

		sent, _ := metricByName(last, telemetryPrefix+"record.send.total")
		require.Len(t, sent.Points, 1)
		assert.Equal(t, int64(20), sent.Points[0].Int, "cumulative")
		assert.True(t, sent.Monotonic)
		assert.False(t, sent.Delta)
		lat, _ := metricByName(pushes[0].Payload, telemetryPrefix+"node.request.latency.max")
		require.Len(t, lat.Points, 1)
		assert.Equal(t, []otlp.Attr{{Key: "node_id", Value: "0"}}, lat.Points[0].Attrs)
		assert.GreaterOrEqual(t, lat.Points[0].Double, 20.0, "ms, at least the round trip")
		total, _ := metricByName(last, telemetryPrefix+"buffer.total.bytes")
		assert.Equal(t, float64(33554432), total.Points[0].Double)
	})
}

// TestMetricsPushPrefixesAndDelta: only the metrics whose names start with
// a requested prefix are pushed, and with delta temporality each push's
// sums cover only the time since the previous push: they add up to the
// total.
func TestMetricsPushPrefixesAndDelta(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, p := telemetryRun(t, &broker.TelemetryConfig{Metrics: []string{telemetryPrefix + "record.send", telemetryPrefix + "record.queue.time.max"},
			PushInterval: pushInterval, Delta: true}, 5)
		time.Sleep(15 * time.Second)
		recs := make([]*Record, 7)
		for i := range recs {
			recs[i] = &Record{Topic: "t", Value: []byte("more")}
		}
		require.NoError(t, p.ProduceSync(context.Background(), recs...).FirstErr())
		time.Sleep(25 * time.Second)
		require.NoError(t, p.Close(context.Background()))

		pushes := c.TelemetryPushes()
		require.GreaterOrEqual(t, len(pushes), 3)
		var sum int64
		var perPush []int64
		for _, ps := range pushes {
			assert.Equal(t, protocol.CodecNone, ps.Codec, "the broker accepts no codec")
			assert.Equal(t, []string{telemetryPrefix + "record.queue.time.max", telemetryPrefix + "record.send.total"}, metricNames(ps.Payload))
			m, _ := metricByName(ps.Payload, telemetryPrefix+"record.send.total")
			assert.True(t, m.Delta)
			sum += m.Points[0].Int
			perPush = append(perPush, m.Points[0].Int)
		}
		assert.Equal(t, int64(12), sum, "the deltas %v add up to the records sent", perPush)
		assert.Less(t, slices.Max(perPush), int64(12), "no push carries the total")
	})
}

// TestMetricsPushErrors: the answers handled as Java's
// ClientTelemetryReporter handles them.
func TestMetricsPushErrors(t *testing.T) {
	sub := func() *broker.TelemetryConfig {
		return &broker.TelemetryConfig{Metrics: []string{"*"}, PushInterval: pushInterval}
	}
	t.Run("UnknownSubscriptionResubscribesAtOnce", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			c, p := telemetryRun(t, sub(), 1)
			time.Sleep(16 * time.Second) // the first push is done
			c.SetTelemetry(&broker.TelemetryConfig{Metrics: []string{telemetryPrefix + "request.total"}, PushInterval: pushInterval})
			time.Sleep(40 * time.Second)
			require.NoError(t, p.Close(context.Background()))
			asks, pushes := c.TelemetrySubscriptionAsks(), c.TelemetryPushes()
			require.Len(t, asks, 2)
			var refused int
			for i, ps := range pushes {
				if ps.ErrorCode == kerr.UnknownSubscriptionID.Code {
					refused = i
				}
			}
			require.Positive(t, refused)
			assert.Equal(t, 20*time.Millisecond, asks[1].At.Sub(pushes[refused].At), "asked again at once: one round trip later")
			assert.Equal(t, pushes[0].ClientInstanceID, asks[1].ClientInstanceID, "with the id it was given")
			after := pushes[len(pushes)-1]
			assert.Zero(t, after.ErrorCode)
			assert.Equal(t, []string{telemetryPrefix + "request.total"}, metricNames(after.Payload), "the new subscription's metrics")
		})
	})
	t.Run("TooLargeWaitsAnInterval", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			c, p := telemetryRun(t, sub(), 1)
			c.InjectTelemetryError(kerr.TelemetryTooLarge.Code, 1)
			time.Sleep(30 * time.Second)
			require.NoError(t, p.Close(context.Background()))
			asks, pushes := c.TelemetrySubscriptionAsks(), c.TelemetryPushes()
			require.Len(t, asks, 2)
			require.Equal(t, kerr.TelemetryTooLarge.Code, pushes[0].ErrorCode)
			assert.Equal(t, pushInterval+20*time.Millisecond, asks[1].At.Sub(pushes[0].At), "the answer's round trip and the interval")
		})
	})
	for _, code := range []int16{kerr.InvalidRecord.Code, kerr.UnsupportedVersion.Code, kerr.InvalidRequest.Code, kerr.UnknownServerError.Code} {
		t.Run(kerr.ErrorForCode(code).Error()+"Disables", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c, p := telemetryRun(t, sub(), 1)
				c.InjectTelemetryError(code, 1)
				time.Sleep(time.Minute)
				require.NoError(t, p.Close(context.Background()))
				asks, pushes := c.TelemetrySubscriptionAsks(), c.TelemetryPushes()
				assert.Len(t, asks, 1)
				require.Len(t, pushes, 1, "no push after it, not even the terminating one")
				assert.Equal(t, code, pushes[0].ErrorCode)
				assert.False(t, p.tel.active.Load(), "the sender hands it nothing more")
			})
		})
	}
	t.Run("NoMetricsRequestedAsksAgainLater", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			c, p := telemetryRun(t, &broker.TelemetryConfig{PushInterval: pushInterval}, 1)
			time.Sleep(25 * time.Second)
			require.NoError(t, p.Close(context.Background()))
			asks := c.TelemetrySubscriptionAsks()
			require.Len(t, asks, 3)
			assert.Equal(t, pushInterval+20*time.Millisecond, asks[1].At.Sub(asks[0].At), "the answer's round trip and the interval")
			assert.Empty(t, c.TelemetryPushes(), "nothing pushed, no terminating push")
		})
	})
	t.Run("ZeroIntervalIsFiveMinutes", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			c, p := telemetryRun(t, &broker.TelemetryConfig{Metrics: []string{"*"}}, 1)
			time.Sleep(10 * time.Minute)
			require.NoError(t, p.Close(context.Background()))
			asks, pushes := c.TelemetrySubscriptionAsks(), c.TelemetryPushes()
			require.GreaterOrEqual(t, len(pushes), 2)
			first := pushes[0].At.Sub(asks[0].At)
			assert.True(t, first >= telemetryDefaultInterval/2 && first < telemetryDefaultInterval*3/2, "first push %v", first)
		})
	})
	t.Run("BrokerWithoutItCostsNoConnection", func(t *testing.T) {
		dials := func(tc *broker.TelemetryConfig, opts ...Opt) (n int, asks int) {
			synctest.Test(t, func(t *testing.T) {
				c, net := memCluster(t, broker.Config{Topics: []broker.TopicConfig{{Name: "t", Partitions: 1}}})
				if tc != nil {
					c.SetTelemetry(tc)
				}
				var count atomic.Int64
				p := memProducer(t, c, net, append(opts, Dialer(func(ctx context.Context, network, addr string) (gonet.Conn, error) {
					count.Add(1)
					return net.Dial(ctx, network, addr)
				}))...)
				require.NoError(t, p.ProduceSync(context.Background(), &Record{Topic: "t", Value: []byte("v")}).FirstErr())
				time.Sleep(10 * time.Minute)
				require.NoError(t, p.Close(context.Background()))
				n, asks = int(count.Load()), len(c.TelemetrySubscriptionAsks())
			})
			return n, asks
		}
		off, _ := dials(nil, Property("enable.metrics.push", "false"))
		without, asks := dials(nil)
		assert.Equal(t, off, without, "dials without a broker that takes client metrics")
		assert.Zero(t, asks)
		with, asks := dials(sub())
		assert.Equal(t, off+1, with, "one connection of its own where the broker takes them")
		assert.Equal(t, 1, asks)
	})
	t.Run("Disabled", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			c, p := telemetryRun(t, sub(), 1, Property("enable.metrics.push", "false"))
			time.Sleep(time.Minute)
			require.NoError(t, p.Close(context.Background()))
			assert.Empty(t, c.TelemetrySubscriptionAsks())
			assert.Nil(t, p.tel)
		})
	})
}

// TestCloseBoundsTheTerminatingPush: Close waits for the terminating
// push's answer no longer than its ctx (here shorter than
// request.timeout.ms) when the broker does not answer.
func TestCloseBoundsTheTerminatingPush(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, p := telemetryRun(t, &broker.TelemetryConfig{Metrics: []string{"*"}, PushInterval: pushInterval}, 1, RequestTimeout(30*time.Second), DeliveryTimeout(time.Minute))
		time.Sleep(20 * time.Second) // subscribed and pushed
		require.NotEmpty(t, c.TelemetryPushes())
		c.Stall(0, time.Hour)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		start := time.Now()
		require.NoError(t, p.Close(ctx), "every record was delivered before")
		assert.Equal(t, 2*time.Second, time.Since(start), "waited for the push until ctx ended")
	})
}

// TestTelemetryJudge: every error code KIP-714 gives the two requests, and
// one it does not, as Java's ClientTelemetryUtils.maybeFetchErrorIntervalMs
// maps them.
func TestTelemetryJudge(t *testing.T) {
	for code, want := range map[int16]telemetryVerdict{
		0:                                    telemetryOK,
		kerr.UnknownSubscriptionID.Code:      telemetryResubscribe,
		kerr.UnsupportedCompressionType.Code: telemetryResubscribe,
		kerr.TelemetryTooLarge.Code:          telemetryWait,
		kerr.ThrottlingQuotaExceeded.Code:    telemetryWait,
		kerr.InvalidRequest.Code:             telemetryDisable,
		kerr.InvalidRecord.Code:              telemetryDisable,
		kerr.UnsupportedVersion.Code:         telemetryDisable,
		kerr.NotLeaderForPartition.Code:      telemetryDisable,
	} {
		assert.Equal(t, want, telemetryJudge(code), "code %d", code)
	}
}

// telemetryFigures returns how many batch queue times and request
// latencies the client metrics push took since its last push, and for how
// many nodes.
func telemetryFigures(p *Producer) (queued, requests int64, nodes int) {
	p.tel.mu.Lock()
	defer p.tel.mu.Unlock()
	return p.tel.queueTime.n, p.tel.reqLatency.n, len(p.tel.nodeLatency)
}

// TestMetricsHooksFollowTheSubscription: the client metrics push takes
// figures from the sender (a batch's queue time, a request's latency)
// only while a subscription asks for metrics. Against a broker that takes
// client metrics but subscribes to none, the sender hands it nothing per
// batch or request (its figures stay empty while records flow); a
// subscription that appears later turns it on, and its pushes carry the
// figures of the records sent since; a subscription changed to none turns
// it off again. The running totals count from the start throughout.
func TestMetricsHooksFollowTheSubscription(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, p := telemetryRun(t, &broker.TelemetryConfig{PushInterval: pushInterval}, 1)
		time.Sleep(time.Second)
		require.Len(t, c.TelemetrySubscriptionAsks(), 1, "subscribed, to no metrics")
		produceN(t, p, "t", 0, "v", 30)
		assert.False(t, p.tel.active.Load())
		assert.Nil(t, p.cfg.hooks.metrics())
		q, r, n := telemetryFigures(p)
		assert.Zero(t, q, "no batch handed over")
		assert.Zero(t, r, "no request handed over")
		assert.Zero(t, n)
		assert.Equal(t, int64(1), p.tel.connections.Load(), "the running total counts without a subscription")

		// A subscription appears: the producer asks again an interval
		// after the last answer, and takes figures from then on.
		c.SetTelemetry(&broker.TelemetryConfig{Metrics: []string{telemetryPrefix + "request.latency", telemetryPrefix + "connection"},
			PushInterval: pushInterval})
		time.Sleep(pushInterval)
		require.Len(t, c.TelemetrySubscriptionAsks(), 2)
		require.True(t, p.tel.active.Load())
		assert.Same(t, p.tel, p.cfg.hooks.metrics())
		require.Empty(t, c.TelemetryPushes())
		produceN(t, p, "t", 0, "v", 30)
		q, r, n = telemetryFigures(p)
		assert.Positive(t, q)
		assert.Positive(t, r)
		assert.Equal(t, 1, n)
		time.Sleep(2 * pushInterval)
		pushes := c.TelemetryPushes()
		require.NotEmpty(t, pushes)
		lat, ok := metricByName(pushes[0].Payload, telemetryPrefix+"request.latency.max")
		require.True(t, ok, "pushed: %v", metricNames(pushes[0].Payload))
		assert.GreaterOrEqual(t, lat.Points[0].Double, 20.0, "ms, the round trip of the records sent since")
		conns, _ := metricByName(pushes[0].Payload, telemetryPrefix+"connection.creation.total")
		assert.Equal(t, int64(1), conns.Points[0].Int, "the connection opened before the subscription")

		// The subscription changes to none: the next push is refused
		// (UNKNOWN_SUBSCRIPTION_ID), the new subscription asks for
		// nothing, and the sender hands over nothing again.
		c.SetTelemetry(&broker.TelemetryConfig{PushInterval: pushInterval})
		time.Sleep(2 * pushInterval)
		require.False(t, p.tel.active.Load())
		assert.Nil(t, p.cfg.hooks.metrics())
		produceN(t, p, "t", 0, "v", 30)
		q, r, _ = telemetryFigures(p)
		assert.Zero(t, q)
		assert.Zero(t, r)
		require.NoError(t, p.Close(context.Background()))
		assert.Equal(t, kerr.UnknownSubscriptionID.Code, c.TelemetryPushes()[len(c.TelemetryPushes())-1].ErrorCode,
			"no terminating push without metrics asked")
	})
}
