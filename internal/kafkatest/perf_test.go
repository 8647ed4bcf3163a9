package kafkatest

import (
	"context"
	"testing"
	"time"
)

// testRunJavaPerfSmall runs the Java producer's perf tool once, idempotent
// with acks=all, parses its summary and checks the records are in the log.
func testRunJavaPerfSmall(t *testing.T, c *Cluster) {
	const topic, n = "java-perf", 20000
	c.CreateTopic(t, topic, 3, 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := c.RunJavaPerf(ctx, JavaPerf{Topic: topic, NumRecords: n, RecordSize: 100}.Args(c)...)
	if err != nil {
		t.Fatalf("%v\nstdout:\n%s", err, out)
	}
	s, err := ParsePerfSummary(out)
	if err != nil {
		t.Fatalf("%v\nstdout:\n%s", err, out)
	}
	t.Logf("Java ProducerPerformance (idempotent, acks=all, direct): %v", s)
	if s.Records != n || s.RecordsPerSec <= 0 || s.MaxLatency < s.P50 {
		t.Fatalf("implausible summary %+v", s)
	}
	got := c.Consume(t, topic, n, time.Minute)
	total := 0
	for _, rs := range got {
		total += len(rs)
	}
	if total != n {
		t.Fatalf("log holds %d records, perf tool sent %d", total, n)
	}
}
