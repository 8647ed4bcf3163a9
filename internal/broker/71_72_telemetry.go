package broker

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/longhaul-kafka/longhaul/internal/otlp"
	"github.com/longhaul-kafka/longhaul/protocol"
)

// GetTelemetrySubscriptions: v0, PushTelemetry: v0 (client metrics push,
// KIP-714)
//
// Behavior: both are offered in ApiVersions only once [Cluster.SetTelemetry]
// gave the cluster a subscription, as Kafka offers them only with a
// metrics reporter that receives client metrics. GetTelemetrySubscriptions
// assigns a client instance id to a request with the zero id (and keeps a
// known one) and answers the subscription: its id, requested metric
// prefixes, push interval, accepted codecs, byte limit and temporality.
// PushTelemetry answers, in this order: UNKNOWN_SUBSCRIPTION_ID for an
// instance id never assigned or a subscription id not the current one;
// UNSUPPORTED_COMPRESSION_TYPE for a codec not accepted; TELEMETRY_TOO_LARGE
// for metrics over the byte limit (compressed, as Kafka checks);
// INVALID_RECORD for metrics that do not decompress or decode as
// MetricsData; else an error queued by [Cluster.InjectTelemetryError], or
// success. Every push is recorded ([Cluster.TelemetryPushes]), refused
// ones with their answer.

const (
	keyGetTelemetrySubscriptions int16 = 71
	keyPushTelemetry             int16 = 72
)

func init() {
	regKey(keyGetTelemetrySubscriptions, 0, 0, handleGetTelemetrySubscriptions)
	regKey(keyPushTelemetry, 0, 0, handlePushTelemetry)
}

// TelemetryConfig is a client metrics subscription ([Cluster.SetTelemetry]),
// what Kafka's client-metrics configs give the clients they match.
type TelemetryConfig struct {
	// Metrics is the requested metric name prefixes; nil requests none,
	// {"*"} all.
	Metrics []string
	// PushInterval is interval.ms; 0 answers 0 (a broker bug the client
	// must survive).
	PushInterval time.Duration
	// Compression is the accepted codecs, in order of preference.
	Compression []protocol.Codec
	// MaxBytes is telemetry.max.bytes; 0 means 1 MiB.
	MaxBytes int32
	// Delta asks for delta temporality.
	Delta bool
}

// TelemetryPush is one PushTelemetry request the cluster read.
type TelemetryPush struct {
	Node             int32
	At               time.Time
	ClientID         string
	ClientInstanceID [16]byte
	SubscriptionID   int32
	Terminating      bool
	Codec            protocol.Codec
	// Payload is the decoded metrics; zero when ErrorCode is
	// INVALID_RECORD or the push was refused before decoding.
	Payload otlp.Payload
	// ErrorCode is the answer given.
	ErrorCode int16
}

// TelemetrySubscriptionAsk is one GetTelemetrySubscriptions request read.
type TelemetrySubscriptionAsk struct {
	Node             int32
	At               time.Time
	ClientInstanceID [16]byte // as asked: zero for a new client
}

// telemetryState is the cluster's subscription and what clients pushed;
// guarded by c.mu.
type telemetryState struct {
	cfg            *TelemetryConfig // nil: client metrics push not offered
	subscriptionID int32
	instances      map[[16]byte]bool
	nextInstance   uint64
	pushes         []TelemetryPush
	asks           []TelemetrySubscriptionAsk
	inject         []int16 // InjectTelemetryError
}

// SetTelemetry sets the client metrics subscription every client gets,
// with a new subscription id (pushes naming the previous one are answered
// UNKNOWN_SUBSCRIPTION_ID); nil withdraws it: connections opened from now
// on are not offered the two requests, and requests still sent are
// answered UNSUPPORTED_VERSION.
func (c *Cluster) SetTelemetry(cfg *TelemetryConfig) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &c.telemetry
	if cfg != nil {
		cp := *cfg
		cfg = &cp
	}
	t.cfg = cfg
	t.subscriptionID++
}

// InjectTelemetryError makes the next n pushes that pass the checks be
// answered with code.
func (c *Cluster) InjectTelemetryError(code int16, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for range n {
		c.telemetry.inject = append(c.telemetry.inject, code)
	}
}

// TelemetryPushes returns every PushTelemetry request read so far, in
// order.
func (c *Cluster) TelemetryPushes() []TelemetryPush {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]TelemetryPush(nil), c.telemetry.pushes...)
}

// TelemetrySubscriptionAsks returns every GetTelemetrySubscriptions
// request read so far, in order.
func (c *Cluster) TelemetrySubscriptionAsks() []TelemetrySubscriptionAsk {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]TelemetrySubscriptionAsk(nil), c.telemetry.asks...)
}

func handleGetTelemetrySubscriptions(c *Cluster, r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.GetTelemetrySubscriptionsRequest)
	resp := req.ResponseKind().(*kmsg.GetTelemetrySubscriptionsResponse)
	t := &c.telemetry
	t.asks = append(t.asks, TelemetrySubscriptionAsk{Node: r.n.id, At: r.readAt, ClientInstanceID: req.ClientInstanceID})
	if t.cfg == nil {
		resp.ErrorCode = kerr.UnsupportedVersion.Code
		return resp, nil
	}
	id := req.ClientInstanceID
	if id == ([16]byte{}) {
		t.nextInstance++
		id = [16]byte{0: 0x7e, 15: byte(t.nextInstance), 14: byte(t.nextInstance >> 8)}
	}
	if t.instances == nil {
		t.instances = make(map[[16]byte]bool)
	}
	t.instances[id] = true
	resp.ClientInstanceID = id
	resp.SubscriptionID = t.subscriptionID
	for _, codec := range t.cfg.Compression {
		resp.AcceptedCompressionTypes = append(resp.AcceptedCompressionTypes, int8(codec))
	}
	resp.PushIntervalMillis = int32(t.cfg.PushInterval.Milliseconds())
	resp.TelemetryMaxBytes = t.maxBytes()
	resp.DeltaTemporality = t.cfg.Delta
	resp.RequestedMetrics = t.cfg.Metrics
	return resp, nil
}

func (t *telemetryState) maxBytes() int32 {
	if t.cfg.MaxBytes > 0 {
		return t.cfg.MaxBytes
	}
	return 1 << 20
}

func handlePushTelemetry(c *Cluster, r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.PushTelemetryRequest)
	resp := req.ResponseKind().(*kmsg.PushTelemetryResponse)
	t := &c.telemetry
	push := TelemetryPush{Node: r.n.id, At: r.readAt, ClientID: r.clientID, ClientInstanceID: req.ClientInstanceID,
		SubscriptionID: req.SubscriptionID, Terminating: req.Terminating, Codec: protocol.Codec(req.CompressionType)}
	push.ErrorCode = t.check(req, &push)
	t.pushes = append(t.pushes, push)
	resp.ErrorCode = push.ErrorCode
	return resp, nil
}

// check returns the answer to req, decoding its metrics into push.
func (t *telemetryState) check(req *kmsg.PushTelemetryRequest, push *TelemetryPush) int16 {
	if t.cfg == nil {
		return kerr.UnsupportedVersion.Code
	}
	if !t.instances[req.ClientInstanceID] || req.SubscriptionID != t.subscriptionID {
		return kerr.UnknownSubscriptionID.Code
	}
	accepted := false
	for _, codec := range t.cfg.Compression {
		accepted = accepted || codec == push.Codec
	}
	if !accepted && push.Codec != protocol.CodecNone {
		return kerr.UnsupportedCompressionType.Code
	}
	if len(req.Metrics) > int(t.maxBytes()) {
		return kerr.TelemetryTooLarge.Code
	}
	raw, err := protocol.Decompress(nil, push.Codec, req.Metrics, 16<<20)
	if err != nil {
		return kerr.InvalidRecord.Code
	}
	if push.Payload, err = otlp.Decode(raw); err != nil {
		push.Payload = otlp.Payload{}
		return kerr.InvalidRecord.Code
	}
	if len(t.inject) > 0 {
		code := t.inject[0]
		t.inject = t.inject[1:]
		return code
	}
	return 0
}
