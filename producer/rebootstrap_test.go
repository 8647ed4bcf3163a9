package producer

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/longhaul-kafka/longhaul/internal/broker"
	"github.com/longhaul-kafka/longhaul/internal/memnet"
)

// bootName is the bootstrap address the tests' resolver maps.
const bootName = "boot.test:9092"

// bootResolver dials bootName at whichever address the test points it to
// (a DNS name whose records change), every other address as is, and
// counts the dials to bootName.
type bootResolver struct {
	n      *memnet.Network
	mu     sync.Mutex
	target string
	dials  atomic.Int64
}

func (b *bootResolver) point(addr string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.target = addr
}

func (b *bootResolver) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	if addr == bootName {
		b.dials.Add(1)
		b.mu.Lock()
		addr = b.target
		b.mu.Unlock()
	}
	return b.n.Dial(ctx, network, addr)
}

// rebootstrapRequired makes the cluster answer the next n metadata
// requests with REBOOTSTRAP_REQUIRED (the top-level error of Metadata v13,
// KIP-1102), brokers and topics left out.
func rebootstrapRequired(c *broker.Cluster, n int) {
	var left atomic.Int64
	left.Store(int64(n))
	c.RewriteMetadata(func(r *kmsg.MetadataResponse) {
		if left.Add(-1) >= 0 {
			r.ErrorCode = kerr.RebootstrapRequired.Code
			r.Brokers, r.Topics = nil, nil
		}
	})
}

// TestRebootstrapRequired: a metadata answer with REBOOTSTRAP_REQUIRED
// makes a producer with metadata.recovery.strategy=rebootstrap (the
// default) drop its control connection and ask bootstrap.servers, its
// name resolved and dialed again, and the record that waited for the
// topic is written; a second REBOOTSTRAP_REQUIRED from the bootstrap
// servers themselves is a failed request, retried after the backoff. With
// none the answer is a failed request: the same connection is asked again
// after the backoff, the bootstrap name is not dialed again, and the
// record is written once the broker answers.
func TestRebootstrapRequired(t *testing.T) {
	for _, tc := range []struct {
		strategy string
		answers  int // REBOOTSTRAP_REQUIRED answers
		dials    int64
	}{{"rebootstrap", 1, 1}, {"rebootstrap", 2, 1}, {"none", 3, 0}} {
		t.Run(fmt.Sprintf("%s-%d", tc.strategy, tc.answers), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c, n := memCluster(t, broker.Config{Topics: []broker.TopicConfig{{Name: "a", Partitions: 1}, {Name: "b", Partitions: 1}}})
				b := &bootResolver{n: n}
				b.point(c.Addr())
				p := memProducer(t, c, n, BootstrapServers(bootName), Dialer(b.dial),
					Property("metadata.recovery.strategy", tc.strategy))
				ctx := context.Background()
				require.NoError(t, p.ProduceSync(ctx, &Record{Topic: "a", Value: []byte("1")}).FirstErr())
				before := b.dials.Load() // the control connection (Metadata and InitProducerId may dial at once)
				rebootstrapRequired(c, tc.answers)
				require.NoError(t, p.ProduceSync(ctx, &Record{Topic: "b", Value: []byte("2")}).FirstErr())
				assert.Equal(t, tc.dials, b.dials.Load()-before, "dials of the bootstrap name after the first answer")
				assert.Len(t, c.Records("b", 0), 1)
			})
		})
	}
}

// TestClusterMovesUnderProducer (KIP-899): every node of a 3-node cluster
// moves to a new address while records are produced, and the bootstrap
// name resolves to the new addresses only; the old addresses close at once
// (answers not yet written are lost, their appends kept) or, with grace,
// keep accepting and answer nothing for 2 s. The producer follows through
// bootstrap.servers and writes every record exactly once, in order, per
// partition, with metadata.recovery.strategy rebootstrap and with none.
// Nothing of the idempotent state is reset: the batches cut off are
// retried with their sequences and the broker answers them as duplicates.
func TestClusterMovesUnderProducer(t *testing.T) {
	for _, strategy := range []string{"rebootstrap", "none"} {
		for _, grace := range []time.Duration{0, 2 * time.Second} {
			t.Run(fmt.Sprintf("%s-grace%s", strategy, grace), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) { clusterMoves(t, strategy, grace) })
			})
		}
	}
}

func clusterMoves(t *testing.T, strategy string, grace time.Duration) {
	const parts, records = 6, 3000
	c, n := memCluster(t, broker.Config{Nodes: 3, RTT: 2 * time.Millisecond,
		Topics: []broker.TopicConfig{{Name: "m", Partitions: parts, Window: 20}}})
	b := &bootResolver{n: n}
	b.point(c.Addrs()[1])
	p := memProducer(t, c, n, BootstrapServers(bootName), Dialer(b.dial), DeliveryTimeout(time.Minute),
		Property("metadata.recovery.strategy", strategy), Property("metadata.recovery.rebootstrap.trigger.ms", "1000"))
	ctx := context.Background()
	var failed atomic.Int64
	for i := range records {
		if i%10 == 0 {
			time.Sleep(time.Millisecond)
		}
		if i == records/3 {
			var moved []string
			for id := range int32(3) {
				addr, err := c.MoveNode(id, broker.NodeMove{Grace: grace})
				require.NoError(t, err)
				moved = append(moved, addr)
			}
			b.point(moved[2])
		}
		r := toPartition("m", int32(i%parts), fmt.Appendf(nil, "%06d", i/parts))
		p.Produce(ctx, r, func(_ *Record, err error) {
			if err != nil {
				failed.Add(1)
				t.Errorf("record: %v", err)
			}
		})
	}
	require.NoError(t, p.Flush(ctx))
	require.Zero(t, failed.Load())
	for part := range int32(parts) {
		got := c.Records("m", part)
		require.Len(t, got, records/parts, "partition %d: every record once", part)
		for i, r := range got {
			require.Equal(t, fmt.Sprintf("%06d", i), string(r.Value), "partition %d offset %d", part, i)
		}
	}
	assert.Greater(t, b.dials.Load(), int64(1), "the bootstrap name was resolved and dialed again")
}

// TestRebootstrapTrigger: every node moves and its old address keeps
// accepting connections that never answer (a broker host gone dark), and
// the new brokers answer only after 400 ms. Control requests share
// request.timeout.ms (1 s) among the three known addresses and the
// bootstrap name, 250 ms each, too little for the bootstrap's handshake,
// so they fail; once they have failed for
// metadata.recovery.rebootstrap.trigger.ms (2 s) the known brokers are left
// out, the bootstrap name gets the whole second, and the record is
// written. With none the producer never gets there: the record fails at
// delivery.timeout.ms.
func TestRebootstrapTrigger(t *testing.T) {
	for _, strategy := range []string{"rebootstrap", "none"} {
		t.Run(strategy, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c, n := memCluster(t, broker.Config{Nodes: 3, Topics: []broker.TopicConfig{{Name: "m", Partitions: 3}}})
				b := &bootResolver{n: n}
				b.point(c.Addrs()[0])
				p := memProducer(t, c, n, BootstrapServers(bootName), Dialer(b.dial), RequestTimeout(time.Second),
					DeliveryTimeout(20*time.Second), Property("metadata.recovery.strategy", strategy),
					Property("metadata.recovery.rebootstrap.trigger.ms", "2000"))
				ctx := context.Background()
				require.NoError(t, p.ProduceSync(ctx, toPartition("m", 0, []byte("before"))).FirstErr())
				var moved []string
				for id := range int32(3) {
					c.SetRTT(id, 400*time.Millisecond)
					addr, err := c.MoveNode(id, broker.NodeMove{Grace: time.Hour})
					require.NoError(t, err)
					moved = append(moved, addr)
				}
				b.point(moved[0])
				err := p.ProduceSync(ctx, toPartition("m", 0, []byte("after"))).FirstErr()
				if strategy == "none" {
					require.ErrorIs(t, err, ErrDeliveryTimeout, "negative control: without rebootstrap the bootstrap name never gets the time it needs")
					return
				}
				require.NoError(t, err)
				assert.Len(t, c.Records("m", 0), 2)
			})
		})
	}
}
