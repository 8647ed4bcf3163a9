package producer

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/longhaul-kafka/longhaul/internal/broker"
)

// TestProduceCopiesBytes: Key, Value and header values are copied before
// Produce returns, both for the first records of a topic (which wait for
// its partitions) and for later ones (appended to a batch at once). The test
// reuses one set of buffers for every record, overwriting them right after
// each Produce, and reads the log back from the broker.
func TestProduceCopiesBytes(t *testing.T) {
	c := startCluster(t, broker.Config{Nodes: 1, Topics: []broker.TopicConfig{{Name: "t", Partitions: 1}}})
	p := newTestProducer(t, c)
	key, val, hval := make([]byte, 8), make([]byte, 8), make([]byte, 8)
	const n = 20
	errs := make(chan error, 2*n)
	produce := func(first int) {
		for i := first; i < first+n; i++ {
			copy(key, fmt.Sprintf("key-%04d", i))
			copy(val, fmt.Sprintf("val-%04d", i))
			copy(hval, fmt.Sprintf("hdr-%04d", i))
			r := &Record{Topic: "t", Key: key, Value: val, Headers: []Header{{Key: "h", Value: hval}}}
			r.SetPartition(0)
			p.Produce(context.Background(), r, func(_ *Record, err error) { errs <- err })
			copy(key, "CHANGED!")
			copy(val, "CHANGED!")
			copy(hval, "CHANGED!")
		}
	}
	produce(0) // the producer does not know the topic yet: these wait for metadata
	require.NoError(t, p.Flush(context.Background()))
	produce(n) // partitions known: appended at once
	require.NoError(t, p.Flush(context.Background()))
	for range 2 * n {
		require.NoError(t, <-errs)
	}
	recs := c.Records("t", 0)
	require.Len(t, recs, 2*n)
	for i, lr := range recs {
		assert.Equal(t, fmt.Sprintf("key-%04d", i), string(lr.Key), "offset %d", i)
		assert.Equal(t, fmt.Sprintf("val-%04d", i), string(lr.Value), "offset %d", i)
		require.Len(t, lr.Headers, 1)
		assert.Equal(t, fmt.Sprintf("hdr-%04d", i), string(lr.Headers[0].Value), "offset %d", i)
	}
}
