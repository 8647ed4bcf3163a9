package producer

// Tests for doc-comment promises checked in session 7's review: sentences
// of exported names' docs that no test held the code to, or that were
// false.

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/longhaul-kafka/longhaul/internal/broker"
)

// unstartedProducer is a producer whose brokers never answer: enough for
// promises about what Produce does before any broker is involved.
func unstartedProducer(t *testing.T, opts ...Opt) *Producer {
	t.Helper()
	p, err := New(append([]Opt{BootstrapServers("127.0.0.1:1")}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = p.Close(ctx)
	})
	return p
}

// TestNilRecordCalledBackOnCallbackGoroutine: Produce's doc says records
// that fail before being placed in a partition ("invalid, closed, no
// metadata") are called back from the callback goroutine, one callback at
// a time, and only after Close has returned from the caller's. A nil record
// is invalid: while the callback goroutine is held in an earlier callback,
// its callback must not run (it ran at once, on the caller's goroutine,
// beside the held one).
func TestNilRecordCalledBackOnCallbackGoroutine(t *testing.T) {
	for _, try := range []bool{false, true} {
		p := unstartedProducer(t)
		hold, held := make(chan struct{}), make(chan struct{})
		var release sync.Once
		t.Cleanup(func() { release.Do(func() { close(hold) }) }) // before Close, which waits for callbacks
		// An empty topic is rejected through the callback goroutine, which
		// then waits in this callback.
		p.Produce(t.Context(), &Record{}, func(*Record, error) {
			close(held)
			<-hold
		})
		<-held
		var ran atomic.Bool
		errc := make(chan error, 1)
		cb := func(r *Record, err error) {
			ran.Store(true)
			errc <- err
		}
		if try {
			p.TryProduce(nil, cb)
		} else {
			p.Produce(t.Context(), nil, cb)
		}
		require.False(t, ran.Load(), "TryProduce=%v: nil record's callback ran beside the running one, on the caller's goroutine", try)
		release.Do(func() { close(hold) })
		require.ErrorIs(t, <-errc, ErrInvalidRecord)
	}
}

// TestLimitUnderMaxWindow: InFlightLimit and PartitionStats.Limit report
// the limit the producer applies, longhaul.max.window included (as
// HookWindowChanged's "every partition starts at 5 (or max.window if
// lower)" says): below the default before the window is learned, and the
// cap, not the broker's window, after. Their docs said "5 until learned,
// then the broker's window".
func TestLimitUnderMaxWindow(t *testing.T) {
	c := startCluster(t, broker.Config{Topics: []broker.TopicConfig{{Name: "t", Partitions: 2, Window: 20}}})
	p := newTestProducer(t, c, MaxWindow(3))
	r := &Record{Topic: "t", Value: []byte("v")}
	r.SetPartition(0)
	require.NoError(t, p.ProduceSync(t.Context(), r).FirstErr())
	assert.Equal(t, 3, p.InFlightLimit("t", 0), "learned 20, capped at 3")
	assert.Equal(t, 3, p.InFlightLimit("t", 1), "not learned: 5, capped at 3")
	assert.Equal(t, 5, p.InFlightLimit("t", 2), "a partition it does not know")
	limits := map[int32]int{}
	for _, ps := range p.Stats().Partitions {
		limits[ps.Partition] = ps.Limit
	}
	assert.Equal(t, map[int32]int{0: 3, 1: 3}, limits)

	// Without the cap the same steps give the documented 5 and the
	// broker's window: the cap is what changed them.
	q := newTestProducer(t, c)
	require.NoError(t, q.ProduceSync(t.Context(), r).FirstErr())
	assert.Equal(t, 20, q.InFlightLimit("t", 0))
	assert.Equal(t, 5, q.InFlightLimit("t", 1))
}

// TestDeliveryTimeoutFollowsJavaDefaulting: a pasted Java config that
// raises request.timeout.ms (or linger.ms) past the default
// delivery.timeout.ms works in the Java client, which raises the unset
// delivery.timeout.ms to linger.ms + request.timeout.ms (KafkaProducer's
// configureDeliveryTimeout); only an explicit delivery.timeout.ms below
// that sum is an error there. It was a ConfigError here, naming a property
// the user never set.
func TestDeliveryTimeoutFollowsJavaDefaulting(t *testing.T) {
	p, err := NewFromProperties(map[string]string{"bootstrap.servers": "127.0.0.1:1", "request.timeout.ms": "200000", "linger.ms": "50"})
	require.NoError(t, err)
	assert.Equal(t, 200050*time.Millisecond, p.cfg.deliveryTimeout)
	require.NoError(t, p.Close(t.Context()))

	q, err := New(BootstrapServers("127.0.0.1:1"), RequestTimeout(150*time.Second))
	require.NoError(t, err)
	assert.Equal(t, 150005*time.Millisecond, q.cfg.deliveryTimeout, "linger.ms 5 + request.timeout.ms")
	require.NoError(t, q.Close(t.Context()))

	// Set explicitly, below the sum: an error, as in Java, whichever
	// order the options come in.
	for _, opts := range [][]Opt{
		{DeliveryTimeout(100 * time.Second), RequestTimeout(150 * time.Second)},
		{RequestTimeout(150 * time.Second), DeliveryTimeout(100 * time.Second)},
	} {
		_, err = New(append([]Opt{BootstrapServers("127.0.0.1:1")}, opts...)...)
		var ce *ConfigError
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, "delivery.timeout.ms", ce.Property)
	}
	// The default is kept when it is large enough.
	r, err := New(BootstrapServers("127.0.0.1:1"))
	require.NoError(t, err)
	assert.Equal(t, 120*time.Second, r.cfg.deliveryTimeout)
	require.NoError(t, r.Close(t.Context()))
}

// TestBufferMemoryBelowMaxRequestSize: the Java client accepts a
// buffer.memory below max.request.size (a small container's producer sets
// buffer.memory alone) and fails only the records larger than
// buffer.memory, as Produce's doc says ("larger than max.request.size or
// buffer.memory ... fails at once"). New refused such a config.
func TestBufferMemoryBelowMaxRequestSize(t *testing.T) {
	c := startCluster(t, broker.Config{Topics: []broker.TopicConfig{{Name: "t", Partitions: 1}}})
	p := newTestProducer(t, c, Property("buffer.memory", "65536"))
	small := &Record{Topic: "t", Value: make([]byte, 40000)}
	big := &Record{Topic: "t", Value: make([]byte, 70000)} // under max.request.size, over buffer.memory
	res := p.ProduceSync(t.Context(), small, big)
	require.NoError(t, res[0].Err)
	require.ErrorIs(t, res[1].Err, ErrRecordTooLarge)
	require.Len(t, c.Records("t", 0), 1)
}

// TestBatchSizeZeroDisablesBatching: the Java client accepts batch.size=0
// ("a batch size of zero will disable batching entirely"); a pasted
// config with it was a ConfigError. It makes every record a batch of its
// own, as a batch.size below any record does.
func TestBatchSizeZeroDisablesBatching(t *testing.T) {
	c := startCluster(t, broker.Config{Topics: []broker.TopicConfig{{Name: "t", Partitions: 1}}})
	p := newTestProducer(t, c, Property("batch.size", "0"), Linger(time.Second))
	recs := []*Record{{Topic: "t", Value: []byte("a")}, {Topic: "t", Value: []byte("b")}, {Topic: "t", Value: []byte("c")}}
	require.NoError(t, p.ProduceSync(t.Context(), recs...).FirstErr())
	assert.Equal(t, int64(3), p.Stats().BatchesSent, "one batch per record")
	require.Len(t, c.Records("t", 0), 3)
}

// TestRecordsFailedCountsEveryAcceptedFailure: Stats.RecordsFailed is
// "records failed after they were accepted". Records accepted while their
// topic's partitions were unknown that then failed (max.block.ms,
// ErrTopicMetadata), and buffered records ProduceSync withdrew when its
// context ended, were accepted (HookRecordDone saw them) but not counted:
// only failed batches were.
func TestRecordsFailedCountsEveryAcceptedFailure(t *testing.T) {
	c := startCluster(t, broker.Config{Topics: []broker.TopicConfig{{Name: "t", Partitions: 1}}})
	var done atomic.Int64
	p := newTestProducer(t, c, MaxBlock(50*time.Millisecond), Linger(10*time.Second), Hooks(recordDoneFunc(func(*Record, error) { done.Add(1) })))

	res := p.ProduceSync(t.Context(), &Record{Topic: "nope", Value: []byte("v")})
	require.ErrorIs(t, res.FirstErr(), ErrTopicMetadata)
	assert.Equal(t, int64(1), p.Stats().RecordsFailed, "failed waiting for its topic's partitions")

	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	res = p.ProduceSync(ctx, &Record{Topic: "t", Value: []byte("v")}) // lingers: withdrawn
	require.ErrorIs(t, res.FirstErr(), context.DeadlineExceeded)
	require.False(t, IsFateUnknown(res.FirstErr()))
	require.NoError(t, p.Flush(t.Context()))
	assert.Equal(t, int64(2), p.Stats().RecordsFailed, "withdrawn by ProduceSync")
	assert.Equal(t, int64(2), done.Load(), "both were accepted: HookRecordDone saw them")
	assert.Zero(t, p.Stats().RecordsSent)
}

// recordDoneFunc adapts a function to HookRecordDone.
type recordDoneFunc func(*Record, error)

func (f recordDoneFunc) OnRecordDone(r *Record, err error) { f(r, err) }

// TestCloseFailsSentAndUnsentApart: Close's doc: once ctx ends it fails
// what is undelivered with ErrClosed, "as a *DeliveryError marked
// FateUnknown when it had been sent", and returns "an error wrapping
// ctx's". A batch in flight to a stalled broker and one held behind it
// (the partition's first batch goes alone) fail apart: the first maybe
// written, the second certainly not, and never in the log.
func TestCloseFailsSentAndUnsentApart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, n := memCluster(t, broker.Config{Topics: []broker.TopicConfig{{Name: "t", Partitions: 2}}})
		p := memProducer(t, c, n)
		warm := &Record{Topic: "t", Value: []byte("warm")}
		warm.SetPartition(1)
		require.NoError(t, p.ProduceSync(t.Context(), warm).FirstErr())

		c.Stall(0, 3*time.Second)
		errs := make(chan error, 2)
		sent := &Record{Topic: "t", Value: []byte("sent")}
		sent.SetPartition(0)
		p.Produce(t.Context(), sent, func(_ *Record, err error) { errs <- err })
		time.Sleep(100 * time.Millisecond)
		require.Equal(t, 1, p.Stats().Partitions[0].InFlight, "the first batch is in flight")
		held := &Record{Topic: "t", Value: []byte("held")}
		held.SetPartition(0)
		p.Produce(t.Context(), held, func(_ *Record, err error) { errs <- err })
		time.Sleep(100 * time.Millisecond)

		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		defer cancel()
		require.ErrorIs(t, p.Close(ctx), context.DeadlineExceeded)
		for _, fateUnknown := range []bool{true, false} {
			err := <-errs
			require.ErrorIs(t, err, ErrClosed)
			var de *DeliveryError
			require.ErrorAs(t, err, &de)
			assert.Equal(t, fateUnknown, de.FateUnknown, "%v", err)
			assert.Equal(t, fateUnknown, IsFateUnknown(err))
		}
		time.Sleep(3 * time.Second) // the stall ends; the broker handles what it read
		for _, r := range c.Records("t", 0) {
			assert.NotEqual(t, "held", string(r.Value), "a record reported without FateUnknown is not in the log")
		}
	})
}

// TestProduceSyncOutcomesKept: "Records that already had their outcome
// keep it" when ProduceSync's ctx ends: a record rejected at once keeps
// its ErrInvalidRecord and a delivered one its success and offset, while
// one still waiting (for its topic's partitions) is withdrawn with ctx's
// error.
func TestProduceSyncOutcomesKept(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, n := memCluster(t, broker.Config{Topics: []broker.TopicConfig{{Name: "t", Partitions: 1}}})
		p := memProducer(t, c, n, MaxBlock(time.Hour))
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		defer cancel()
		res := p.ProduceSync(ctx, &Record{Value: []byte("no topic")}, &Record{Topic: "t", Value: []byte("ok")}, &Record{Topic: "nowhere", Value: []byte("w")})
		require.Len(t, res, 3)
		assert.ErrorIs(t, res[0].Err, ErrInvalidRecord)
		assert.NotErrorIs(t, res[0].Err, context.DeadlineExceeded)
		assert.NoError(t, res[1].Err)
		assert.Equal(t, int64(0), res[1].Record.Offset)
		assert.ErrorIs(t, res[2].Err, context.DeadlineExceeded)
		assert.False(t, IsFateUnknown(res[2].Err))
		assert.Equal(t, int64(-1), res[2].Record.Offset)
	})
}

// TestRetryBackoffDoubles: RetryBackoff's doc, "the first wait before a
// retry ... it doubles up to RetryBackoffMax", with the jitter of a tenth
// either way that conns.go's backoff adds; and a retry.backoff.max.ms
// below retry.backoff.ms is raised to it, as in the Java client.
func TestRetryBackoffDoubles(t *testing.T) {
	p := backoffSender(t, RetryBackoff(100*time.Millisecond), RetryBackoffMax(time.Second))
	for failures, want := range map[int]time.Duration{1: 100 * time.Millisecond, 2: 200 * time.Millisecond,
		3: 400 * time.Millisecond, 4: 800 * time.Millisecond, 5: time.Second, 9: time.Second} {
		lo, hi := want, want
		for range 200 {
			d := p.backoff(failures)
			lo, hi = min(lo, d), max(hi, d)
		}
		assert.GreaterOrEqual(t, lo, want-want/10, "failures %d", failures)
		assert.LessOrEqual(t, hi, want+want/10, "failures %d", failures)
		assert.Less(t, lo, hi, "failures %d: jittered", failures)
	}
	q := backoffSender(t, RetryBackoff(2*time.Second), RetryBackoffMax(time.Second))
	assert.Equal(t, 2*time.Second, q.cfg.retryBackoffMax)
	assert.GreaterOrEqual(t, q.backoff(3), 1800*time.Millisecond)
}

// backoffSender is a sender that is not running, with the config opts
// give: its jitter source belongs to the sender goroutine (randSources),
// so the test must not draw from a running producer's.
func backoffSender(t *testing.T, opts ...Opt) *sender {
	t.Helper()
	c := defaultConfig()
	for _, o := range append([]Opt{BootstrapServers("127.0.0.1:1")}, opts...) {
		require.NoError(t, o.apply(&c))
	}
	require.NoError(t, c.validate())
	return &sender{cfg: &c}
}

// TestBooleanPropertiesParseAsJava: the Java client reads a boolean
// property trimmed and in any case ("TRUE", " false "), and nothing else
// ("1", "t" are errors); so does NewFromProperties, for every boolean
// property, enable.idempotence included (which allows only true).
func TestBooleanPropertiesParseAsJava(t *testing.T) {
	for _, name := range []string{"allow.auto.create.topics", "partitioner.ignore.keys", "partitioner.adaptive.partitioning.enable", "enable.idempotence"} {
		for _, v := range []string{"TRUE", " true ", "True"} {
			c := defaultConfig()
			require.NoError(t, Property(name, v).apply(&c), "%s=%q", name, v)
		}
		for _, v := range []string{"1", "t", "yes", ""} {
			c := defaultConfig()
			require.Error(t, Property(name, v).apply(&c), "%s=%q", name, v)
		}
		if name != "enable.idempotence" {
			c := defaultConfig()
			require.NoError(t, Property(name, " FALSE").apply(&c), name)
		}
	}
	c := defaultConfig()
	require.NoError(t, Property("partitioner.ignore.keys", "TRUE").apply(&c))
	assert.True(t, c.ignoreKeys)
	require.NoError(t, Property("allow.auto.create.topics", " False ").apply(&c))
	assert.False(t, c.autoCreateTopics)
}

// TestPropertyValuesTrimmedAsJava: the Java client trims every property
// value before reading it (ConfigDef.parseType), so a pasted config with
// stray spaces works there; every property here reads the trimmed value.
func TestPropertyValuesTrimmedAsJava(t *testing.T) {
	props := map[string]string{
		"bootstrap.servers": " 127.0.0.1:1 ", "security.protocol": " PLAINTEXT ", "acks": " all",
		"partitioner": "murmur2 ", "compression.type": " lz4", "client.id": " app ", "linger.ms": " 7 ",
	}
	p, err := NewFromProperties(props)
	require.NoError(t, err)
	assert.Equal(t, "app", p.cfg.clientID)
	assert.Equal(t, 7*time.Millisecond, p.cfg.linger)
	require.NoError(t, p.Close(t.Context()))
}

// TestProduceWithDoneContext: a ctx already done when Produce is called
// fails the record with ctx's error, not sent, even with buffer.memory
// free (Produce's doc said ctx only bounded the wait for room, and had "no
// other effect"); the next record with a live ctx is written.
func TestProduceWithDoneContext(t *testing.T) {
	c := startCluster(t, broker.Config{Topics: []broker.TopicConfig{{Name: "t", Partitions: 1}}})
	p := newTestProducer(t, c)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	errc := make(chan error, 1)
	p.Produce(ctx, &Record{Topic: "t", Value: []byte("late")}, func(_ *Record, err error) { errc <- err })
	require.ErrorIs(t, <-errc, context.Canceled)
	require.NoError(t, p.ProduceSync(t.Context(), &Record{Topic: "t", Value: []byte("live")}).FirstErr())
	rs := c.Records("t", 0)
	require.Len(t, rs, 1)
	assert.Equal(t, "live", string(rs[0].Value))
}
