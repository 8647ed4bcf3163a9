package protocol

import (
	"fmt"
	"io"
	"net"
	"testing"
)

// BenchmarkWriteProduce puts one Produce v14 request of 16 partitions on a
// loopback TCP socket drained by another goroutine, as Conn's writer does:
// "copy" encodes the whole frame with AppendRequest into a reused buffer
// (what Send did before), "writev" encodes only the prefixes and writes
// the record sets from the caller's memory.
func BenchmarkWriteProduce(b *testing.B) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(io.Discard, nc); nc.Close() }()
		}
	}()
	id := "bench"
	for _, batch := range []int{16 << 10, 256 << 10} {
		req := &ProduceRequest{Acks: -1}
		for p := range 16 {
			req.Add("t", [16]byte{1}, int32(p), make([]byte, batch))
		}
		kreq := toKmsg(req, 14)
		size := int64(16 * batch)
		for _, mode := range []string{"copy", "writev"} {
			b.Run(fmt.Sprintf("batch=%dK/%s", batch>>10, mode), func(b *testing.B) {
				nc, err := net.Dial("tcp", ln.Addr().String())
				if err != nil {
					b.Fatal(err)
				}
				defer nc.Close()
				var frame []byte
				f := getFrame()
				var bufs net.Buffers
				b.SetBytes(size)
				b.ReportAllocs()
				for b.Loop() {
					if mode == "copy" {
						frame = AppendRequest(frame[:0], kreq, 1, &id)
						bufs = append(bufs[:0], frame)
					} else {
						f.encodeProduce(req, 14, 1, &id)
						bufs = f.appendBuffers(bufs[:0])
					}
					w := bufs
					if _, err := w.WriteTo(nc); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
