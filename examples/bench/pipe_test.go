package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/longhaul-kafka/longhaul/producer"
)

// TestPipeTrace checks the --shape pipeline figures on virtual time: the
// in-flight integral, response times per acknowledged attempt, wire bytes,
// the sum of the partitions' windows, and that rejected or unknown attempts
// add no response.
func TestPipeTrace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := newPipeTrace()
		b := func(part, seq int32, attempt, window int) producer.BatchInfo {
			return producer.BatchInfo{Topic: "t", Partition: part, BaseSequence: seq, Attempt: attempt, Window: window, Bytes: 16000}
		}
		start, _ := tr.snapshot()
		tr.OnBatchSent(b(0, 0, 1, 5))
		tr.OnBatchSent(b(1, 0, 1, 5))
		time.Sleep(50 * time.Millisecond)
		tr.OnBatchAcked(b(0, 0, 1, 50), 0)
		tr.OnBatchSent(b(0, 15, 1, 50)) // partition 0 learned 50
		time.Sleep(50 * time.Millisecond)
		tr.OnBatchRejected(b(1, 0, 1, 5), errors.New("x"), true)
		tr.OnBatchAcked(b(1, 99, 1, 5), 0) // never sent: ignored
		time.Sleep(100 * time.Millisecond)
		tr.OnBatchAcked(b(0, 15, 1, 50), 0)
		end, resp := tr.snapshot()

		// 2 in flight for 50 ms, 2 for 50 ms, 1 for 100 ms, over 200 ms.
		w := pipeBetween(start, end, resp)
		assert.InDelta(t, 0.3/0.2, w.inFlight, 1e-9)
		assert.True(t, w.measured)
		assert.Equal(t, 55, w.limit)
		assert.Equal(t, []time.Duration{50 * time.Millisecond, 150 * time.Millisecond}, w.resp)
		assert.InDelta(t, 2/0.2, w.batchesPerSec, 1e-9)
		assert.InDelta(t, 32000/0.2, w.bytesPerSec, 1e-9)
		assert.Equal(t, 100*time.Millisecond, w.meanResp())
		assert.Equal(t, 50*time.Millisecond, w.respQuantile(0.5))
		assert.Equal(t, 150*time.Millisecond, w.respQuantile(0.99))

		// A window counts only its own responses.
		mid, _ := tr.snapshot()
		tr.OnBatchSent(b(0, 30, 1, 50))
		time.Sleep(10 * time.Millisecond)
		tr.OnBatchAcked(b(0, 30, 1, 50), 0)
		end2, resp2 := tr.snapshot()
		w2 := pipeBetween(mid, end2, resp2)
		assert.Equal(t, []time.Duration{10 * time.Millisecond}, w2.resp)
		assert.InDelta(t, 1.0, w2.inFlight, 1e-9)
	})
}

// TestKgoPipeLittle checks kgo's figures: produce requests only, the
// RecordBatch header added to its batch bytes, and in flight estimated as
// batches/s x mean response time.
func TestKgoPipeLittle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := new(kgoPipe)
		start, _ := p.snapshot()
		p.OnBrokerE2E(kgoBroker, 0, kgoE2E(10*time.Millisecond, 40*time.Millisecond))
		p.OnBrokerE2E(kgoBroker, 3, kgoE2E(0, 500*time.Millisecond)) // metadata: not a produce
		p.OnProduceBatchWritten(kgoBroker, "t", 0, kgoBatch(16000-batchOverhead))
		p.OnProduceBatchWritten(kgoBroker, "t", 1, kgoBatch(16000-batchOverhead))
		time.Sleep(time.Second)
		end, resp := p.snapshot()
		w := pipeBetween(start, end, resp)
		require.Len(t, w.resp, 1)
		assert.Equal(t, 50*time.Millisecond, w.resp[0])
		assert.InDelta(t, 32000, w.bytesPerSec, 1e-9)
		assert.False(t, w.measured)
		assert.InDelta(t, 2*0.05, w.inFlight, 1e-9)
	})
}

var kgoBroker = kgo.BrokerMetadata{NodeID: 1}

func kgoE2E(write, wait time.Duration) kgo.BrokerE2E {
	return kgo.BrokerE2E{TimeToWrite: write, ReadWait: wait}
}

func kgoBatch(bytes int) kgo.ProduceBatchMetrics {
	return kgo.ProduceBatchMetrics{NumRecords: 1, UncompressedBytes: bytes, CompressedBytes: bytes}
}

// TestFreeList checks the record free list: put keeps at most max, take
// hands over at most freeBatch at a time and removes them, drop empties it.
func TestFreeList(t *testing.T) {
	f := newFreeList[int](freeBatch + 10)
	for i := range freeBatch + 20 {
		f.put(i)
	}
	got := f.take(nil)
	require.Len(t, got, freeBatch)
	assert.Equal(t, 10, got[0], "the most recently kept freeBatch; the 10 over max were not kept")
	assert.Equal(t, freeBatch+9, got[freeBatch-1])
	got = f.take(got)
	assert.Equal(t, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, got, "the rest, into the same slice")
	assert.Empty(t, f.take(got))
	f.put(1)
	f.drop()
	assert.Empty(t, f.take(nil))
}

// TestPrintPipe checks the pipeline table's row: in flight against the
// window, the response's excess over the RTT, the proxy's lateness per
// chunk, batch fill and wire bytes against the bound; a case without a
// trace (java) has no row.
func TestPrintPipe(t *testing.T) {
	byName := map[string]clientKind{}
	for _, k := range allClients {
		byName[k.name] = k
	}
	lh := result{rtt: 50 * time.Millisecond, partitions: 1, batch: 16384, client: byName["lh-w50"], round: 2, window: 50,
		boundMBps: 16.384, proxyChunks: 4, proxyLate: 2 * time.Millisecond, proxyInWrite: 400 * time.Microsecond,
		pipe: pipeWindow{resp: []time.Duration{51 * time.Millisecond, 53 * time.Millisecond}, batchesPerSec: 1000,
			bytesPerSec: 1000 * 15556, inFlight: 50, measured: true, limit: 50}}
	java := result{rtt: 50 * time.Millisecond, partitions: 1, batch: 16384, client: byName["java"], round: 2}
	var out bytes.Buffer
	printPipe(&out, []result{lh, java})
	var rows []string
	for _, line := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(line, "| 50ms") {
			rows = append(rows, line)
		}
	}
	require.Len(t, rows, 1, out.String())
	f := strings.Split(rows[0], "|")
	assert.Equal(t, "lh-w50 #2", strings.TrimSpace(f[4]))
	assert.Equal(t, "50.0", strings.TrimSpace(f[5]))
	assert.Equal(t, "100% of 50", strings.TrimSpace(f[6]))
	assert.Equal(t, "51.00ms / 53.00ms / 52.00ms", strings.TrimSpace(f[7]))
	assert.Equal(t, "2.00ms", strings.TrimSpace(f[8]), "mean response minus the RTT")
	assert.Equal(t, "0.50ms / 0.10ms", strings.TrimSpace(f[9]), "proxy lateness and write time per chunk")
	assert.Equal(t, "15556 (94.9%)", strings.TrimSpace(f[10]))
	assert.Equal(t, "15.6", strings.TrimSpace(f[11]))
	assert.Equal(t, "94.9%", strings.TrimSpace(f[12]), "wire bytes against the 16.384 MB/s bound")
}
