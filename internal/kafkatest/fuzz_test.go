package kafkatest

import (
	"errors"
	"testing"
)

// FuzzParsePerfSummary: any tool output parses or yields ErrNoSummary /
// a parse error, never a panic, and a parsed summary is non-negative.
func FuzzParsePerfSummary(f *testing.F) {
	f.Add(perfOutput)
	f.Add("1 records sent, 1.0 records/sec (0.00 MB/sec), 1.00 ms avg latency, 1.00 ms max latency, 1 ms 50th, 1 ms 95th, 1 ms 99th, 1 ms 99.9th.")
	f.Add("99999999999999999999 records sent, 1e400 records/sec (0.00 MB/sec), 1.00 ms avg latency, 1.00 ms max latency, 1 ms 50th, 1 ms 95th, 1 ms 99th, 1 ms 99.9th.")
	f.Add("1 records sent, 1.0 records/sec (0.00 MB/sec), 1.00 ms avg latency, 1.00 ms max latency, 99999999999999999999 ms 50th, 1 ms 95th, 1 ms 99th, 1 ms 99.9th.")
	f.Fuzz(func(t *testing.T, out string) {
		s, err := ParsePerfSummary(out)
		if err != nil {
			if errors.Is(err, ErrNoSummary) || s == (PerfSummary{}) {
				return
			}
			t.Fatalf("error %v with non-zero summary %+v", err, s)
		}
		if s.Records < 0 || s.RecordsPerSec < 0 || s.P50 < 0 {
			t.Fatalf("negative summary %+v", s)
		}
	})
}
