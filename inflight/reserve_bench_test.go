package inflight

import (
	"fmt"
	"sync/atomic"
	"testing"
)

// BenchmarkReserve measures one request cycle to one node: Reserve with N
// candidate partitions (all admitted), Complete of every ticket, Finish. It
// reports ns/op for the whole cycle and ns/partition; the hot path must not
// allocate.
func BenchmarkReserve(b *testing.B) {
	for _, n := range []int{1, 100, 10000} {
		b.Run(fmt.Sprintf("partitions=%d", n), func(b *testing.B) {
			l, err := New(Config{MaxRequestsPerConn: 5})
			if err != nil {
				b.Fatal(err)
			}
			node := l.Node(1)
			cands := make([]Candidate, n)
			for i := range cands {
				cands[i].Partition = l.Partition("t", int32(i))
				l.SetLeader(cands[i].Partition, 1, 0)
			}
			var req Request
			ok := Outcome{Acked: true, Window: 20, WindowPresent: true}
			cycle := func() {
				if !l.Reserve(node, cands, &req) || len(req.Tickets) != n {
					b.Fatalf("admitted %d of %d", len(req.Tickets), n)
				}
				for i := range cands {
					cands[i].Pos++ // the next batch of each partition
				}
				for _, tk := range req.Tickets {
					l.Complete(tk, ok)
				}
				l.Finish(&req)
			}
			cycle() // warm up: opens the gates, grows Tickets and each partition's ticket list
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				cycle()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/partition")
		})
	}
}

// BenchmarkReserveParallel runs request cycles from all Ps at once on
// separate nodes, each with 100 partitions: the cost of the one mutex under
// contention.
func BenchmarkReserveParallel(b *testing.B) {
	l, err := New(Config{MaxRequestsPerConn: 5})
	if err != nil {
		b.Fatal(err)
	}
	var next atomic.Int32
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		id := next.Add(1)
		node := l.Node(id)
		cands := make([]Candidate, 100)
		for i := range cands {
			cands[i].Partition = l.Partition(fmt.Sprint("t", id), int32(i))
			l.SetLeader(cands[i].Partition, id, 0)
		}
		var req Request
		ok := Outcome{Acked: true, Window: 20, WindowPresent: true}
		for pb.Next() {
			if !l.Reserve(node, cands, &req) {
				panic("refused")
			}
			for i := range cands {
				cands[i].Pos++
			}
			for _, tk := range req.Tickets {
				l.Complete(tk, ok)
			}
			l.Finish(&req)
		}
	})
}
