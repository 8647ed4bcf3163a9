package producer

import (
	"bufio"
	"context"
	"encoding/binary"
	"math"
	"net"
	"strconv"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/longhaul-kafka/longhaul/internal/broker"
	"github.com/longhaul-kafka/longhaul/internal/memnet"
	"github.com/longhaul-kafka/longhaul/protocol"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// editProxy relays every request of a one-node cluster and its answer,
// pointing Metadata's brokers at itself, and lets edit change any decoded
// answer before it is relayed.
func editProxy(t *testing.T, n *memnet.Network, upstream string, edit func(kmsg.Response)) string {
	return relay(t, n, upstream, func(self string, c, up net.Conn) {
		host, port, _ := net.SplitHostPort(self)
		p, _ := strconv.Atoi(port)
		defer c.Close()
		defer up.Close()
		cr, ur := bufio.NewReader(c), bufio.NewReader(up)
		for {
			frame, err := protocol.ReadFrame(cr, nil, 0)
			if err != nil {
				return
			}
			h, req, err := protocol.ParseRequest(frame)
			if err != nil {
				return
			}
			if _, err := up.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(frame))), frame...)); err != nil {
				return
			}
			resp, err := protocol.ReadFrame(ur, nil, 0)
			if err != nil {
				return
			}
			w := append(binary.BigEndian.AppendUint32(nil, uint32(len(resp))), resp...)
			if h.Key == 0 || h.Key == 3 || h.Key == 22 {
				r, err := protocol.ParseResponse(resp, req, h.CorrelationID)
				if err != nil {
					return
				}
				if md, ok := r.(*kmsg.MetadataResponse); ok {
					for i := range md.Brokers {
						md.Brokers[i].Host, md.Brokers[i].Port = host, int32(p)
					}
				}
				edit(r)
				w = protocol.AppendResponse(nil, h.CorrelationID, r)
			}
			if _, err := c.Write(w); err != nil {
				return
			}
		}
	})
}

// TestInitProducerIDWithoutIdentityIsNotTaken: an InitProducerId answer
// without an error code but with producer id -1 (what batches without
// idempotence carry) must not become the producer's identity. Taken, it
// made every batch non-idempotent: the broker wrote a retry of a batch
// whose answer was lost a second time, and the producer reported both
// copies' records as delivered once. The answer is now refused as
// malformed and asked again.
func TestInitProducerIDWithoutIdentityIsNotTaken(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, n := memCluster(t, broker.Config{Topics: []broker.TopicConfig{{Name: "t", Partitions: 1}}})
		var bad atomic.Int32
		addr := editProxy(t, n, c.Addr(), func(r kmsg.Response) {
			if ip, ok := r.(*kmsg.InitProducerIDResponse); ok && bad.Add(1) == 1 {
				ip.ProducerID, ip.ProducerEpoch = -1, -1
			}
		})
		p := memProducer(t, c, n, BootstrapServers(addr), DeliveryTimeout(time.Minute))
		c.DropProduceResponses(0, 1) // the first batch is written, its answer lost: retried
		recs := make([]*Record, 5)
		for i := range recs {
			recs[i] = &Record{Topic: "t", Value: []byte{'v', byte('0' + i)}}
			recs[i].SetPartition(0)
		}
		require.NoError(t, p.ProduceSync(t.Context(), recs...).FirstErr())
		log := c.Records("t", 0)
		require.Len(t, log, len(recs), "each record once")
		for _, r := range log {
			require.GreaterOrEqual(t, r.ProducerID, int64(0), "written without idempotence")
		}
		require.GreaterOrEqual(t, p.Stats().ProducerID, int64(0))
		require.Greater(t, bad.Load(), int32(1), "InitProducerId asked again")
	})
}

// TestInitProducerIDSameIdentityIsNotTaken: after INVALID_PRODUCER_EPOCH
// the producer asks InitProducerId for a new identity and renumbers its
// unacknowledged batches from sequence 0 under it. An answer giving back
// the identity it already had (same id, same epoch) would have the broker
// match the renumbered batch against the one it wrote under that identity
// at sequence 0 and answer DUPLICATE_SEQUENCE_NUMBER: the records would be
// reported delivered and never be written. Such an answer is refused
// and asked again.
func TestInitProducerIDSameIdentityIsNotTaken(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, n := memCluster(t, broker.Config{Topics: []broker.TopicConfig{{Name: "t", Partitions: 1}}})
		var (
			answers  atomic.Int32
			firstID  atomic.Int64
			firstEp  atomic.Int32
			replayed atomic.Bool
		)
		addr := editProxy(t, n, c.Addr(), func(r kmsg.Response) {
			ip, ok := r.(*kmsg.InitProducerIDResponse)
			if !ok || ip.ErrorCode != 0 {
				return
			}
			if answers.Add(1) == 1 {
				firstID.Store(ip.ProducerID)
				firstEp.Store(int32(ip.ProducerEpoch))
				return
			}
			if replayed.CompareAndSwap(false, true) {
				ip.ProducerID, ip.ProducerEpoch = firstID.Load(), int16(firstEp.Load())
			}
		})
		p := memProducer(t, c, n, BootstrapServers(addr), DeliveryTimeout(time.Minute))
		batch := func(prefix byte) []*Record {
			recs := make([]*Record, 5)
			for i := range recs {
				recs[i] = &Record{Topic: "t", Value: []byte{prefix, byte('0' + i)}}
				recs[i].SetPartition(0)
			}
			return recs
		}
		require.NoError(t, p.ProduceSync(t.Context(), batch('a')...).FirstErr())
		// The next batch is refused as fenced: a new identity is asked for.
		c.InjectError("t", 0, kerr.InvalidProducerEpoch.Code, 1)
		b := batch('b')
		require.NoError(t, p.ProduceSync(t.Context(), b...).FirstErr())
		require.True(t, replayed.Load(), "the old identity was given back")
		log := c.Records("t", 0)
		require.Len(t, log, 10, "every record reported delivered is in the log")
		for i, r := range b {
			require.GreaterOrEqual(t, r.Offset, int64(0), "record %d delivered without an offset", i)
			require.Equal(t, r.Value, log[r.Offset].Value)
		}
	})
}

// TestInitProducerIDDeniedFailsAtOnce: a principal without the right to
// write idempotently gets CLUSTER_AUTHORIZATION_FAILED for InitProducerId
// (Kafka before 2.8 without IdempotentWrite on the cluster; later ones
// without Write on any topic). Retrying cannot help until the ACLs
// change, so records fail at once, as the Java producer's fatal error
// does, with an error wrapping the broker's, instead of waiting out
// delivery.timeout.ms; the producer keeps asking with backoff, so records
// produced once it has asked again after the ACL was granted go through.
func TestInitProducerIDDeniedFailsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, n := memCluster(t, broker.Config{Topics: []broker.TopicConfig{{Name: "t", Partitions: 1}}})
		var denied atomic.Bool
		denied.Store(true)
		addr := editProxy(t, n, c.Addr(), func(r kmsg.Response) {
			if ip, ok := r.(*kmsg.InitProducerIDResponse); ok && denied.Load() {
				ip.ProducerID, ip.ProducerEpoch, ip.ErrorCode = -1, -1, kerr.ClusterAuthorizationFailed.Code
			}
		})
		p := memProducer(t, c, n, BootstrapServers(addr), DeliveryTimeout(2*time.Minute))
		start := time.Now()
		err := p.ProduceSync(t.Context(), &Record{Topic: "t", Value: []byte("v")}).FirstErr()
		took := time.Since(start)
		require.ErrorIs(t, err, kerr.ClusterAuthorizationFailed)
		assert.NotErrorIs(t, err, ErrDeliveryTimeout)
		assert.False(t, IsFateUnknown(err), "never sent")
		assert.Less(t, took, 5*time.Second, "at once, not at delivery.timeout.ms (virtual time)")
		assert.Empty(t, c.Records("t", 0))

		denied.Store(false) // the ACL is granted
		// Until the next attempt (retry.backoff.max.ms) the last answer
		// stands: records fail at once, as while a TLS or SASL refusal
		// stands (ErrAuthentication).
		time.Sleep(time.Second)
		require.NoError(t, p.ProduceSync(t.Context(), &Record{Topic: "t", Value: []byte("w")}).FirstErr())
		assert.Len(t, c.Records("t", 0), 1)
	})
}

// An epoch bump at epoch 32767 asks for a new producer id instead: an
// epoch cannot go past it (KIP-360). The records after it are written
// under the new id.
func TestEpochAtMaxTakesNewProducerID(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, n := memCluster(t, broker.Config{Topics: []broker.TopicConfig{{Name: "t", Partitions: 1}}})
		p := memProducer(t, c, n)
		require.NoError(t, p.ProduceSync(context.Background(), &Record{Topic: "t", Value: []byte("a")}).FirstErr())
		oldID := p.Stats().ProducerID
		newIDs, bumps := c.InitProducerIDRequests()
		done := make(chan struct{})
		p.post(func() {
			// As if 32767 bumps had happened. The broker would answer a
			// bump of an epoch it did not hand out with a new id too, so
			// the test checks what the producer asks for.
			p.s.epoch = math.MaxInt16
			p.s.needBump = true
			close(done)
		})
		<-done
		require.NoError(t, p.ProduceSync(context.Background(), &Record{Topic: "t", Value: []byte("b")}).FirstErr())
		st := p.Stats()
		require.NotEqual(t, oldID, st.ProducerID, "a new producer id")
		require.Zero(t, st.ProducerEpoch)
		newIDs2, bumps2 := c.InitProducerIDRequests()
		require.Equal(t, newIDs+1, newIDs2, "asked for a new id")
		require.Equal(t, bumps, bumps2, "asked for no bump past 32767")
		recs := c.Records("t", 0)
		require.Equal(t, st.ProducerID, recs[len(recs)-1].ProducerID)
	})
}
