package linkproxy

import (
	"encoding/binary"
	"io"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/longhaul-kafka/longhaul/internal/cputime"
)

// BenchmarkRelease measures how late the proxy releases chunks, with the
// runtime timer and with the precise waiter, on the Kafka bench's shape:
// one connection, 50 pipelined requests of 16 KiB in flight, a 100-byte
// response to each, 25 ms each way. One op is one request. Metrics:
// late-µs/chunk is Stats.Late / Stats.Chunks; rtt-over-µs is the mean
// round trip the client saw beyond 2 x 25 ms (the proxy's lateness both
// ways plus scheduling at both ends); p99-over-µs its 99th percentile;
// cpu-µs/req the process's CPU time (user + system) per request (where
// getrusage exists, not on Windows). Run the
// two side by side, e.g.
//
//	go test -run '^$' -bench Release -benchtime 4000x -count 3 ./internal/linkproxy/
func BenchmarkRelease(b *testing.B) {
	for _, c := range []struct {
		name   string
		coarse bool
	}{{"timer", true}, {"precise", false}} {
		b.Run(c.name, func(b *testing.B) { benchRelease(b, c.coarse) })
	}
}

func benchRelease(b *testing.B, coarse bool) {
	const (
		oneWay   = 25 * time.Millisecond
		window   = 50
		reqSize  = 16 << 10
		respSize = 100
	)
	// The target answers each request as soon as it has read all of it.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		req := make([]byte, reqSize)
		resp := make([]byte, respSize)
		for {
			if _, err := io.ReadFull(c, req); err != nil {
				return
			}
			copy(resp, req[:8]) // the send time travels back
			if _, err := c.Write(resp); err != nil {
				return
			}
		}
	}()
	pln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	p := Serve(pln, ln.Addr().String())
	p.SetPreciseTimers(!coarse)
	defer p.Close()
	p.SetDelay(oneWay)
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()

	tokens := make(chan struct{}, window)
	for range window {
		tokens <- struct{}{}
	}
	rtts := make([]time.Duration, 0, b.N)
	done := make(chan struct{})
	start := time.Now()
	go func() {
		defer close(done)
		resp := make([]byte, respSize)
		for range b.N {
			if _, err := io.ReadFull(c, resp); err != nil {
				return
			}
			sent := time.Duration(binary.LittleEndian.Uint64(resp))
			rtts = append(rtts, time.Since(start)-sent)
			tokens <- struct{}{}
		}
	}()
	cpu0 := cputime.Process()
	st0 := p.Stats()
	b.ResetTimer()
	req := make([]byte, reqSize)
	for range b.N {
		<-tokens
		binary.LittleEndian.PutUint64(req, uint64(time.Since(start)))
		if _, err := c.Write(req); err != nil {
			b.Fatal(err)
		}
	}
	<-done
	b.StopTimer()
	cpu1 := cputime.Process()
	st1 := p.Stats()
	if len(rtts) != b.N {
		b.Fatalf("%d responses of %d", len(rtts), b.N)
	}
	var sum time.Duration
	for _, r := range rtts {
		sum += r
	}
	slices.Sort(rtts)
	b.ReportMetric(float64((st1.Late-st0.Late)/time.Microsecond)/float64(st1.Chunks-st0.Chunks), "late-µs/chunk")
	b.ReportMetric(float64((sum/time.Duration(b.N)-2*oneWay)/time.Microsecond), "rtt-over-µs")
	b.ReportMetric(float64((rtts[len(rtts)*99/100]-2*oneWay)/time.Microsecond), "p99-over-µs")
	if cpu0 >= 0 && cpu1 >= 0 { // unknown without getrusage
		b.ReportMetric(float64((cpu1-cpu0)/time.Microsecond)/float64(b.N), "cpu-µs/req")
	}
}
