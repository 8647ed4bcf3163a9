package otlp

import (
	"bytes"
	"encoding/hex"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func samplePayload() Payload {
	return Payload{
		Resource: []Attr{{"service.name", "orders"}, {"empty", ""}},
		Scope:    "longhaul", ScopeVersion: "1.2.3",
		Metrics: []Metric{
			{Name: "org.apache.kafka.producer.record.queue.time.avg", Unit: "ms", Kind: Gauge,
				Points: []Point{{Time: 2e18, IsDouble: true, Double: 12.5}}},
			{Name: "org.apache.kafka.producer.node.request.latency.max", Kind: Gauge,
				Points: []Point{{Time: 2e18, Int: -3, Attrs: []Attr{{"node_id", "1"}}}, {Time: 2e18, Int: 7, Attrs: []Attr{{"node_id", "2"}}}}},
			{Name: "org.apache.kafka.producer.record.send.total", Description: "records", Kind: Sum, Monotonic: true, Delta: true,
				Points: []Point{{Start: 1e18, Time: 2e18, Int: 42}}},
			{Name: "up.down", Kind: Sum, Points: []Point{{Start: 1, Time: 2, Int: 1}}},
		},
	}
}

// TestRoundTrip: what Encode writes, Decode reads back, every field.
func TestRoundTrip(t *testing.T) {
	p := samplePayload()
	got, err := Decode(Encode(p))
	require.NoError(t, err)
	assert.Equal(t, p, got)
}

// TestWireBytes pins the encoding of one gauge point against the protobuf
// wire format as opentelemetry-proto numbers its fields (checked against
// Kafka's own parser by the Kafka 4.4 test of client metrics push).
func TestWireBytes(t *testing.T) {
	b := Encode(Payload{Metrics: []Metric{{Name: "m", Kind: Gauge, Points: []Point{{Time: 1, Int: 2}}}}})
	// data_points: three fixed64 fields of 9 bytes (27, 0x1b); gauge: its
	// key, length and those (29, 0x1d); metric: name (3) and gauge (31):
	// 34 (0x22); scope_metrics: an empty scope (2) and the metric (36):
	// 38 (0x26); resource_metrics: an empty resource (2) and those (40):
	// 42 (0x2a).
	want := "0a2a" + "0a00" + "1226" + "0a00" + "1222" + "0a016d" + "2a1d" + "0a1b" +
		"110000000000000000" + // start_time_unix_nano, field 2, fixed64 0
		"190100000000000000" + // time_unix_nano, field 3, fixed64 1
		"310200000000000000" // as_int, field 6, sfixed64 2
	assert.Equal(t, want, hex.EncodeToString(b))
}

// TestDecodeSkipsUnknown: fields Decode does not know (here a varint
// field 15 at the top and in a metric, and an exemplar) are skipped.
func TestDecodeSkipsUnknown(t *testing.T) {
	b := Encode(samplePayload())
	b = append(b, 15<<3|wVarint, 1)
	got, err := Decode(b)
	require.NoError(t, err)
	assert.Len(t, got.Metrics, 4)
}

// TestDecodeRefusesMalformed: truncations and bad lengths are errors
// wrapping ErrMalformed, never a panic.
func TestDecodeRefusesMalformed(t *testing.T) {
	b := Encode(samplePayload())
	for _, bad := range [][]byte{b[:len(b)-1], b[:3], {0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f}, {0x00}, {0x0b}, {0x0a, 0x02, 0x0a}} {
		_, err := Decode(bad)
		assert.True(t, errors.Is(err, ErrMalformed), "%x: %v", bad, err)
	}
}

// FuzzDecode: Decode never panics, and what it reads encodes to bytes
// that decode to the same payload.
func FuzzDecode(f *testing.F) {
	f.Add(Encode(samplePayload()))
	f.Add(Encode(Payload{}))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := Decode(b)
		if err != nil {
			return
		}
		again, err := Decode(Encode(p))
		if err != nil {
			t.Fatalf("re-encoded payload does not decode: %v", err)
		}
		if !bytes.Equal(Encode(again), Encode(p)) {
			t.Fatalf("decode(encode(p)) != p")
		}
	})
}
