package producer

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/longhaul-kafka/longhaul/internal/broker"
)

// controlAfterLeaderMove produces a record to partition 0 of a two-node
// SASL cluster with a 150 ms round trip (a SASL dial takes three: 450 ms)
// and request.timeout.ms 1 s, drops every connection, creates a topic and
// produces to it: the second record needs new metadata on a newly dialed
// control connection. bootstrap.servers names node 0, which
// metadata names again. It returns the second record's error.
func controlAfterGrowth(t *testing.T, repeat bool) error {
	var err error
	synctest.Test(t, func(t *testing.T) {
		c, n := memCluster(t, broker.Config{Nodes: 2, RTT: 150 * time.Millisecond, SASL: saslPlain(time.Hour),
			Topics: []broker.TopicConfig{{Name: "t", Partitions: 1}}})
		p := memProducer(t, c, n, SASL(plain.Auth{User: "alice", Pass: "secret"}.AsMechanism()),
			DeliveryTimeout(8*time.Second), bug(t, controlAddrsRepeat, repeat))
		require.NoError(t, p.ProduceSync(context.Background(), &Record{Topic: "t", Value: []byte("v")}).FirstErr())
		c.DropConnections(0)
		c.DropConnections(1)
		require.NoError(t, c.CreateTopic(broker.TopicConfig{Name: "u", Partitions: 2}))
		err = p.ProduceSync(context.Background(), &Record{Topic: "u", Value: []byte("v")}).FirstErr()
	})
	return err
}

// TestControlDialTriesEachAddressOnce: control requests try each broker
// address once (controlAddrs), so the dial budget (request.timeout.ms) is
// shared by two addresses, not three with node 0 named twice: 500 ms each,
// enough for the 450 ms handshake, and the record to the new topic is
// written. Negative control (controlAddrsRepeat, the code before): 333
// ms each, every metadata request fails and the record times out.
func TestControlDialTriesEachAddressOnce(t *testing.T) {
	require.NoError(t, controlAfterGrowth(t, false))
	if !regressBuild {
		return // the negative control below needs -tags longhaul_regress
	}
	require.ErrorIs(t, controlAfterGrowth(t, true), ErrDeliveryTimeout, "negative control")
}
