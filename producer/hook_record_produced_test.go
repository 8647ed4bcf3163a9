package producer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/longhaul-kafka/longhaul/internal/broker"
	"github.com/longhaul-kafka/longhaul/protocol"
)

// headerHook adds a header to every record it sees (as a tracing plugin
// injects its trace context), sets the record's Context, and keeps the
// goroutine of each call and the records it saw done.
type headerHook struct {
	mu       sync.Mutex
	produced map[*Record]uint64 // record -> goroutine of OnRecordProduced
	done     map[*Record][]error
}

type ctxKey struct{}

func (h *headerHook) OnRecordProduced(r *Record) {
	r.Headers = append(r.Headers, Header{Key: "traceparent", Value: fmt.Appendf(nil, "for-%.8s", r.Value)})
	r.Context = context.WithValue(context.Background(), ctxKey{}, string(r.Value))
	h.mu.Lock()
	defer h.mu.Unlock()
	h.produced[r] = goroutineID()
}

func (h *headerHook) OnRecordDone(r *Record, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.done[r] = append(h.done[r], err)
}

func newHeaderHook() *headerHook {
	return &headerHook{produced: map[*Record]uint64{}, done: map[*Record][]error{}}
}

// TestHookRecordProduced checks HookRecordProduced's promises: it runs
// on the caller's goroutine for every non-nil record of Produce,
// TryProduce and ProduceSync, before the record is encoded (the header
// it adds is in the broker's log, after the caller's own, and the
// Context it sets reaches the callback); and every record it saw gets
// exactly one HookRecordDone, also one refused after it (too large for
// max.request.size, empty topic, after Close). The control: without the
// hook nothing is added.
func TestHookRecordProduced(t *testing.T) {
	c := startCluster(t, broker.Config{Topics: []broker.TopicConfig{{Name: "t", Partitions: 1}}})
	h := newHeaderHook()
	p := newTestProducer(t, c, Hooks(h), Property("max.request.size", "2000"))

	caller := goroutineID()
	var recs []*Record
	for i := range 6 {
		r := &Record{Topic: "t", Value: fmt.Appendf(nil, "v%d", i), Headers: []Header{{Key: "own", Value: []byte("x")}}}
		r.SetPartition(0)
		recs = append(recs, r)
	}
	var wg sync.WaitGroup
	wg.Add(2)
	p.Produce(context.Background(), recs[0], func(r *Record, err error) {
		defer wg.Done()
		assert.NoError(t, err)
		assert.Equal(t, "v0", r.Context.Value(ctxKey{}), "the Context the hook set reaches the callback")
	})
	p.TryProduce(recs[1], func(_ *Record, err error) { defer wg.Done(); assert.NoError(t, err) })
	require.NoError(t, p.ProduceSync(context.Background(), recs[2:4]...).FirstErr())
	wg.Wait()

	// Refused after the hook saw them.
	tooLarge := &Record{Topic: "t", Value: make([]byte, 3000)}
	noTopic := &Record{Value: []byte("no topic")}
	errs := p.ProduceSync(context.Background(), tooLarge, noTopic)
	require.ErrorIs(t, errs[0].Err, ErrRecordTooLarge)
	require.ErrorIs(t, errs[1].Err, ErrInvalidRecord)
	// The hook's header counts toward the size: the largest record that
	// fits without it does not fit with it.
	limit := 2000 - protocol.RecordBatchOverhead
	n := 1000
	for recordMemory(&Record{Topic: "t", Value: make([]byte, n+1)}) <= limit {
		n++
	}
	nearLimit := &Record{Topic: "t", Value: make([]byte, n)}
	require.LessOrEqual(t, recordMemory(&Record{Topic: "t", Value: make([]byte, n)}), limit)
	require.ErrorIs(t, p.ProduceSync(context.Background(), nearLimit).FirstErr(), ErrRecordTooLarge)
	require.NoError(t, p.Close(context.Background()))
	afterClose := &Record{Topic: "t", Value: []byte("late")}
	require.ErrorIs(t, p.ProduceSync(context.Background(), afterClose).FirstErr(), ErrClosed)

	// Produce(nil) calls no hook.
	var nilDone = make(chan error, 1)
	p.Produce(context.Background(), nil, func(_ *Record, err error) { nilDone <- err })
	require.ErrorIs(t, <-nilDone, ErrInvalidRecord)

	h.mu.Lock()
	defer h.mu.Unlock()
	all := append(append([]*Record{}, recs[:4]...), tooLarge, noTopic, nearLimit, afterClose)
	require.Len(t, h.produced, len(all))
	for _, r := range all {
		require.Equal(t, caller, h.produced[r], "OnRecordProduced runs on the caller's goroutine (%s)", r.Value)
		require.Len(t, h.done[r], 1, "exactly one OnRecordDone for %q", r.Value)
	}
	for _, r := range recs[:4] {
		require.NoError(t, h.done[r][0])
	}
	require.ErrorIs(t, h.done[tooLarge][0], ErrRecordTooLarge)
	require.ErrorIs(t, h.done[noTopic][0], ErrInvalidRecord)
	require.True(t, errors.Is(h.done[afterClose][0], ErrClosed))

	log := c.Records("t", 0)
	require.Len(t, log, 4)
	for i, lr := range log {
		require.Len(t, lr.Headers, 2, "record %d", i)
		require.Equal(t, "own", lr.Headers[0].Key)
		require.Equal(t, "traceparent", lr.Headers[1].Key)
		require.Equal(t, "for-"+string(lr.Value), string(lr.Headers[1].Value)) // values shorter than 8 bytes
	}

	// Control: the same records without the hook carry only their own
	// header, and a refused record gets no HookRecordDone (done only).
	c2 := startCluster(t, broker.Config{Topics: []broker.TopicConfig{{Name: "t", Partitions: 1}}})
	doneOnly := newRecorder()
	p2 := newTestProducer(t, c2, Hooks(doneOnly))
	r := &Record{Topic: "t", Value: []byte("plain"), Headers: []Header{{Key: "own", Value: []byte("x")}}}
	require.NoError(t, p2.ProduceSync(context.Background(), r).FirstErr())
	require.Error(t, p2.ProduceSync(context.Background(), &Record{Value: []byte("no topic")}).FirstErr())
	require.NoError(t, p2.Close(context.Background()))
	require.Len(t, c2.Records("t", 0)[0].Headers, 1)
	doneOnly.mu.Lock()
	require.Len(t, doneOnly.done, 1, "without HookRecordProduced a refused record gets no HookRecordDone")
	doneOnly.mu.Unlock()
}
