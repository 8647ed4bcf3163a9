package protocol

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestInitProducerIDRejectsNoIdentity: an answer without an error code
// must carry an identity. Producer id -1 is what a batch without
// idempotence carries: a producer that took it would send batches the
// broker writes without deduplication, so every retry of a lost answer
// could be written twice, silently. A negative epoch is no epoch either.
// Such answers are a malformed response (the caller retries), not an id.
func TestInitProducerIDRejectsNoIdentity(t *testing.T) {
	for _, tc := range []struct {
		id    int64
		epoch int16
	}{{-1, 0}, {-1, -1}, {-7, 3}, {1000, -1}, {1000, -32768}} {
		t.Run(fmt.Sprintf("id %d epoch %d", tc.id, tc.epoch), func(t *testing.T) {
			b := newFakeBroker(t)
			b.handle = func(h RequestHeader, req kmsg.Request, reply func(any)) {
				resp := req.(*kmsg.InitProducerIDRequest).ResponseKind().(*kmsg.InitProducerIDResponse)
				resp.ProducerID, resp.ProducerEpoch = tc.id, tc.epoch
				reply(resp)
			}
			c := dialT(t, b.listen(), DialConfig{})
			id, ep, code, err := InitProducerID(context.Background(), c, -1, -1, 0)
			require.ErrorIs(t, err, ErrMalformedResponse)
			require.Equal(t, int64(-1), id)
			require.Equal(t, int16(-1), ep)
			require.Zero(t, code)
		})
	}
	// The edges that are identities.
	b := newFakeBroker(t)
	b.handle = func(h RequestHeader, req kmsg.Request, reply func(any)) {
		resp := req.(*kmsg.InitProducerIDRequest).ResponseKind().(*kmsg.InitProducerIDResponse)
		resp.ProducerID, resp.ProducerEpoch = 0, 32767
		reply(resp)
	}
	c := dialT(t, b.listen(), DialConfig{})
	id, ep, code, err := InitProducerID(context.Background(), c, -1, -1, 0)
	require.NoError(t, err)
	require.Equal(t, int64(0), id)
	require.Equal(t, int16(32767), ep)
	require.Zero(t, code)
}
