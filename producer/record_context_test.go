package producer

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/longhaul-kafka/longhaul/internal/broker"
)

type spanKey struct{}

// contextHook reads the span a record's Context carries, as a tracing
// plugin would.
type contextHook struct{ spans chan any }

func (h contextHook) OnRecordDone(r *Record, err error) {
	var span any
	if r.Context != nil {
		span = r.Context.Value(spanKey{})
	}
	h.spans <- span
}

// Record.Context reaches HookRecordDone and the callback unchanged, for
// records placed at once and those that waited for metadata; a cancelled
// Context fails nothing; a nil Context is allowed.
func TestRecordContextCarriedToHooks(t *testing.T) {
	c := startCluster(t, broker.Config{Topics: []broker.TopicConfig{{Name: "t", Partitions: 2}}})
	h := contextHook{spans: make(chan any, 8)}
	p := newTestProducer(t, c, Hooks(h))

	cancelled, cancel := context.WithCancel(context.WithValue(context.Background(), spanKey{}, "span-1"))
	cancel()
	first := &Record{Topic: "t", Value: []byte("a"), Context: cancelled} // waits for metadata
	require.NoError(t, p.ProduceSync(context.Background(), first).FirstErr(), "a cancelled Context fails nothing")
	assert.Equal(t, "span-1", <-h.spans)

	got := make(chan any, 1)
	second := &Record{Topic: "t", Value: []byte("b"), Context: context.WithValue(context.Background(), spanKey{}, "span-2")}
	p.Produce(context.Background(), second, func(r *Record, err error) {
		assert.NoError(t, err) // not require: FailNow on the callback goroutine would leave Close waiting for it
		got <- r.Context.Value(spanKey{})
	})
	assert.Equal(t, "span-2", <-h.spans)
	assert.Equal(t, "span-2", <-got)

	require.NoError(t, p.ProduceSync(context.Background(), &Record{Topic: "t", Value: []byte("c")}).FirstErr())
	assert.Nil(t, <-h.spans)
}
