package linkproxy

import (
	"slices"
	"testing"
	"time"
)

// BenchmarkWaiter measures one waiter alone: each op waits for a due time
// 0.2-2.2 ms ahead; late-µs is the mean time past due at which wait
// returned, p99-late-µs the 99th percentile.
func BenchmarkWaiter(b *testing.B) {
	for _, c := range []struct {
		name   string
		coarse bool
	}{{"timer", true}, {"precise", false}} {
		b.Run(c.name, func(b *testing.B) {
			w := newWaiter(c.coarse)
			defer w.close()
			lates := make([]time.Duration, 0, b.N)
			for i := range b.N {
				due := time.Now().Add(200*time.Microsecond + time.Duration(i%2000)*time.Microsecond)
				w.wait(due)
				lates = append(lates, time.Since(due))
			}
			var sum time.Duration
			for _, l := range lates {
				sum += l
			}
			slices.Sort(lates)
			b.ReportMetric(float64(sum/time.Duration(b.N))/1e3, "late-µs")
			b.ReportMetric(float64(lates[len(lates)*99/100])/1e3, "p99-late-µs")
		})
	}
}
