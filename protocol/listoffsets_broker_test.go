package protocol_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/longhaul-kafka/longhaul/internal/broker"
	"github.com/longhaul-kafka/longhaul/internal/testkit"
	"github.com/longhaul-kafka/longhaul/protocol"
)

// TestSendLatestOffsets: a ListOffsets queued before a Produce request on
// the same connection is answered with the latest offset before the batch
// (it goes on the wire first, and the broker handles one connection's
// requests in order); the answers are aligned with the queries, a
// partition the answer leaves out is not Answered, an error code comes
// with offset -1, done runs once; a connection without ListOffsets v4 is
// ErrUnsupportedVersion.
func TestSendLatestOffsets(t *testing.T) {
	cl := testkit.StartCluster(t, broker.Config{Topics: []broker.TopicConfig{{Name: "a", Partitions: 2}, {Name: "b", Partitions: 1}}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := protocol.Dial(ctx, cl.Addr(), protocol.DialConfig{})
	require.NoError(t, err)
	defer c.Close()
	md, err := protocol.Metadata(ctx, c, []string{"a"})
	require.NoError(t, err)
	pid, epoch, _, err := protocol.InitProducerID(ctx, c, -1, -1, 0)
	require.NoError(t, err)
	var bb protocol.BatchBuilder
	bb.Append(1, nil, []byte("v"), nil)
	bb.Append(1, nil, []byte("w"), nil)
	raw, err := bb.Build(nil, protocol.BatchHeader{ProducerID: pid, ProducerEpoch: epoch})
	require.NoError(t, err)

	type result struct {
		a   []protocol.OffsetAnswer
		err error
	}
	ask := func(qs []protocol.OffsetQuery) chan result {
		ch := make(chan result, 2)
		protocol.SendLatestOffsets(c, qs, 10*time.Second, func(a []protocol.OffsetAnswer, err error) { ch <- result{a, err} })
		return ch
	}
	qs := []protocol.OffsetQuery{{Topic: "a", Partition: 1, LeaderEpoch: -1}, {Topic: "b", Partition: 0, LeaderEpoch: -1}, {Topic: "a", Partition: 0, LeaderEpoch: -1}}
	before := ask(qs)
	req := &protocol.ProduceRequest{Acks: -1, Timeout: 10 * time.Second}
	req.Add("a", md.Topics["a"].ID, 0, raw)
	var res protocol.ProduceResult
	produced := make(chan error, 1)
	c.Produce(req, &res, 10*time.Second, func(err error) { produced <- err })
	after := ask(qs[2:])
	r := <-before
	require.NoError(t, r.err)
	require.Equal(t, []protocol.OffsetAnswer{{Answered: true, Offset: 0}, {Answered: true, Offset: 0}, {Answered: true, Offset: 0}}, r.a, "queued before the batch")
	require.NoError(t, <-produced)
	r = <-after
	require.NoError(t, r.err)
	require.Equal(t, []protocol.OffsetAnswer{{Answered: true, Offset: 2}}, r.a, "queued after it")

	cl.RewriteListOffsets(func(_ int32, resp *kmsg.ListOffsetsResponse) {
		for i := range resp.Topics {
			if resp.Topics[i].Topic == "b" {
				resp.Topics[i].Partitions = nil
			} else {
				resp.Topics[i].Partitions[0].ErrorCode = kerr.FencedLeaderEpoch.Code
			}
		}
	})
	r = <-ask(qs[:2])
	require.NoError(t, r.err)
	require.Equal(t, []protocol.OffsetAnswer{{Answered: true, ErrorCode: kerr.FencedLeaderEpoch.Code, Offset: -1}, {Offset: -1}}, r.a)
	select {
	case <-before:
		t.Fatal("done ran twice")
	default:
	}

	old, err := protocol.Dial(ctx, cl.Addr(), protocol.DialConfig{MaxVersions: map[int16]int16{2: 3}})
	require.NoError(t, err)
	defer old.Close()
	ch := make(chan error, 1)
	protocol.SendLatestOffsets(old, qs, time.Second, func(_ []protocol.OffsetAnswer, err error) { ch <- err })
	require.True(t, errors.Is(<-ch, protocol.ErrUnsupportedVersion))
}
