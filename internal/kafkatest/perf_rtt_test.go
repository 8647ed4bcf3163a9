package kafkatest

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"
)

// TestJavaPerfOverRTT (LONGHAUL_LONG=1) runs the Java producer's perf tool,
// idempotent with acks=all and default settings otherwise, directly, through
// the proxy with no delay, and through the proxy with 50 ms RTT, and logs
// the throughput ratios. It is the Java half of the side-by-side comparison
// in issue 8; the longhaul half runs the same workloads with examples/perf.
//
//	LONGHAUL_LONG=1 go test -run TestJavaPerfOverRTT -v ./internal/kafkatest
func TestJavaPerfOverRTT(t *testing.T) {
	if os.Getenv("LONGHAUL_LONG") != "1" {
		t.Skip("set LONGHAUL_LONG=1 to run the perf comparison")
	}
	c := Start(t, Options{})
	const n, size = 200000, 512
	run := func(name, bootstrap string, oneWay time.Duration) PerfSummary {
		t.Helper()
		topic := "perf-" + name
		c.CreateTopic(t, topic, 1, 1, nil)
		c.SetDelay(oneWay)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		out, err := c.RunJavaPerf(ctx, JavaPerf{Topic: topic, NumRecords: n, RecordSize: size, Bootstrap: bootstrap}.Args(c)...)
		if err != nil {
			t.Fatalf("%s: %v\n%s", name, err, out)
		}
		s, err := ParsePerfSummary(out)
		if err != nil {
			t.Fatalf("%s: %v\n%s", name, err, out)
		}
		t.Logf("%-14s %v", name, s)
		return s
	}
	direct := run("direct", c.Bootstrap(), 0)
	proxied := run("proxy-0ms", c.ProxiedBootstrap(), 0)
	rtt50 := run("proxy-50ms-rtt", c.ProxiedBootstrap(), 25*time.Millisecond)
	t.Logf("1 partition, %d x %d B, idempotent acks=all, Java defaults (5 in flight, batch.size 16384, linger.ms 5):", n, size)
	t.Logf("  proxy 0 ms / direct   = %s", ratio(proxied.MBPerSec, direct.MBPerSec))
	t.Logf("  proxy 50 ms / direct  = %s", ratio(rtt50.MBPerSec, direct.MBPerSec))
	// KIP-1269's ceiling at 5 in flight: 5 x 16 KiB per 50 ms.
	t.Logf("  5 x batch.size / RTT ceiling = %.2f MB/s; measured %.2f MB/s", 5*16384/0.050/1024/1024, rtt50.MBPerSec)
}

func ratio(a, b float64) string {
	if b == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.3f", a/b)
}
