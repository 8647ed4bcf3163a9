package protocol

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func subscriptionAnswer() *kmsg.GetTelemetrySubscriptionsResponse {
	r := kmsg.NewPtrGetTelemetrySubscriptionsResponse()
	r.ClientInstanceID = [16]byte{1, 2, 3}
	r.SubscriptionID = 9
	r.AcceptedCompressionTypes = []int8{4, 99, 1, -1}
	r.PushIntervalMillis = 1500
	r.TelemetryMaxBytes = 1 << 20
	r.DeltaTemporality = true
	r.RequestedMetrics = []string{"org.apache.kafka.producer."}
	r.ThrottleMillis = 20
	return r
}

// TestTelemetrySubscription: an answer's fields as TelemetrySubscription
// documents them: unknown codecs left out in the broker's order, an
// interval of 0 or less as 0, a zero client instance id refused, an error
// code alone with an error.
func TestTelemetrySubscription(t *testing.T) {
	s, err := telemetrySubscription(subscriptionAnswer(), "b")
	require.NoError(t, err)
	assert.Equal(t, &TelemetrySubscription{ClientInstanceID: [16]byte{1, 2, 3}, SubscriptionID: 9,
		Compression: []Codec{CodecZstd, CodecGzip}, PushInterval: 1500 * time.Millisecond, MaxBytes: 1 << 20,
		Delta: true, Metrics: []string{"org.apache.kafka.producer."}, Throttle: 20 * time.Millisecond}, s)

	r := subscriptionAnswer()
	r.PushIntervalMillis = -5
	s, err = telemetrySubscription(r, "b")
	require.NoError(t, err)
	assert.Zero(t, s.PushInterval)

	r.ClientInstanceID = [16]byte{}
	_, err = telemetrySubscription(r, "b")
	assert.ErrorIs(t, err, ErrMalformedResponse)

	r.ErrorCode = 35
	s, err = telemetrySubscription(r, "b")
	require.NoError(t, err)
	assert.Equal(t, &TelemetrySubscription{ErrorCode: 35, Throttle: 20 * time.Millisecond}, s)
}

// FuzzTelemetrySubscription feeds arbitrary GetTelemetrySubscriptions
// bodies to the decoder: no panic; an error wraps ErrMalformedResponse;
// an accepted answer without an error code has a client instance id,
// known codecs only and an interval that is not negative.
func FuzzTelemetrySubscription(f *testing.F) {
	f.Add(subscriptionAnswer().AppendTo(nil))
	f.Add(kmsg.NewPtrGetTelemetrySubscriptionsResponse().AppendTo(nil))
	f.Fuzz(func(t *testing.T, data []byte) {
		r := kmsg.NewPtrGetTelemetrySubscriptionsResponse()
		if r.ReadFrom(data) != nil {
			return
		}
		s, err := telemetrySubscription(r, "b")
		if err != nil {
			if !errors.Is(err, ErrMalformedResponse) {
				t.Fatalf("error does not wrap ErrMalformedResponse: %v", err)
			}
			return
		}
		if s.ErrorCode != 0 {
			return
		}
		if s.ClientInstanceID == ([16]byte{}) || s.PushInterval < 0 || s.Throttle < 0 {
			t.Fatalf("accepted %+v", s)
		}
		for _, c := range s.Compression {
			if !c.valid() {
				t.Fatalf("unknown codec %d accepted", c)
			}
		}
	})
}
