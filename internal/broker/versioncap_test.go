package broker

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// apiRanges returns the version range of every key a node offers.
func apiRanges(t *testing.T, addr string) map[int16][2]int16 {
	t.Helper()
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	resp := dialWire(t, addr).do(req).(*kmsg.ApiVersionsResponse)
	m := map[int16][2]int16{}
	for _, k := range resp.ApiKeys {
		m[k.ApiKey] = [2]int16{k.MinVersion, k.MaxVersion}
	}
	return m
}

// TestProduceMaxVersions checks Config.ProduceMaxVersions: each capped node
// offers Produce up to its cap (from v0 below v3, without InitProducerId),
// an uncapped one v3..v14; a request above the cap closes the connection.
func TestProduceMaxVersions(t *testing.T) {
	c := startCluster(t, Config{Nodes: 4, ProduceMaxVersions: map[int32]int16{1: 13, 2: 3, 3: 2},
		Topics: []TopicConfig{{Name: "t", Partitions: 4, Window: 20}}})
	addrs := c.Addrs()
	r := apiRanges(t, addrs[0])
	require.Equal(t, [2]int16{3, 14}, r[0])
	require.Contains(t, r, int16(22))
	require.Equal(t, [2]int16{3, 13}, apiRanges(t, addrs[1])[0])
	r = apiRanges(t, addrs[2])
	require.Equal(t, [2]int16{3, 3}, r[0])
	require.Contains(t, r, int16(22), "Kafka 0.11 has InitProducerId")
	r = apiRanges(t, addrs[3])
	require.Equal(t, [2]int16{0, 2}, r[0], "Kafka 0.10 offers Produce v0..v2")
	require.NotContains(t, r, int16(22), "Kafka 0.10 has no InitProducerId")

	// Above the cap: the connection closes, as Kafka does.
	w := dialWire(t, addrs[2])
	w.send(produceReq(c, 4, "t", 2, batch(t, 1, 0, 0, 1)))
	_, err := w.tryRecv()
	require.Error(t, err, "Produce v4 to a node capped at v3")
	w = dialWire(t, addrs[3])
	ip := kmsg.NewPtrInitProducerIDRequest()
	ip.Version = 0
	w.send(ip)
	_, err = w.tryRecv()
	require.Error(t, err, "InitProducerId to a Kafka 0.10 node")

	// At the cap it is served, and a v13 answer has no KIP-1269 field.
	sp := produceOne(t, c, dialWire(t, addrs[2]), 3, "t", 2, batch(t, 1, 0, 0, 1))
	require.Zero(t, sp.ErrorCode)
	sp = produceOne(t, c, dialWire(t, addrs[1]), 13, "t", 1, batch(t, 1, 0, 0, 1))
	require.Zero(t, sp.ErrorCode)
	require.Zero(t, sp.UnknownTags.Len(), "no ProducerStateBatchesToRetain below v14")

	c.mu.Lock()
	defer c.mu.Unlock()
	require.Equal(t, 20, c.effectiveWindow(c.topics["t"].parts[0]))
	require.Equal(t, 5, c.effectiveWindow(c.topics["t"].parts[1]), "Kafka 1.0 to 3.x retain 5")
	require.Equal(t, 1, c.effectiveWindow(c.topics["t"].parts[2]), "Kafka 0.11 retains the last batch")
}

// TestProduceV3NodeRetainsLastBatch checks the Kafka 0.11 dedup rule of a
// node capped at Produce v3: a retry of the last batch is a duplicate, a
// retry of the batch before it is OUT_OF_ORDER_SEQUENCE_NUMBER (a newer
// node, retaining 5, recognises both).
func TestProduceV3NodeRetainsLastBatch(t *testing.T) {
	c := startCluster(t, Config{Nodes: 2, ProduceMaxVersions: map[int32]int16{1: 3},
		Topics: []TopicConfig{{Name: "t", Partitions: 2}}})
	for node, wantOld := range map[int32]int16{0: 0, 1: kerr.OutOfOrderSequenceNumber.Code} {
		w := dialWire(t, c.Addrs()[node])
		v := int16(3)
		for seq := int32(0); seq < 3; seq++ {
			require.Zero(t, produceOne(t, c, w, v, "t", node, batch(t, 1, 0, seq, 1)).ErrorCode)
		}
		last := produceOne(t, c, w, v, "t", node, batch(t, 1, 0, 2, 1))
		require.Zero(t, last.ErrorCode, "node %d: the last batch again is a duplicate", node)
		require.EqualValues(t, 2, last.BaseOffset)
		prev := produceOne(t, c, w, v, "t", node, batch(t, 1, 0, 1, 1))
		require.Equal(t, wantOld, prev.ErrorCode, "node %d: the batch before the last again", node)
		require.Len(t, c.Records("t", node), 3, "node %d: nothing written twice", node)
	}
}

// TestProduceMaxVersionsChecked: a cap outside 0..14 or for a node that
// does not exist is a ConfigError.
func TestProduceMaxVersionsChecked(t *testing.T) {
	for _, m := range []map[int32]int16{{0: 15}, {0: -1}, {1: 3}, {-1: 3}} {
		_, err := Start(Config{ProduceMaxVersions: m})
		var ce *ConfigError
		require.ErrorAs(t, err, &ce, "%v", m)
		require.Equal(t, "ProduceMaxVersions", ce.Name)
	}
}
