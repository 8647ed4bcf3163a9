package linkproxy

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"testing"
	"time"
)

// echoServer accepts connections and echoes everything back, half-closing
// its write side when the client half-closes. It returns the address and a
// channel of accepted server-side connections.
func echoServer(t *testing.T) (string, <-chan net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan net.Conn, 64)
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			select {
			case accepted <- c:
			default:
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				io.Copy(c, c)
				c.(*net.TCPConn).CloseWrite()
				// Wait for the peer to close before closing our side.
				io.Copy(io.Discard, c)
				c.Close()
			}()
		}
	}()
	return ln.Addr().String(), accepted
}

func newProxy(t *testing.T, target string) *Proxy {
	t.Helper()
	p, err := New("127.0.0.1:0", target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func dial(t *testing.T, addr string) *net.TCPConn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c.(*net.TCPConn)
}

// roundTripBytes writes data through c concurrently with reading the echo,
// then half-closes, and returns what came back.
func roundTripBytes(t *testing.T, c *net.TCPConn, data []byte, writeChunk int) []byte {
	t.Helper()
	var got []byte
	var readErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		got, readErr = io.ReadAll(c)
	}()
	for off := 0; off < len(data); off += writeChunk {
		end := min(off+writeChunk, len(data))
		if _, err := c.Write(data[off:end]); err != nil {
			t.Fatalf("write: %v", err)
		}
	}
	if err := c.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	<-done
	if readErr != nil {
		t.Fatalf("read: %v", readErr)
	}
	return got
}

func TestBytesIntactWithDelayAndConcurrentConns(t *testing.T) {
	target, _ := echoServer(t)
	p := newProxy(t, target)
	p.SetDelay(2 * time.Millisecond)

	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(i), 1))
			data := make([]byte, 3<<20)
			for j := range data {
				data[j] = byte(rng.Uint32())
			}
			got := roundTripBytes(t, dial(t, p.Addr()), data, 1000+i*7919)
			if sha256.Sum256(got) != sha256.Sum256(data) {
				t.Errorf("conn %d: echoed %d bytes differ from the %d sent", i, len(got), len(data))
			}
		}()
	}
	wg.Wait()
	st := p.Stats()
	if st.BytesToTarget != 4*3<<20 || st.BytesToClient != 4*3<<20 {
		t.Errorf("stats count %d bytes to target, %d to client, want %d each", st.BytesToTarget, st.BytesToClient, 4*3<<20)
	}
	if st.Accepted != 4 {
		t.Errorf("accepted %d connections, want 4", st.Accepted)
	}
}

func TestByteOrderKeptWhenDelayShrinks(t *testing.T) {
	target, _ := echoServer(t)
	p := newProxy(t, target)
	c := dial(t, p.Addr())
	p.SetDelay(80 * time.Millisecond)
	// These bytes are queued with an 80 ms release; the next ones with 0.
	// A writer that released by time alone would reorder them.
	if _, err := c.Write([]byte("first-")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond) // make it a separate read
	p.SetDelay(0)
	got := roundTripBytes(t, c, []byte("second"), 6)
	if string(got) != "first-second" {
		t.Fatalf("got %q, want %q", got, "first-second")
	}
}

func TestDelayAddsAtLeastTwiceOneWayPerRoundTrip(t *testing.T) {
	target, _ := echoServer(t)
	p := newProxy(t, target)
	const oneWay = 40 * time.Millisecond
	p.SetDelay(oneWay)
	c := dial(t, p.Addr())
	buf := make([]byte, 4)
	for range 3 {
		start := time.Now()
		if _, err := c.Write([]byte("ping")); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(c, buf); err != nil {
			t.Fatal(err)
		}
		// The lower bound is a guarantee of the design, not a timing guess.
		// The upper bound is only there to catch a delay applied many times
		// over; it is loose enough for a loaded 2-core machine.
		rtt := time.Since(start)
		if rtt < 2*oneWay {
			t.Fatalf("round trip %v is shorter than twice the one-way delay %v", rtt, oneWay)
		}
		if rtt > 2*oneWay+5*time.Second {
			t.Fatalf("round trip %v is far above 2x%v", rtt, oneWay)
		}
	}
}

// TestDelayDoesNotSerialisePipelinedWrites sends n messages back to back and
// checks that all echoes arrive in about one round trip, not n of them: the
// delays of chunks in flight overlap.
func TestDelayDoesNotSerialisePipelinedWrites(t *testing.T) {
	target, _ := echoServer(t)
	p := newProxy(t, target)
	const oneWay = 100 * time.Millisecond
	const n = 40
	p.SetDelay(oneWay)
	c := dial(t, p.Addr())
	c.SetNoDelay(true)
	start := time.Now()
	go func() {
		for i := range n {
			c.Write([]byte{byte(i)})
			time.Sleep(2 * time.Millisecond) // separate reads at the proxy
		}
	}()
	buf := make([]byte, n)
	if _, err := io.ReadFull(c, buf); err != nil {
		t.Fatal(err)
	}
	elapsed := time.Since(start)
	for i := range buf {
		if buf[i] != byte(i) {
			t.Fatalf("byte %d is %d: order lost", i, buf[i])
		}
	}
	// Delays serialised in even one direction would take n*oneWay = 4 s;
	// overlapping ones about 2*oneWay + n*2ms = 280 ms. Half of 4 s
	// separates the two with a wide margin either way.
	if serial := n * oneWay; elapsed > serial/2 {
		t.Fatalf("%d pipelined messages took %v, as if delays were serialised (%v)", n, elapsed, serial)
	}
	if elapsed < 2*oneWay {
		t.Fatalf("took %v, less than one round trip %v", elapsed, 2*oneWay)
	}
}

func TestHalfClosePropagates(t *testing.T) {
	target, _ := echoServer(t)
	p := newProxy(t, target)
	p.SetDelay(time.Millisecond)
	got := roundTripBytes(t, dial(t, p.Addr()), []byte("hello"), 5)
	if string(got) != "hello" {
		t.Fatalf("got %q", got)
	}
}

func TestCutAllClosesBothSides(t *testing.T) {
	target, accepted := echoServer(t)
	p := newProxy(t, target)
	c := dial(t, p.Addr())
	if _, err := c.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	var server net.Conn
	select {
	case server = <-accepted:
	case <-time.After(10 * time.Second):
		t.Fatal("target never accepted")
	}
	buf := make([]byte, 1)
	if _, err := io.ReadFull(c, buf); err != nil {
		t.Fatal(err)
	}
	if n := p.CutAll(); n != 1 {
		t.Fatalf("CutAll cut %d connections, want 1", n)
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Read(buf); err == nil {
		t.Fatal("client read succeeded after cut")
	} else if errors.Is(err, net.ErrClosed) || isTimeout(err) {
		t.Fatalf("client read: %v, want EOF or reset from the proxy", err)
	}
	// The echo goroutine owns server; its Copy loops end when the proxy
	// closes the target side, so a write from here must eventually fail.
	server.SetWriteDeadline(time.Now().Add(10 * time.Second))
	var werr error
	for range 100 {
		if _, werr = server.Write([]byte("y")); werr != nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if werr == nil || isTimeout(werr) {
		t.Fatalf("target side still writable after cut: %v", werr)
	}
	if st := p.Stats(); st.Cuts != 1 {
		t.Errorf("Stats.Cuts = %d, want 1", st.Cuts)
	}
	// The proxy keeps accepting after a cut.
	if got := roundTripBytes(t, dial(t, p.Addr()), []byte("again"), 5); string(got) != "again" {
		t.Fatalf("after cut got %q", got)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func TestCutRandomlyCutsAndStops(t *testing.T) {
	target, _ := echoServer(t)
	p := newProxy(t, target)
	const n = 5
	conns := make([]*net.TCPConn, n)
	for i := range conns {
		conns[i] = dial(t, p.Addr())
		roundTripOne(t, conns[i])
	}
	stop, err := p.CutRandomly(rand.New(rand.NewPCG(1, 2)), 5*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for p.Stats().Active > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("still %d active connections", p.Stats().Active)
		}
		time.Sleep(5 * time.Millisecond)
	}
	stop()
	stop() // idempotent
	if st := p.Stats(); st.Cuts != n {
		t.Errorf("Cuts = %d, want %d", st.Cuts, n)
	}
	for i, c := range conns {
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := c.Read(make([]byte, 1)); err == nil || isTimeout(err) {
			t.Errorf("conn %d readable after random cuts: %v", i, err)
		}
	}
	// After stop, new connections live.
	c := dial(t, p.Addr())
	roundTripOne(t, c)
	if st := p.Stats(); st.Cuts != n {
		t.Errorf("a cut happened after stop: Cuts = %d", st.Cuts)
	}
}

func roundTripOne(t *testing.T, c net.Conn) {
	t.Helper()
	if _, err := c.Write([]byte("!")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(c, make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
}

func TestCloseStopsAcceptingAndCuts(t *testing.T) {
	target, _ := echoServer(t)
	p := newProxy(t, target)
	c := dial(t, p.Addr())
	roundTripOne(t, c)
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	p.Close() // idempotent
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil || isTimeout(err) {
		t.Fatalf("connection survived Close: %v", err)
	}
	if _, err := net.DialTimeout("tcp", p.Addr(), time.Second); err == nil {
		t.Fatal("proxy still accepts after Close")
	}
	if _, err := p.CutRandomly(rand.New(rand.NewPCG(1, 1)), time.Second); !errors.Is(err, ErrClosed) {
		t.Fatalf("CutRandomly after Close: %v, want ErrClosed", err)
	}
}

func TestUnreachableTargetClosesClient(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	p := newProxy(t, dead)
	c := dial(t, p.Addr())
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil || isTimeout(err) {
		t.Fatalf("client not closed when target is down: %v", err)
	}
}

func TestServeUsesGivenListener(t *testing.T) {
	target, _ := echoServer(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := Serve(ln, target)
	t.Cleanup(func() { p.Close() })
	if p.Addr() != ln.Addr().String() || p.Target() != target {
		t.Fatalf("Addr %s Target %s", p.Addr(), p.Target())
	}
	if got := roundTripBytes(t, dial(t, p.Addr()), bytes.Repeat([]byte("z"), 100), 10); len(got) != 100 {
		t.Fatalf("got %d bytes", len(got))
	}
}

// TestLateCountsTimePastRelease checks Stats.Chunks and Stats.Late: a
// destination that reads nothing for 300 ms holds the writer, so chunks
// read meanwhile are written at least that much past their release time
// (delay 0), and Late says so; before that, nothing was late by as much.
func TestLateCountsTimePastRelease(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	const hold = 300 * time.Millisecond
	const size = 16 << 20 // more than the socket buffers hold
	read := make(chan int64, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			read <- -1
			return
		}
		defer c.Close()
		time.Sleep(hold)
		n, _ := io.Copy(io.Discard, c)
		read <- n
	}()
	p := newProxy(t, ln.Addr().String())
	c := dial(t, p.Addr())
	if _, err := c.Write(make([]byte, size)); err != nil {
		t.Fatal(err)
	}
	c.CloseWrite()
	if n := <-read; n != size {
		t.Fatalf("target read %d bytes, want %d", n, size)
	}
	st := p.Stats()
	if st.Chunks < 2 {
		t.Fatalf("Chunks = %d, want the %d bytes in more than one chunk", st.Chunks, size)
	}
	// A lower bound only: the chunks queued behind the blocked write
	// waited for the target's first read, hold after the first chunk.
	if st.Late < hold/3 {
		t.Fatalf("Late = %v over %d chunks, want at least %v: the blocked writer's wait is not counted", st.Late, st.Chunks, hold/3)
	}
}
