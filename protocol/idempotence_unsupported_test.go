package protocol

import (
	"context"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestInitProducerIDWithoutKeyIsIdempotenceUnsupported checks
// InitProducerID's promise for a broker without InitProducerId (Kafka
// before 0.11): the error wraps ErrIdempotenceUnsupported, so a caller
// can tell "this broker cannot be produced to idempotently" from a
// transient failure, and ErrUnsupportedVersion; nothing is sent.
func TestInitProducerIDWithoutKeyIsIdempotenceUnsupported(t *testing.T) {
	b := newFakeBroker(t)
	b.keys = slices.DeleteFunc(withKey(b.keys, 0, 0, 2), func(k kmsg.ApiVersionsResponseApiKey) bool { return k.ApiKey == 22 })
	b.handle = func(h RequestHeader, req kmsg.Request, reply func(any)) {
		t.Errorf("request sent: key %d", req.Key())
	}
	c := dialT(t, b.listen(), DialConfig{})
	_, ok := c.Version(22)
	require.False(t, ok)
	id, _, code, err := InitProducerID(context.Background(), c, -1, -1, 0)
	require.ErrorIs(t, err, ErrIdempotenceUnsupported)
	require.ErrorIs(t, err, ErrUnsupportedVersion)
	require.Contains(t, err.Error(), "InitProducerId")
	require.EqualValues(t, -1, id)
	require.Zero(t, code)
	require.ErrorIs(t, RequireIdempotentProduce(c), ErrIdempotenceUnsupported, "Produce v2 at most")
}
