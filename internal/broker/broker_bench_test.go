package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// BenchmarkProducePipelined measures the broker's produce path over
// loopback: one connection, 16 requests pipelined, one 10-record
// idempotent batch each. Reports batches per second.
func BenchmarkProducePipelined(b *testing.B) {
	c := startCluster(b, Config{Topics: []TopicConfig{{Name: "t", Partitions: 1, Window: 20}}})
	w := dialWire(b, c.Addr())
	const depth = 16
	reqs := make([]kmsg.Request, b.N)
	for i := range reqs {
		reqs[i] = produceReq(c, 14, "t", 0, batch(b, 1, 0, int32(i*10), 10))
	}
	b.ResetTimer()
	sent := 0
	for got := 0; got < b.N; got++ {
		for sent < b.N && sent-got < depth {
			w.send(reqs[sent])
			sent++
		}
		if sp := partResp(b, w.recv()); sp.ErrorCode != 0 {
			b.Fatalf("batch %d: code %d", got, sp.ErrorCode)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "batches/s")
}
