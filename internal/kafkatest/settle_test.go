package kafkatest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/longhaul-kafka/longhaul/producer"
)

// settleSeq numbers the settling records, so each value is unique.
var settleSeq atomic.Int64

// settle produces one record to partition of topic and waits for its
// acknowledgement; the record is returned for the test's tally of what it
// sent. A test calls it once it has stopped its faults and before it
// asserts something that needs the next attempt not to be in doubt.
//
// Stopping the faults does not stop their effects. A connection cut (or a
// response dropped) just before the stop is closed, but the producer
// learns that only when its reader goroutine runs; on a loaded machine
// that can take milliseconds, and a request it writes on that connection
// meanwhile gets no answer: the attempt is in doubt, and its batch stays
// "maybe written" whatever the broker answers it later
// (TestSingleNode/SettleAfterCut shows it). The settling record can only
// be acknowledged over a connection that delivered a response after the
// stop, so one that was not cut, and the producer keeps using a
// connection until it fails: the partition's next batch goes on a sound
// one.
func settle(t *testing.T, ctx context.Context, p *producer.Producer, topic string, partition int32) Sent {
	t.Helper()
	r := &producer.Record{Topic: topic, Value: fmt.Appendf(nil, "settle-%d-%d", partition, settleSeq.Add(1))}
	r.SetPartition(partition)
	retried := p.Stats().BatchesRetried
	require.NoError(t, p.ProduceSync(ctx, r).FirstErr(), "settling record, partition %d", partition)
	if n := p.Stats().BatchesRetried - retried; n > 0 {
		t.Logf("settle: %d batch(es) retried after the faults stopped", n)
	}
	return Sent{Value: r.Value, Outcome: Acked}
}

// lateReader wraps connections so that their reader learns of a closed
// connection only once a request has been written since the last bytes it
// read (or after hold): what happens when the reader goroutine is
// scheduled late, made certain so that a test shows its consequence every
// time.
type lateReader struct {
	hold    time.Duration
	delayed atomic.Int64 // read errors held back until a write
}

func (l *lateReader) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var nd net.Dialer
	c, err := nd.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &lateConn{Conn: c, l: l, wrote: make(chan struct{}, 1), closed: make(chan struct{})}, nil
}

type lateConn struct {
	net.Conn
	l        *lateReader
	writes   atomic.Int64  // Write calls returned
	lastData int64         // writes when a read last returned bytes (reader only)
	wrote    chan struct{} // a write returned
	closed   chan struct{} // Close was called
	once     sync.Once
}

func (c *lateConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.lastData = c.writes.Load()
	}
	if n == 0 && err != nil {
		t := time.NewTimer(c.l.hold)
		defer t.Stop()
		for c.writes.Load() == c.lastData {
			select {
			case <-c.wrote:
			case <-c.closed:
				return n, err
			case <-t.C:
				return n, err
			}
		}
		c.l.delayed.Add(1)
	}
	return n, err
}

func (c *lateConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	c.writes.Add(1)
	select {
	case c.wrote <- struct{}{}:
	default:
	}
	return n, err
}

func (c *lateConn) Close() error {
	c.once.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

// testSettleAfterCut shows why [settle] is needed and that it is enough.
// The proxy cuts every connection and returns (nothing is cutting any
// more), and the producer's reader notices the cut late (lateReader).
// Without settling, the record sent next, too large for the topic, goes
// out on the cut connection first: that attempt is in doubt, so its
// MESSAGE_TOO_LARGE failure says "may have been written" (the CI failure
// of TestCompatMatrix/2.8.2). After settle it is refused as certainly not
// written, as TestCompatMatrix requires.
func testSettleAfterCut(t *testing.T, c *Cluster) {
	const topic = "settle-after-cut"
	c.CreateTopic(t, topic, 1, 1, map[string]string{"max.message.bytes": "4096"})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	tooLargeAfterCut := func(t *testing.T, settled bool) error {
		late := &lateReader{hold: 20 * time.Second}
		p := newLonghaul(t, c.ProxiedBootstrap(), nil,
			producer.Dialer(late.dial),
			producer.BatchSize(1024),
			producer.Linger(time.Millisecond),
		)
		warm := &producer.Record{Topic: topic, Value: []byte("warm-up")}
		warm.SetPartition(0)
		require.NoError(t, p.ProduceSync(ctx, warm).FirstErr(), "warm-up")
		require.Positive(t, c.CutAll(), "no connection to cut")
		if settled {
			settle(t, ctx, p, topic, 0)
		}
		big := &producer.Record{Topic: topic, Value: make([]byte, 8<<10)}
		big.SetPartition(0)
		err := p.ProduceSync(ctx, big).FirstErr()
		require.Error(t, err, "an 8 KiB record in a topic of max.message.bytes 4096")
		require.True(t, errors.Is(err, kerr.MessageTooLarge), "want MESSAGE_TOO_LARGE, got %v", err)
		// The produce connection's close was held until a write: the
		// emulated late reader did take part.
		assert.Positive(t, late.delayed.Load(), "no read error was held back until a write")
		return err
	}

	t.Run("without", func(t *testing.T) {
		err := tooLargeAfterCut(t, false)
		t.Logf("too-large record right after the cut: %v", err)
		assert.True(t, producer.IsFateUnknown(err), "the attempt on the cut connection is in doubt: %v", err)
	})
	t.Run("settled", func(t *testing.T) {
		err := tooLargeAfterCut(t, true)
		t.Logf("too-large record after settle: %v", err)
		assert.False(t, producer.IsFateUnknown(err), "a record the broker rejected, nothing in doubt, is certainly not written: %v", err)
	})
}
