package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/longhaul-kafka/longhaul/producer"
)

// batchOverhead is a RecordBatch's header (v2): kgo's batch metrics count
// only the records, longhaul's the whole batch.
const batchOverhead = 61

// pipeTrace records, for --shape, how full a client kept the pipe: each
// produce attempt's response time (handed to the connection to
// acknowledged), the bytes of the batches acknowledged and, for longhaul,
// the batches in flight over time. Longhaul reports into it from its hooks
// (on its sender goroutine), kgo from its hooks (on its connection
// goroutines); the measuring goroutine takes snapshots, so every field is
// under mu. It costs a map entry per batch in flight and a slice element per
// response, only with --shape.
type pipeTrace struct {
	mu sync.Mutex
	// sent is when each attempt in flight was handed to its connection.
	sent map[attemptKey]time.Time
	// resp is every response time so far, in order (µs); a window's are
	// resp[start.responses:end.responses].
	resp []int32
	// ackedBytes and acked count acknowledged batches and their bytes on
	// the wire (RecordBatch header included).
	ackedBytes, acked int64
	// inFlight is the number of batches in flight now; inFlightSecs its
	// integral over time (batch-seconds), up to last.
	inFlight     int
	inFlightSecs float64
	last         time.Time
	// limits is each partition's in-flight limit as last seen; limitSum
	// their sum, the most the client may have in flight.
	limits   map[partKey]int
	limitSum int
}

type partKey struct {
	topic     string
	partition int32
}

type attemptKey struct {
	partKey
	seq     int32
	attempt int
}

func newPipeTrace() *pipeTrace {
	return &pipeTrace{sent: map[attemptKey]time.Time{}, limits: map[partKey]int{}, last: time.Now()}
}

// pipeSnap is a pipeTrace reading; a window is end minus start.
type pipeSnap struct {
	at           time.Time
	responses    int
	ackedBytes   int64
	acked        int64
	inFlightSecs float64
	limitSum     int
}

// advance adds the in-flight count since the last event to the integral;
// the caller holds mu.
func (t *pipeTrace) advance(now time.Time) {
	t.inFlightSecs += float64(t.inFlight) * now.Sub(t.last).Seconds()
	t.last = now
}

// snapshot reads the trace; the slice holds every response time so far
// (its elements are never changed once appended).
func (t *pipeTrace) snapshot() (pipeSnap, []int32) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := time.Now()
	t.advance(now)
	return pipeSnap{at: now, responses: len(t.resp), ackedBytes: t.ackedBytes, acked: t.acked, inFlightSecs: t.inFlightSecs, limitSum: t.limitSum}, t.resp
}

// OnBatchSent implements producer.HookBatchSent.
func (t *pipeTrace) OnBatchSent(b producer.BatchInfo) {
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	t.advance(now)
	t.inFlight++
	pk := partKey{b.Topic, b.Partition}
	t.sent[attemptKey{pk, b.BaseSequence, b.Attempt}] = now
	if old := t.limits[pk]; old != b.Window {
		t.limitSum += b.Window - old
		t.limits[pk] = b.Window
	}
}

// OnBatchAcked implements producer.HookBatchAcked.
func (t *pipeTrace) OnBatchAcked(b producer.BatchInfo, _ int64) {
	t.done(b, true)
}

// OnBatchRejected implements producer.HookBatchRejected.
func (t *pipeTrace) OnBatchRejected(b producer.BatchInfo, _ error, _ bool) {
	t.done(b, false)
}

func (t *pipeTrace) done(b producer.BatchInfo, acked bool) {
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	k := attemptKey{partKey{b.Topic, b.Partition}, b.BaseSequence, b.Attempt}
	at, ok := t.sent[k]
	if !ok {
		return
	}
	delete(t.sent, k)
	t.advance(now)
	t.inFlight--
	if acked {
		t.resp = append(t.resp, int32(min(now.Sub(at).Microseconds(), math.MaxInt32)))
		t.acked++
		t.ackedBytes += int64(b.Bytes)
	}
}

// kgoPipe is pipeTrace's counterpart for kgo: response time per produce
// request (from the start of its write to the end of reading its response,
// kgo's BrokerE2E) and the batches written. kgo has no per-batch sent
// event, so its batches in flight are estimated by Little's law.
type kgoPipe struct {
	mu         sync.Mutex
	resp       []int32
	ackedBytes int64
	acked      int64
}

// OnBrokerE2E implements kgo.HookBrokerE2E.
func (p *kgoPipe) OnBrokerE2E(_ kgo.BrokerMetadata, key int16, e kgo.BrokerE2E) {
	if key != 0 || e.WriteErr != nil || e.ReadErr != nil {
		return
	}
	d := e.TimeToWrite + e.ReadWait + e.TimeToRead
	p.mu.Lock()
	p.resp = append(p.resp, int32(min(d.Microseconds(), math.MaxInt32)))
	p.mu.Unlock()
}

// OnProduceBatchWritten implements kgo.HookProduceBatchWritten.
func (p *kgoPipe) OnProduceBatchWritten(_ kgo.BrokerMetadata, _ string, _ int32, m kgo.ProduceBatchMetrics) {
	p.mu.Lock()
	p.acked++
	p.ackedBytes += int64(m.CompressedBytes + batchOverhead)
	p.mu.Unlock()
}

func (p *kgoPipe) snapshot() (pipeSnap, []int32) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return pipeSnap{at: time.Now(), responses: len(p.resp), ackedBytes: p.ackedBytes, acked: p.acked}, p.resp
}

// pipeWindow is what a case's pipeline did in its measured window.
type pipeWindow struct {
	// resp are the response times of the window, sorted.
	resp []time.Duration
	// batchesPerSec and bytesPerSec are acknowledged batches and their
	// wire bytes per second.
	batchesPerSec, bytesPerSec float64
	// inFlight is the mean number of batches in flight; measured is false
	// when it is estimated (Little's law: batches/s x mean response time).
	inFlight float64
	measured bool
	// limit is the most the client may have had in flight (sum of the
	// partitions' windows at the end), 0 when unknown.
	limit int
}

// window computes the pipeline figures between two snapshots; resp are
// all response times recorded (µs).
func pipeBetween(start, end pipeSnap, resp []int32) pipeWindow {
	secs := end.at.Sub(start.at).Seconds()
	if secs <= 0 {
		return pipeWindow{}
	}
	w := pipeWindow{
		batchesPerSec: float64(end.acked-start.acked) / secs,
		bytesPerSec:   float64(end.ackedBytes-start.ackedBytes) / secs,
		limit:         end.limitSum,
	}
	for _, us := range resp[start.responses:end.responses] {
		w.resp = append(w.resp, time.Duration(us)*time.Microsecond)
	}
	slices.Sort(w.resp)
	if end.inFlightSecs > 0 {
		w.inFlight, w.measured = (end.inFlightSecs-start.inFlightSecs)/secs, true
	} else if len(w.resp) > 0 {
		w.inFlight = w.batchesPerSec * w.meanResp().Seconds()
	}
	return w
}

func (w pipeWindow) meanResp() time.Duration {
	if len(w.resp) == 0 {
		return 0
	}
	var sum time.Duration
	for _, d := range w.resp {
		sum += d
	}
	return sum / time.Duration(len(w.resp))
}

// respQuantile is the exact quantile q of the window's response times.
func (w pipeWindow) respQuantile(q float64) time.Duration {
	if len(w.resp) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(w.resp)))) - 1
	return w.resp[min(max(i, 0), len(w.resp)-1)]
}

// printPipe prints how full each case kept its pipe (--shape): batches in
// flight against the window, response times against the emulated RTT,
// batch fill, and the wire bytes acknowledged against the bound (the value
// bytes of the main table leave out record and batch headers).
func printPipe(w io.Writer, rs []result) {
	fmt.Fprint(w, "\nPipeline (measured window; response = produce request handed to the connection to its response applied, per batch for longhaul, per request for kgo; in flight: kgo's by Little's law):\n\n")
	fmt.Fprintln(w, "| RTT | parts | batch | client | in flight (mean) | of window | response p50 / p99 / mean | mean - RTT | proxy late / in write per chunk | batch bytes (of batch.size) | wire MB/s | wire of bound |")
	fmt.Fprintln(w, "|---:|---:|---:|---|---:|---:|---|---:|---:|---:|---:|---:|")
	for _, r := range rs {
		p := r.pipe
		if p.batchesPerSec <= 0 {
			continue
		}
		name := r.client.name
		if r.round > 0 {
			name += fmt.Sprintf(" #%d", r.round)
		}
		inFlight := fmt.Sprintf("%.1f", p.inFlight)
		if !p.measured {
			inFlight = "~" + inFlight
		}
		limit := r.window * r.partitions
		if p.limit > 0 {
			limit = p.limit
		}
		ofWindow := fmt.Sprintf("%.0f%% of %d", 100*p.inFlight/float64(limit), limit)
		perBatch := p.bytesPerSec / p.batchesPerSec
		wireBound := "-"
		if !math.IsInf(r.boundMBps, 1) && r.boundMBps > 0 {
			wireBound = fmt.Sprintf("%.1f%%", 100*p.bytesPerSec/1e6/r.boundMBps)
		}
		late := "-"
		if r.proxyChunks > 0 {
			late = fmtMs(r.proxyLate/time.Duration(r.proxyChunks)) + " / " + fmtMs(r.proxyInWrite/time.Duration(r.proxyChunks))
		}
		fmt.Fprintf(w, "| %v | %d | %s | %s | %s | %s | %s / %s / %s | %s | %s | %.0f (%.1f%%) | %.1f | %s |\n",
			r.rtt, r.partitions, fmtBytes(r.batch), name, inFlight, ofWindow,
			fmtMs(p.respQuantile(0.5)), fmtMs(p.respQuantile(0.99)), fmtMs(p.meanResp()), fmtMs(p.meanResp()-r.rtt),
			late, perBatch, 100*perBatch/float64(r.batch), p.bytesPerSec/1e6, wireBound)
	}
}

// fmtMs prints d in milliseconds with two decimals, as the response-time
// columns compare against a round trip of tens of milliseconds.
func fmtMs(d time.Duration) string {
	return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond))
}
