package kafkatest

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/longhaul-kafka/longhaul/producer"
)

// TestMetricsPushOnKafka checks client metrics push (KIP-714,
// enable.metrics.push) against Apache Kafka 4.4: a broker whose
// metric.reporters is testdata/telemetry's RecordingTelemetry (a
// ClientTelemetryExporterProvider compiled here with javac, which parses
// each push with Kafka's own OpenTelemetry classes and writes what it
// got to a file) and a client-metrics subscription (IncrementalAlterConfigs
// on a CLIENT_METRICS resource, as kafka-client-metrics.sh --alter does)
// asking for org.apache.kafka.producer.* every second. A producer that
// sent 50 records pushes while it runs and a terminating push at Close;
// the reporter received payloads that parse, with the producer's client
// id and the Java metric names, and record.send.total adds up to 50 (Kafka
// asks for delta temporality by default; cumulative, the last push says
// 50).
func TestMetricsPushOnKafka(t *testing.T) {
	classes := buildJava(t, filepath.Join("testdata", "telemetry", "kafkatest", "RecordingTelemetry.java"))
	logFile := filepath.Join(t.TempDir(), "telemetry.log")
	c := Start(t, Options{
		BrokerConfig: map[string]string{"metric.reporters": "kafkatest.RecordingTelemetry"},
		Classpath:    []string{classes},
		JVMFlags:     []string{"-Dkafkatest.telemetry.log=" + logFile},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	r := kmsg.NewIncrementalAlterConfigsRequestResource()
	r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeClientMetrics, "longhaul-producers"
	for k, v := range map[string]string{"metrics": "org.apache.kafka.producer.", "interval.ms": "1000"} {
		cfg := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		cfg.Name, cfg.Value, cfg.Op = k, &v, kmsg.IncrementalAlterConfigOpSet
		r.Configs = append(r.Configs, cfg)
	}
	req.Resources = append(req.Resources, r)
	resp, err := c.request(ctx, req)
	if err != nil {
		t.Fatalf("IncrementalAlterConfigs CLIENT_METRICS: %v", err)
	}
	if rr := resp.(*kmsg.IncrementalAlterConfigsResponse).Resources; len(rr) != 1 || rr[0].ErrorCode != 0 {
		t.Fatalf("IncrementalAlterConfigs CLIENT_METRICS answered %+v", rr)
	}
	c.CreateTopic(t, "pushed", 1, 1, nil)

	p := newLonghaul(t, c.Bootstrap(), nil, producer.ClientID("telemetry-test"))
	recs := make([]*producer.Record, 50)
	for i := range recs {
		recs[i] = &producer.Record{Topic: "pushed", Value: []byte("v")}
	}
	if err := p.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	read := func() string {
		b, _ := os.ReadFile(logFile)
		return string(b)
	}
	for !strings.Contains(read(), "terminating=false") {
		if ctx.Err() != nil {
			t.Fatalf("no push reached the reporter; broker log:\n%s", c.nodes[0].logTail(60))
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for !strings.Contains(read(), "terminating=true") {
		if ctx.Err() != nil {
			t.Fatalf("no terminating push:\n%s", read())
		}
		time.Sleep(100 * time.Millisecond)
	}
	got := read()
	t.Logf("the reporter received:\n%s", got)
	if strings.Contains(got, "\nerror ") {
		t.Fatalf("a payload Kafka could not parse:\n%s", got)
	}
	if !strings.Contains(got, "type=OTLP") {
		t.Errorf("want the OTLP content type")
	}
	last := got[strings.LastIndex(got, "push "):]
	for _, want := range []string{
		"resource client_id=telemetry-test\n",
		"metric org.apache.kafka.producer.record.send.total ",
		"metric org.apache.kafka.producer.request.total ",
		"metric org.apache.kafka.producer.node.request.latency.avg node_id=0 ",
		"metric org.apache.kafka.producer.record.queue.time.max ",
		"metric org.apache.kafka.producer.buffer.total.bytes 3.3554432E7\n",
	} {
		if !strings.Contains(last, want) {
			t.Errorf("the terminating push lacks %q:\n%s", want, last)
		}
	}
	var sent, lastSent int64
	delta := false
	for _, line := range strings.Split(got, "\n") {
		f := strings.Fields(line)
		if len(f) == 5 && f[0] == "metric" && f[1] == "org.apache.kafka.producer.record.send.total" {
			n, err := strconv.ParseInt(f[2], 10, 64)
			if err != nil || f[3] != "monotonic" {
				t.Fatalf("record.send.total: %q", line)
			}
			sent, lastSent = sent+n, n
			delta = f[4] == "AGGREGATION_TEMPORALITY_DELTA"
		}
	}
	if !delta {
		sent = lastSent
	}
	if sent != 50 {
		t.Errorf("record.send.total says %d records sent (delta %v), want 50", sent, delta)
	}
}
