package soak

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/longhaul-kafka/longhaul/protocol"
)

// The producer trusts four decoders: ProduceResponse with its v14 tag
// (protocol.FuzzProduceResponse), record batches (protocol.
// FuzzParseRecordBatch), and the control responses Metadata, InitProducerId
// and ApiVersions, fuzzed here through the same protocol.ParseResponse the
// producer's connections use.

// controlKeys are the response kinds fuzzed here, picked by the first byte.
var controlKeys = []int16{3, 22, 18} // Metadata, InitProducerId, ApiVersions

func controlSeeds() [][]byte {
	var out [][]byte
	md := kmsg.NewPtrMetadataResponse()
	b := kmsg.NewMetadataResponseBroker()
	b.NodeID, b.Host, b.Port = 1, "127.0.0.1", 9092
	md.Brokers = append(md.Brokers, b)
	tp := kmsg.NewMetadataResponseTopic()
	name := "t"
	tp.Topic = &name
	pp := kmsg.NewMetadataResponseTopicPartition()
	pp.Leader, pp.LeaderEpoch = 1, 3
	tp.Partitions = append(tp.Partitions, pp)
	md.Topics = append(md.Topics, tp)
	ip := kmsg.NewPtrInitProducerIDResponse()
	ip.ProducerID, ip.ProducerEpoch = 1000, 2
	av := kmsg.NewPtrApiVersionsResponse()
	k := kmsg.NewApiVersionsResponseApiKey()
	k.ApiKey, k.MaxVersion = 0, 14
	av.ApiKeys = append(av.ApiKeys, k)
	for i, r := range []kmsg.Response{md, ip, av} {
		max := r.MaxVersion()
		for _, v := range []int16{0, max / 2, max} {
			r.SetVersion(v)
			frame := protocol.AppendResponse(nil, 7, r)[4:]
			out = append(out, append([]byte{byte(i), byte(v)}, frame...))
		}
	}
	return out
}

// FuzzControlResponse decodes arbitrary bytes as a Metadata, InitProducerId
// or ApiVersions response frame (first byte picks the key, second the
// version): never a panic, and anything accepted re-encodes to a frame that
// decodes to the same bytes again.
func FuzzControlResponse(f *testing.F) {
	for _, s := range controlSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 2 {
			return
		}
		key := controlKeys[int(data[0])%len(controlKeys)]
		req := kmsg.RequestForKey(key)
		v := int16(data[1]) % (req.MaxVersion() + 1)
		req.SetVersion(v)
		frame := data[2:]
		corr := int32(7)
		if len(frame) >= 4 {
			corr = int32(binary.BigEndian.Uint32(frame))
		}
		resp, err := protocol.ParseResponse(frame, req, corr)
		if err != nil {
			return
		}
		if md, ok := resp.(*kmsg.MetadataResponse); ok {
			// What protocol.Metadata reads: must not panic on nil names.
			for _, tp := range md.Topics {
				_ = tp.Topic != nil && *tp.Topic == ""
				for _, p := range tp.Partitions {
					_ = p.Leader + p.LeaderEpoch
				}
			}
		}
		once := protocol.AppendResponse(nil, corr, resp)
		back, err := protocol.ParseResponse(once[4:], req, corr)
		if err != nil {
			t.Fatalf("key %d v%d: our re-encoding does not decode: %v", key, v, err)
		}
		if twice := protocol.AppendResponse(nil, corr, back); !bytes.Equal(once, twice) {
			t.Fatalf("key %d v%d: not stable across a round trip", key, v)
		}
	})
}
