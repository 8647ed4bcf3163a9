package broker

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/longhaul-kafka/longhaul/protocol"
)

// valuesBatch builds a batch of pid (seq onward) whose records carry the
// given values; pid -1 builds a non-idempotent batch.
func valuesBatch(t testing.TB, pid int64, seq int32, values ...string) []byte {
	t.Helper()
	var bb protocol.BatchBuilder
	for i, v := range values {
		bb.Append(1700000000000+int64(i), nil, []byte(v), nil)
	}
	h := protocol.BatchHeader{ProducerID: pid, ProducerEpoch: 0, BaseSequence: seq}
	if pid < 0 {
		h.ProducerEpoch, h.BaseSequence = -1, -1
	}
	b, err := bb.Build(nil, h)
	require.NoError(t, err)
	return b
}

// TestLogKeepsPipelinedBatches: the log stores appended batches in the
// request frame they came in, so the connection must read every later
// request into a fresh buffer. Requests of the same size (each would land
// exactly on the previous one in a reused buffer) are pipelined on one
// connection, with a duplicate, an out-of-order batch and a
// non-idempotent batch among them; the log must hold every appended
// record's own value, and Records, Fetch and DeleteTopic must agree.
func TestLogKeepsPipelinedBatches(t *testing.T) {
	c := startCluster(t, Config{Topics: []TopicConfig{{Name: "t", Partitions: 1, Window: 20}}})
	w := dialWire(t, c.Addr())
	want := pipelineBatches(t, c, w)
	got := c.Records("t", 0)
	require.Len(t, got, len(want))
	for i, r := range got {
		assert.Equal(t, int64(i), r.Offset)
		assert.Equal(t, want[i], string(r.Value), "record %d", i)
	}
	assert.Equal(t, int32(3*14+2), got[3*14+2].Sequence, "batch 14's last record")
	assert.Equal(t, int32(-1), got[3*15].Sequence, "the batch without producer id")
	assert.Equal(t, int64(-1), got[3*15].ProducerID)
	assert.Equal(t, int32(3*15), got[3*15+3].Sequence, "batch 15's first record")

	// Fetch serves the same bytes.
	f := kmsg.NewPtrFetchRequest()
	f.Version = 12
	f.MaxBytes = 1 << 20
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = "t"
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.PartitionMaxBytes = 1 << 20
	ft.Partitions = append(ft.Partitions, fp)
	f.Topics = append(f.Topics, ft)
	fr := w.do(f).(*kmsg.FetchResponse)
	raw := fr.Topics[0].Partitions[0].RecordBatches
	var fetched []string
	batches, err := protocol.SplitBatches(raw)
	require.NoError(t, err)
	for _, b := range batches {
		_, recs, err := protocol.ParseRecordBatch(b, 0)
		require.NoError(t, err)
		for _, r := range recs {
			fetched = append(fetched, string(r.Value))
		}
	}
	assert.Equal(t, want, fetched)

	logs, err := c.DeleteTopic("t")
	require.NoError(t, err)
	require.Len(t, logs, 1)
	assert.Equal(t, got, logs[0])
}

// pipelineBatches pipelines TestLogKeepsPipelinedBatches's requests on w,
// checks their answers and returns the values the log must hold.
func pipelineBatches(t *testing.T, c *Cluster, w *wireClient) []string {
	var want []string
	vals := func(n int) []string {
		var out []string
		for range n {
			out = append(out, fmt.Sprintf("value-%04d", len(want)+len(out)))
		}
		return out
	}
	const n = 20
	codes := make([]int16, 0, n+3)
	for i := range n {
		v := vals(3)
		w.send(produceReq(c, 14, "t", 0, valuesBatch(t, 1, int32(3*i), v...)))
		want = append(want, v...)
		codes = append(codes, 0)
		switch i {
		case 5: // a retry of batch 5: answered, not appended
			w.send(produceReq(c, 14, "t", 0, valuesBatch(t, 1, int32(3*i), v...)))
			codes = append(codes, 0)
		case 9: // a gap: refused
			w.send(produceReq(c, 14, "t", 0, valuesBatch(t, 1, int32(3*i+100), "gap-x-0000", "gap-x-0001", "gap-x-0002")))
			codes = append(codes, 45) // OUT_OF_ORDER_SEQUENCE_NUMBER
		case 14: // no producer id: appended too
			nv := vals(3)
			w.send(produceReq(c, 14, "t", 0, valuesBatch(t, -1, 0, nv...)))
			want = append(want, nv...)
			codes = append(codes, 0)
		}
	}
	for i, code := range codes {
		sp := partResp(t, w.recv())
		require.Equal(t, code, sp.ErrorCode, "response %d", i)
	}
	return want
}

// TestLogKeepsPipelinedBatchesNegativeControl: with the connection reading
// each request into the buffer a handler kept (Config.reuseKeptFrames),
// the same pipelined requests leave a log whose stored batches later
// requests overwrote: the check of TestLogKeepsPipelinedBatches (every
// record's own value) fails, though every batch was appended.
func TestLogKeepsPipelinedBatchesNegativeControl(t *testing.T) {
	c := startCluster(t, Config{Topics: []TopicConfig{{Name: "t", Partitions: 1, Window: 20}}, reuseKeptFrames: true})
	want := pipelineBatches(t, c, dialWire(t, c.Addr()))
	got := c.Records("t", 0)
	require.Len(t, got, len(want), "every batch appended")
	var values []string
	for _, r := range got {
		values = append(values, string(r.Value))
	}
	require.NotEqual(t, want, values)
	require.Equal(t, want[len(want)-3:], values[len(values)-3:], "the last batch, which no later request overwrote, is intact")
}

// TestOnProduceSeesEveryRequest: Config.OnProduce sees each Produce
// request a node reads, with its node id and every partition's records in
// request order, before any check: a batch for a partition the topic does
// not have and a request with bad acks are seen too, and the hook sees
// bytes equal to those sent (it must copy what it keeps).
func TestOnProduceSeesEveryRequest(t *testing.T) {
	type seen struct {
		node    int32
		records []string
	}
	var got []seen // written under the cluster lock, read after the answers
	c := startCluster(t, Config{Nodes: 2, Topics: []TopicConfig{{Name: "t", Partitions: 2}},
		OnProduce: func(node int32, records [][]byte) {
			s := seen{node: node}
			for _, r := range records {
				s.records = append(s.records, string(r))
			}
			got = append(got, s)
		}})
	a, b, x := valuesBatch(t, 1, 0, "a"), valuesBatch(t, 2, 0, "b"), valuesBatch(t, 3, 0, "x")
	two := produceReq(c, 14, "t", 0, a)
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = 7, b // no such partition: refused
	two.Topics[0].Partitions = append(two.Topics[0].Partitions, rp)
	badAcks := produceReq(c, 14, "t", 0, x)
	badAcks.Acks = 2

	w0 := dialWire(t, c.Addr())
	r := w0.do(two).(*kmsg.ProduceResponse)
	require.Equal(t, int16(3), r.Topics[0].Partitions[1].ErrorCode, "UNKNOWN_TOPIC_OR_PARTITION")
	require.Equal(t, int16(21), partResp(t, w0.do(badAcks)).ErrorCode, "INVALID_REQUIRED_ACKS")
	w1 := dialWire(t, c.Addrs()[1])
	require.Equal(t, int16(6), partResp(t, w1.do(produceReq(c, 14, "t", 0, x))).ErrorCode, "NOT_LEADER_OR_FOLLOWER: node 1 leads partition 1")

	c.mu.Lock()
	defer c.mu.Unlock()
	require.Equal(t, []seen{{0, []string{string(a), string(b)}}, {0, []string{string(x)}}, {1, []string{string(x)}}}, got)
}

// TestFetchWakesOnAppend: a Fetch waiting for data is answered by the
// next append, not by its MaxWait (an hour here: without the wake-up the
// read gives up after 10 s and the test fails).
func TestFetchWakesOnAppend(t *testing.T) {
	setFetchWait(t, time.Hour)
	c := startCluster(t, Config{Topics: []TopicConfig{{Name: "t", Partitions: 1}}})
	fw := dialWire(t, c.Addr())
	for round := range 3 { // the wake-up channel is made again after each append
		f := kmsg.NewPtrFetchRequest()
		f.Version = 12
		f.MaxWaitMillis = int32(time.Hour / time.Millisecond)
		f.MinBytes = 1
		f.MaxBytes = 1 << 20
		ft := kmsg.NewFetchRequestTopic()
		ft.Topic = "t"
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.FetchOffset = int64(round)
		fp.PartitionMaxBytes = 1 << 20
		ft.Partitions = append(ft.Partitions, fp)
		f.Topics = append(f.Topics, ft)
		fw.send(f)
		// Wait until the Fetch is parked (it made the channel).
		require.Eventually(t, func() bool {
			c.mu.Lock()
			defer c.mu.Unlock()
			return c.dataCh != nil
		}, 10*time.Second, time.Millisecond)
		pw := dialWire(t, c.Addr())
		sp := produceOne(t, c, pw, 14, "t", 0, valuesBatch(t, 1, int32(round), fmt.Sprint("r", round)))
		require.Zero(t, sp.ErrorCode)
		fr := fw.recv().(*kmsg.FetchResponse)
		assert.Equal(t, int64(round+1), fr.Topics[0].Partitions[0].HighWatermark, "round %d", round)
	}
}

// TestInflightPerProducer: batches in flight are counted per producer id
// (MaxInFlight is the most of one id), and every count is released once
// its response is written.
func TestInflightPerProducer(t *testing.T) {
	const rtt = 100 * time.Millisecond
	c := startCluster(t, Config{RTT: rtt, Topics: []TopicConfig{{Name: "t", Partitions: 1, Window: 20}}})
	w := dialWire(t, c.Addr())
	// pid 1: 4 batches, pid 2: 7 batches, interleaved, all in flight at
	// once (the responses wait out the RTT).
	seq := map[int64]int32{}
	order := []int64{1, 2, 2, 1, 2, 2, 1, 2, 1, 2, 2}
	for _, pid := range order {
		w.send(produceReq(c, 14, "t", 0, batch(t, pid, 0, seq[pid], 1)))
		seq[pid]++
	}
	for range order {
		require.Zero(t, partResp(t, w.recv()).ErrorCode)
	}
	assert.Equal(t, 7, c.PartitionStats("t", 0).MaxInFlight)
	c.mu.Lock()
	left := len(c.topics["t"].parts[0].inflight)
	c.mu.Unlock()
	assert.Zero(t, left, "counts left after every response was written")
	// ResetStats keeps nothing in flight now.
	c.ResetStats()
	assert.Zero(t, c.PartitionStats("t", 0).MaxInFlight)
}
