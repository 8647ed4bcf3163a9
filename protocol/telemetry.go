package protocol

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// This file holds the two requests of client metrics push (KIP-714,
// Kafka 3.7+). Like the rest of the package they return error codes as
// numbers without interpreting them; err is for transport and decoding
// failures and for a broker without the request.

// API keys of client metrics push.
const (
	keyGetTelemetrySubscriptions int16 = 71
	keyPushTelemetry             int16 = 72
)

// TelemetrySubscription is a broker's answer to
// [GetTelemetrySubscriptions]: which metrics it wants pushed, how and how
// often.
type TelemetrySubscription struct {
	// ErrorCode is the broker's error code, 0 for none; the other fields
	// are meaningful only without one.
	ErrorCode int16
	// ClientInstanceID is the id the broker assigned (when asked with the
	// zero id) or the one asked with.
	ClientInstanceID [16]byte
	// SubscriptionID names the set of subscriptions the answer reflects;
	// a push with an outdated one is answered UNKNOWN_SUBSCRIPTION_ID.
	SubscriptionID int32
	// Compression is the codecs the broker accepts for pushes, in its
	// order of preference; codecs this package does not know are left
	// out.
	Compression []Codec
	// PushInterval is how often to push; 0 when the broker sent a value
	// of 0 or less.
	PushInterval time.Duration
	// MaxBytes is the largest metrics payload the broker accepts.
	MaxBytes int32
	// Delta asks for sums as deltas since the last push rather than
	// cumulative values.
	Delta bool
	// Metrics is the requested metric name prefixes: none subscribes to
	// no metric, a single "*" to all.
	Metrics []string
	// Throttle is the broker's throttle time for this answer.
	Throttle time.Duration
}

// HasTelemetry reports whether c can push client metrics: the broker
// serves GetTelemetrySubscriptions and PushTelemetry (Kafka 3.7+; a
// broker also needs a metrics reporter that receives them).
func HasTelemetry(c *Conn) bool {
	_, a := c.Version(keyGetTelemetrySubscriptions)
	_, b := c.Version(keyPushTelemetry)
	return a && b
}

// GetTelemetrySubscriptions asks c which client metrics to push, for the
// client instance id (the zero id asks the broker to assign one). A broker
// without the request gives an error wrapping [ErrUnsupportedVersion]. An
// answer without an error code and with a zero client instance id is an
// error wrapping [ErrMalformedResponse].
func GetTelemetrySubscriptions(ctx context.Context, c *Conn, id [16]byte) (*TelemetrySubscription, error) {
	if !HasTelemetry(c) {
		return nil, fmt.Errorf("%w: broker %s has no client metrics push (Kafka before 3.7)", ErrUnsupportedVersion, c.Addr())
	}
	req := kmsg.NewPtrGetTelemetrySubscriptionsRequest()
	req.ClientInstanceID = id
	r, err := c.Do(ctx, req)
	if err != nil {
		return nil, err
	}
	return telemetrySubscription(r.(*kmsg.GetTelemetrySubscriptionsResponse), c.Addr())
}

// telemetrySubscription checks and converts an answer from addr.
func telemetrySubscription(resp *kmsg.GetTelemetrySubscriptionsResponse, addr string) (*TelemetrySubscription, error) {
	s := &TelemetrySubscription{
		ErrorCode: resp.ErrorCode,
		Throttle:  time.Duration(max(resp.ThrottleMillis, 0)) * time.Millisecond,
	}
	if resp.ErrorCode != 0 {
		return s, nil
	}
	if resp.ClientInstanceID == ([16]byte{}) {
		return nil, fmt.Errorf("%w: GetTelemetrySubscriptions from %s gave no client instance id", ErrMalformedResponse, addr)
	}
	s.ClientInstanceID = resp.ClientInstanceID
	s.SubscriptionID = resp.SubscriptionID
	for _, t := range resp.AcceptedCompressionTypes {
		if c := Codec(t); c.valid() {
			s.Compression = append(s.Compression, c)
		}
	}
	if resp.PushIntervalMillis > 0 {
		s.PushInterval = time.Duration(resp.PushIntervalMillis) * time.Millisecond
	}
	s.MaxBytes = resp.TelemetryMaxBytes
	s.Delta = resp.DeltaTemporality
	s.Metrics = resp.RequestedMetrics
	return s, nil
}

// TelemetryPush is one [PushTelemetry] request.
type TelemetryPush struct {
	ClientInstanceID [16]byte
	SubscriptionID   int32
	// Terminating marks the client's last push, sent as it closes.
	Terminating bool
	// Codec is how Metrics was compressed ([CodecNone]: not at all).
	Codec Codec
	// Metrics is an OpenTelemetry MetricsData message (protobuf),
	// compressed with Codec.
	Metrics []byte
}

// PushTelemetry sends one push of client metrics to c and returns the
// broker's error code (0: accepted). A broker without the request gives
// an error wrapping [ErrUnsupportedVersion].
func PushTelemetry(ctx context.Context, c *Conn, p TelemetryPush) (errorCode int16, err error) {
	if !HasTelemetry(c) {
		return 0, fmt.Errorf("%w: broker %s has no client metrics push (Kafka before 3.7)", ErrUnsupportedVersion, c.Addr())
	}
	req := kmsg.NewPtrPushTelemetryRequest()
	req.ClientInstanceID = p.ClientInstanceID
	req.SubscriptionID = p.SubscriptionID
	req.Terminating = p.Terminating
	req.CompressionType = int8(p.Codec)
	req.Metrics = p.Metrics
	r, err := c.Do(ctx, req)
	if err != nil {
		return 0, err
	}
	return r.(*kmsg.PushTelemetryResponse).ErrorCode, nil
}
