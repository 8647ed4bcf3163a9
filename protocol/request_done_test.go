package protocol

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestOnRequestDone: DialConfig.OnRequestDone is called once for each
// request sent with Send or Do (Metadata, ListOffsets here), with the
// connection's address, the API key, the time since it was sent and a nil
// error for an answer (an error code inside it changes nothing), before
// the request's own completion; a request that fails with its connection
// is reported with that error. The handshake's ApiVersions, a Produce
// exchange and a request the broker's versions refuse are not reported.
func TestOnRequestDone(t *testing.T) {
	type done struct {
		addr    string
		key     int16
		latency time.Duration
		err     error
	}
	var mu sync.Mutex
	var got []done
	b := newFakeBroker(t)
	b.keys = withKey(b.keys, 25, 0, -1) // no AddOffsetsToTxn
	const hold = 30 * time.Millisecond
	b.handle = func(h RequestHeader, req kmsg.Request, reply func(any)) {
		switch req.(type) {
		case *kmsg.ProduceRequest:
			reply(produceResponse(h.Version))
		case *kmsg.ListOffsetsRequest:
			resp := kmsg.NewPtrListOffsetsResponse()
			resp.Version = h.Version
			tp := kmsg.NewListOffsetsResponseTopic()
			tp.Topic = "t"
			pp := kmsg.NewListOffsetsResponseTopicPartition()
			pp.ErrorCode = 3 // an error code in the answer: still answered
			tp.Partitions = append(tp.Partitions, pp)
			resp.Topics = append(resp.Topics, tp)
			reply(resp)
		default:
			time.Sleep(hold)
			reply(mdEcho(req))
		}
	}
	addr := b.listen()
	c := dialT(t, addr, DialConfig{OnRequestDone: func(a string, key int16, latency time.Duration, err error) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, done{a, key, latency, err})
	}})
	reported := func() []done {
		mu.Lock()
		defer mu.Unlock()
		return append([]done(nil), got...)
	}
	require.Empty(t, reported(), "the handshake is not reported")

	ctx := context.Background()
	_, err := Metadata(ctx, c, []string{"t"})
	require.NoError(t, err)
	r := reported()
	require.Len(t, r, 1, "reported before Do returned")
	assert.Equal(t, addr, r[0].addr)
	assert.Equal(t, int16(3), r[0].key)
	assert.GreaterOrEqual(t, r[0].latency, hold)
	assert.NoError(t, r[0].err)

	_, code, err := ListOffsets(ctx, c, "t", 0, OffsetLatest)
	require.NoError(t, err)
	require.Equal(t, int16(3), code)
	r = reported()
	require.Len(t, r, 2)
	assert.Equal(t, int16(2), r[1].key)
	assert.NoError(t, r[1].err, "answered, whatever the code")

	req := &ProduceRequest{Acks: -1, Timeout: time.Second}
	req.Add("t", [16]byte{1}, 0, []byte("batch"))
	errc := make(chan error, 1)
	c.Produce(req, &ProduceResult{}, 10*time.Second, func(err error) { errc <- err })
	require.NoError(t, <-errc)
	_, err = c.Do(ctx, kmsg.NewPtrAddOffsetsToTxnRequest())
	require.ErrorIs(t, err, ErrUnsupportedVersion)
	assert.Len(t, reported(), 2, "neither the Produce exchange nor the refused request")

	require.NoError(t, c.Close())
	_, err = Metadata(ctx, c, []string{"t"})
	require.Error(t, err)
	r = reported()
	require.Len(t, r, 3)
	assert.Equal(t, int16(3), r[2].key)
	var ce *ConnError
	assert.True(t, errors.As(r[2].err, &ce), "the connection's error: %v", r[2].err)
}
