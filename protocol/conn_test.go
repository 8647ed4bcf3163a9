package protocol

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// mdReq is a Metadata request naming one topic; the echo handlers answer
// with that topic, so a response can be matched to its request by content.
func mdReq(topic string) *kmsg.MetadataRequest {
	r := kmsg.NewPtrMetadataRequest()
	t := kmsg.NewMetadataRequestTopic()
	t.Topic = &topic
	r.Topics = append(r.Topics, t)
	return r
}

func mdEcho(req kmsg.Request) *kmsg.MetadataResponse {
	r := req.(*kmsg.MetadataRequest)
	resp := r.ResponseKind().(*kmsg.MetadataResponse)
	t := kmsg.NewMetadataResponseTopic()
	t.Topic = r.Topics[0].Topic
	resp.Topics = append(resp.Topics, t)
	return resp
}

func respTopic(r kmsg.Response) string {
	return *r.(*kmsg.MetadataResponse).Topics[0].Topic
}

func dialT(t testing.TB, addr string, cfg DialConfig) *Conn {
	t.Helper()
	c, err := Dial(context.Background(), addr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// outcome records every completion of n requests.
type outcome struct {
	mu    sync.Mutex
	calls []int
	resp  []kmsg.Response
	err   []error
	order []int
	wg    sync.WaitGroup
}

func newOutcome(n int) *outcome {
	o := &outcome{calls: make([]int, n), resp: make([]kmsg.Response, n), err: make([]error, n)}
	o.wg.Add(n)
	return o
}

func (o *outcome) done(i int) func(kmsg.Response, error) {
	return func(r kmsg.Response, err error) {
		o.mu.Lock()
		o.calls[i]++
		first := o.calls[i] == 1
		o.resp[i], o.err[i] = r, err
		o.order = append(o.order, i)
		o.mu.Unlock()
		if first {
			o.wg.Done()
		}
	}
}

// errorer is the part of testing.T exactlyOnce uses, so the negative
// control can hand it a recorder.
type errorer interface {
	Helper()
	Errorf(format string, args ...any)
}

// exactlyOnce fails unless every request completed exactly once.
func (o *outcome) exactlyOnce(t errorer) {
	t.Helper()
	o.wg.Wait()
	o.mu.Lock()
	defer o.mu.Unlock()
	for i, n := range o.calls {
		if n != 1 {
			t.Errorf("request %d completed %d times", i, n)
		}
	}
}

type recordErrors struct{ n int }

func (r *recordErrors) Helper()               {}
func (r *recordErrors) Errorf(string, ...any) { r.n++ }

// TestExactlyOnceCheckerNegativeControl shows the exactly-once check used
// by the conn tests catches a connection that completes a request twice.
func TestExactlyOnceCheckerNegativeControl(t *testing.T) {
	o := newOutcome(2)
	o.done(0)(nil, nil)
	o.done(1)(nil, nil)
	o.done(1)(nil, ErrConnClosed) // a broken conn failing an answered request
	var rec recordErrors
	o.exactlyOnce(&rec)
	if rec.n != 1 {
		t.Fatalf("double completion reported %d times, want 1", rec.n)
	}
}

// TestPipeliningHundreds keeps 500 requests outstanding on one loopback
// connection; the broker answers them all in shuffled order and each
// completion must carry its own response, exactly once.
func TestPipeliningHundreds(t *testing.T) {
	const n = 500
	b := newFakeBroker(t)
	received, release := make(chan struct{}), make(chan struct{})
	var held []func()
	b.handle = func(h RequestHeader, req kmsg.Request, reply func(any)) {
		resp := mdEcho(req)
		held = append(held, func() { reply(resp) })
		if len(held) == n {
			close(received)
			<-release
			rand.New(rand.NewPCG(1, 1)).Shuffle(n, func(i, j int) { held[i], held[j] = held[j], held[i] })
			for _, f := range held {
				f()
			}
		}
	}
	c := dialT(t, b.listen(), DialConfig{ClientID: "pipeline"})
	o := newOutcome(n)
	for i := range n {
		c.Send(mdReq(fmt.Sprint("t-", i)), time.Minute, o.done(i))
	}
	<-received
	if got := c.InFlight(); got != n {
		t.Fatalf("InFlight = %d with all %d requests at the broker", got, n)
	}
	close(release)
	o.exactlyOnce(t)
	for i := range n {
		if o.err[i] != nil || respTopic(o.resp[i]) != fmt.Sprint("t-", i) {
			t.Fatalf("request %d: %v / wrong response", i, o.err[i])
		}
	}
	if slices.IsSorted(o.order) {
		t.Fatal("test setup: responses were not reordered")
	}
	if c.InFlight() != 0 {
		t.Fatal("InFlight not back to 0")
	}
}

// TestClosedMidFlight: half the requests are answered, then the connection
// dies (closed by us, or by the broker); every request completes exactly
// once, the unanswered ones with ErrConnClosed, marked written.
func TestClosedMidFlight(t *testing.T) {
	for _, who := range []string{"client", "broker"} {
		t.Run(who, func(t *testing.T) {
			const n = 300
			b := newFakeBroker(t)
			var count atomic.Int32
			allIn := make(chan struct{})
			b.handle = func(h RequestHeader, req kmsg.Request, reply func(any)) {
				if topic := *req.(*kmsg.MetadataRequest).Topics[0].Topic; strings.HasSuffix(topic, "even") {
					reply(mdEcho(req))
				}
				if count.Add(1) == n {
					close(allIn)
				}
			}
			c := dialT(t, b.listen(), DialConfig{})
			o := newOutcome(n)
			answered := make(chan struct{}, n)
			for i := range n {
				name := fmt.Sprint(i, "-odd")
				if i%2 == 0 {
					name = fmt.Sprint(i, "-even")
				}
				inner := o.done(i)
				c.Send(mdReq(name), 0, func(r kmsg.Response, err error) {
					inner(r, err)
					if err == nil {
						answered <- struct{}{}
					}
				})
			}
			<-allIn
			for range n / 2 {
				<-answered
			}
			if who == "client" {
				c.Close()
			} else {
				b.closeConns()
			}
			o.exactlyOnce(t)
			<-c.Done()
			if !errors.Is(c.Err(), ErrConnClosed) {
				t.Fatalf("Err() = %v", c.Err())
			}
			for i := range n {
				if i%2 == 0 {
					if o.err[i] != nil || respTopic(o.resp[i]) != fmt.Sprint(i, "-even") {
						t.Fatalf("answered request %d: %v", i, o.err[i])
					}
					continue
				}
				var ce *ConnError
				if !errors.Is(o.err[i], ErrConnClosed) || !errors.As(o.err[i], &ce) || !ce.Written || SafeToRetry(o.err[i]) {
					t.Fatalf("unanswered request %d: %v", i, o.err[i])
				}
			}
			// A Send on the dead conn fails, never written: safe to retry.
			late := newOutcome(1)
			c.Send(mdReq("late"), 0, late.done(0))
			late.exactlyOnce(t)
			if !errors.Is(late.err[0], ErrConnClosed) || !SafeToRetry(late.err[0]) {
				t.Fatalf("send after close: %v", late.err[0])
			}
			if c.Close() != nil {
				t.Fatal("second Close")
			}
		})
	}
}

// TestDeadlinesOutOfOrder runs on synctest's virtual clock: deadlines set
// in the order 5s,1s,4s,2s,3s expire in the order of their times, the late
// responses are discarded, and the connection keeps working.
func TestDeadlinesOutOfOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newFakeBroker(t)
		var mu sync.Mutex
		var held []func()
		b.handle = func(h RequestHeader, req kmsg.Request, reply func(any)) {
			resp := mdEcho(req)
			if respTopic(resp) == "now" {
				mu.Lock()
				for _, f := range held { // late answers first
					f()
				}
				mu.Unlock()
				reply(resp)
				return
			}
			mu.Lock()
			held = append(held, func() { reply(resp) })
			mu.Unlock()
		}
		c := dialT(t, "pipe", DialConfig{Dial: b.pipeDial})
		timeouts := []time.Duration{5, 1, 4, 2, 3}
		o := newOutcome(len(timeouts))
		start := time.Now()
		at := make([]time.Duration, len(timeouts))
		for i, d := range timeouts {
			inner := o.done(i)
			c.Send(mdReq(fmt.Sprint(i)), d*time.Second, func(r kmsg.Response, err error) {
				at[i] = time.Since(start)
				inner(r, err)
			})
		}
		o.exactlyOnce(t)
		if want := []int{1, 3, 4, 2, 0}; !slices.Equal(o.order, want) {
			t.Fatalf("timeout order %v, want %v", o.order, want)
		}
		for i, d := range timeouts {
			var ce *ConnError
			if !errors.Is(o.err[i], ErrRequestTimeout) || !errors.As(o.err[i], &ce) || !ce.Written {
				t.Fatalf("request %d: %v", i, o.err[i])
			}
			if at[i] != d*time.Second {
				t.Fatalf("request %d timed out at %v, want %v", i, at[i], d*time.Second)
			}
		}
		resp, err := c.Do(context.Background(), mdReq("now"))
		if err != nil || respTopic(resp) != "now" {
			t.Fatalf("after timeouts: %v", err)
		}
		if c.InFlight() != 0 {
			t.Fatal("late responses left requests in flight")
		}
		c.Close()
	})
}

// TestTimeoutBeforeWritten: a broker that stops reading leaves requests in
// our queue; those time out marked unwritten (safe to retry), while the
// ones that reached the socket are not.
func TestTimeoutBeforeWritten(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newFakeBroker(t)
		stuck := make(chan struct{})
		b.handle = func(RequestHeader, kmsg.Request, func(any)) { <-stuck } // stops reading
		c := dialT(t, "pipe", DialConfig{Dial: b.pipeDial})
		const n = 4
		o := newOutcome(n)
		c.Send(mdReq("0"), time.Second, o.done(0))
		synctest.Wait() // request 0 read by the broker, which now blocks
		c.Send(mdReq("1"), time.Second, o.done(1))
		synctest.Wait() // the writer is blocked writing request 1
		c.Send(mdReq("2"), time.Second, o.done(2))
		c.Send(mdReq("3"), time.Second, o.done(3))
		o.exactlyOnce(t)
		for i := range n {
			if !errors.Is(o.err[i], ErrRequestTimeout) {
				t.Fatalf("request %d: %v", i, o.err[i])
			}
			if want := i >= 2; SafeToRetry(o.err[i]) != want {
				t.Fatalf("request %d: SafeToRetry = %v, want %v", i, !want, want)
			}
		}
		c.Close()
		close(stuck)
	})
}

// TestCloseLeavesNoGoroutines: synctest.Test fails if any goroutine of the
// bubble (reader, writer, timer, completions) is still blocked at the end.
func TestCloseLeavesNoGoroutines(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newFakeBroker(t)
		b.handle = func(RequestHeader, kmsg.Request, func(any)) {} // never answers
		c, err := Dial(context.Background(), "pipe", DialConfig{Dial: b.pipeDial})
		if err != nil {
			t.Fatal(err)
		}
		o := newOutcome(20)
		for i := range 20 {
			c.Send(mdReq("x"), time.Duration(i%3)*time.Hour, o.done(i))
		}
		synctest.Wait()
		c.Close()
		o.exactlyOnce(t)
		for i := range 20 {
			if !errors.Is(o.err[i], ErrConnClosed) {
				t.Fatalf("request %d: %v", i, o.err[i])
			}
		}
		b.stop()
	})
}

func TestMalformedResponseKillsConn(t *testing.T) {
	b := newFakeBroker(t)
	b.handle = func(h RequestHeader, req kmsg.Request, reply func(any)) {
		if *req.(*kmsg.MetadataRequest).Topics[0].Topic == "bad" {
			// A frame with the right correlation id and a truncated body.
			reply([]byte{0, 0, 0, 6, byte(h.CorrelationID >> 24), byte(h.CorrelationID >> 16), byte(h.CorrelationID >> 8), byte(h.CorrelationID), 0, 0})
		}
	}
	c := dialT(t, b.listen(), DialConfig{})
	o := newOutcome(2)
	c.Send(mdReq("silent"), 0, o.done(0))
	c.Send(mdReq("bad"), 0, o.done(1))
	o.exactlyOnce(t)
	for i := range 2 {
		if !errors.Is(o.err[i], ErrConnClosed) {
			t.Fatalf("request %d: %v", i, o.err[i])
		}
	}
	if !errors.Is(o.err[1], ErrMalformedResponse) || !errors.Is(c.Err(), ErrMalformedResponse) {
		t.Fatalf("malformed not reported: %v / %v", o.err[1], c.Err())
	}
}

func TestProduceAcksZeroCompletesOnWrite(t *testing.T) {
	b := newFakeBroker(t)
	got := make(chan int16, 1)
	b.handle = func(h RequestHeader, req kmsg.Request, reply func(any)) { got <- h.Version }
	c := dialT(t, b.listen(), DialConfig{})
	req := kmsg.NewPtrProduceRequest()
	req.Acks = 0
	resp, err := c.Do(context.Background(), req)
	if resp != nil || err != nil {
		t.Fatalf("acks=0: %v %v", resp, err)
	}
	if v := <-got; v != MaxProduceVersion {
		t.Fatalf("produce sent at v%d", v)
	}
}

func TestVersionNegotiation(t *testing.T) {
	cases := []struct {
		name        string
		keys        func([]kmsg.ApiVersionsResponseApiKey) []kmsg.ApiVersionsResponseApiKey
		caps        map[int16]int16
		produce     int16 // -1: not available
		idempotence bool
	}{
		{"kip-1269 broker", nil, nil, 14, true},
		{"old broker", func(k []kmsg.ApiVersionsResponseApiKey) []kmsg.ApiVersionsResponseApiKey { return withKey(k, 0, 0, 13) }, nil, 13, true},
		{"capped", nil, map[int16]int16{0: 13}, 13, true},
		{"future broker", func(k []kmsg.ApiVersionsResponseApiKey) []kmsg.ApiVersionsResponseApiKey { return withKey(k, 0, 3, 20) }, nil, 14, true},
		{"pre-0.11 broker", func(k []kmsg.ApiVersionsResponseApiKey) []kmsg.ApiVersionsResponseApiKey { return withKey(k, 0, 0, 2) }, nil, 2, false},
		{"no common version", func(k []kmsg.ApiVersionsResponseApiKey) []kmsg.ApiVersionsResponseApiKey {
			return withKey(k, 0, 15, 16)
		}, nil, -1, false},
		{"no produce", func(k []kmsg.ApiVersionsResponseApiKey) []kmsg.ApiVersionsResponseApiKey { return withKey(k, 0, 0, -1) }, nil, -1, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := newFakeBroker(t)
			if tc.keys != nil {
				b.keys = tc.keys(b.keys)
			}
			c := dialT(t, b.listen(), DialConfig{MaxVersions: tc.caps})
			v, ok := c.Version(0)
			if ok != (tc.produce >= 0) || ok && v != tc.produce {
				t.Fatalf("Produce version %d %v, want %d", v, ok, tc.produce)
			}
			err := RequireIdempotentProduce(c)
			if tc.idempotence != (err == nil) || err != nil && !errors.Is(err, ErrIdempotenceUnsupported) {
				t.Fatalf("RequireIdempotentProduce: %v", err)
			}
			if mv, _ := c.Version(3); mv != (&kmsg.MetadataRequest{}).MaxVersion() {
				t.Fatalf("Metadata v%d", mv)
			}
			if !ok {
				_, err := c.Do(context.Background(), kmsg.NewPtrProduceRequest())
				if !errors.Is(err, ErrUnsupportedVersion) || !SafeToRetry(err) {
					t.Fatalf("Send without the key: %v", err)
				}
			}
		})
	}
}

// TestApiVersionsFallback: a broker that knows ApiVersions only up to v2
// answers our v3 with UNSUPPORTED_VERSION in a v0 body; we retry at v2.
// One that does not list ApiVersions at all gets v0.
func TestApiVersionsFallback(t *testing.T) {
	for _, tc := range []struct {
		name   string
		keys   []kmsg.ApiVersionsResponseApiKey
		apiMax int16
		want   []int16
	}{
		{"v2 broker", withKey(allKeys(), 18, 0, 2), 2, []int16{3, 2}},
		{"unlisted", withKey(allKeys(), 18, 0, -1), 0, []int16{3, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newFakeBroker(t)
			b.keys, b.apiMax = tc.keys, tc.apiMax
			var mu sync.Mutex
			var seen []int16
			b.onFrame = func(f []byte) {
				if f[1] == 18 {
					mu.Lock()
					seen = append(seen, int16(f[3]))
					mu.Unlock()
				}
			}
			c := dialT(t, b.listen(), DialConfig{})
			if v, _ := c.Version(0); v != 14 {
				t.Fatalf("produce v%d", v)
			}
			mu.Lock()
			defer mu.Unlock()
			if !slices.Equal(seen, tc.want) {
				t.Fatalf("ApiVersions versions sent %v, want %v", seen, tc.want)
			}
		})
	}
}

func TestSASL(t *testing.T) {
	mechFor := func(mech, user, pass string) sasl.Mechanism {
		if mech == "PLAIN" {
			return plain.Auth{User: user, Pass: pass}.AsMechanism()
		}
		return scram.Auth{User: user, Pass: pass}.AsSha256Mechanism()
	}
	for _, mech := range []string{"PLAIN", "SCRAM-SHA-256"} {
		for _, pass := range []string{"secret", "wrong"} {
			t.Run(mech+"/"+pass, func(t *testing.T) {
				b := newFakeBroker(t)
				b.mechs = map[string]bool{"PLAIN": true, "SCRAM-SHA-256": true}
				b.user, b.pass = "alice", "secret"
				b.handle = func(_ RequestHeader, req kmsg.Request, reply func(any)) { reply(mdEcho(req)) }
				c, err := Dial(context.Background(), b.listen(), DialConfig{SASL: mechFor(mech, "alice", pass)})
				if pass == "wrong" {
					if err == nil || !strings.Contains(err.Error(), "SASL_AUTHENTICATION_FAILED") {
						t.Fatalf("wrong password: %v", err)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				b.mu.Lock()
				authed := b.authed
				b.mu.Unlock()
				if !authed {
					t.Fatal("broker did not see a successful exchange")
				}
				if r, err := c.Do(context.Background(), mdReq("after-auth")); err != nil || respTopic(r) != "after-auth" {
					t.Fatalf("request after auth: %v", err)
				}
			})
		}
	}
	b := newFakeBroker(t)
	b.mechs = map[string]bool{"SCRAM-SHA-512": true}
	_, err := Dial(context.Background(), b.listen(), DialConfig{SASL: plain.Auth{User: "a", Pass: "b"}.AsMechanism()})
	if err == nil || !strings.Contains(err.Error(), "UNSUPPORTED_SASL_MECHANISM") {
		t.Fatalf("unsupported mechanism: %v", err)
	}
}

// TestDialContextBoundsHandshake: a broker that accepts and never answers
// makes Dial return ctx's error once it expires (virtual clock).
func TestDialContextBoundsHandshake(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var srv net.Conn
		dial := func(context.Context, string, string) (net.Conn, error) {
			cli, s := net.Pipe()
			srv = s
			go func() { // reads and ignores everything
				buf := make([]byte, 1024)
				for {
					if _, err := s.Read(buf); err != nil {
						return
					}
				}
			}()
			return cli, nil
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := Dial(ctx, "pipe", DialConfig{Dial: dial})
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Dial: %v", err)
		}
		srv.Close()
	})
}

// A response whose correlation id no request is waiting for (never sent,
// or answered already) breaks the connection, as in the Java client: the
// stream no longer pairs answers with requests (issue 20). The late answer
// to a request that timed out is still dropped quietly.
func TestUnknownCorrelationIDKillsConn(t *testing.T) {
	b := newFakeBroker(t)
	b.handle = func(h RequestHeader, req kmsg.Request, reply func(any)) {
		switch *req.(*kmsg.MetadataRequest).Topics[0].Topic {
		case "late":
			go func() {
				time.Sleep(100 * time.Millisecond)
				reply(mdEcho(req))
			}()
		case "stray":
			reply(AppendResponse(nil, h.CorrelationID+1000, mdEcho(req)))
		default:
			reply(mdEcho(req))
		}
	}
	c := dialT(t, b.listen(), DialConfig{})
	o := newOutcome(1)
	c.Send(mdReq("late"), 10*time.Millisecond, o.done(0))
	o.exactlyOnce(t)
	require.ErrorIs(t, o.err[0], ErrRequestTimeout)
	time.Sleep(200 * time.Millisecond) // the late answer arrives and is dropped
	_, err := c.Do(context.Background(), mdReq("ok"))
	require.NoError(t, err, "a late answer to a timed-out request keeps the connection")

	o = newOutcome(1)
	c.Send(mdReq("stray"), 0, o.done(0))
	o.exactlyOnce(t)
	require.ErrorIs(t, o.err[0], ErrConnClosed)
	require.ErrorIs(t, c.Err(), ErrMalformedResponse)
	require.Contains(t, c.Err().Error(), "no request is waiting for")
}

// TestConnMalformedProduceBodyKillsConn: a Produce response whose body our
// decoder rejects (kmsg's decoder is not used for Produce) is
// ErrMalformedResponse on a Conn and kills the connection, unlike a window
// tag of the wrong size (TestConnProduceWindowThroughConn).
func TestConnMalformedProduceBodyKillsConn(t *testing.T) {
	b := newFakeBroker(t)
	b.handle = func(h RequestHeader, req kmsg.Request, reply func(any)) {
		frame := AppendResponse(nil, h.CorrelationID, produceResponse(h.Version))
		frame = frame[:len(frame)-3]
		binary.BigEndian.PutUint32(frame, uint32(len(frame)-4))
		reply(frame)
	}
	c := dialT(t, b.listen(), DialConfig{})
	req := kmsg.NewPtrProduceRequest()
	req.Acks = -1
	_, err := c.Do(context.Background(), req)
	require.ErrorIs(t, err, ErrMalformedResponse)
	<-c.Done()
	require.ErrorIs(t, c.Err(), ErrMalformedResponse)
}

// TestExtendDeadlines: ExtendDeadlines moves every pending request's
// deadline by the same amount, so a broker that mutes the connection for a
// throttle does not time out the requests already sent; a request sent
// after the call keeps its own timeout.
func TestExtendDeadlines(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newFakeBroker(t)
		b.handle = func(RequestHeader, kmsg.Request, func(any)) {} // never answers
		c := dialT(t, "pipe", DialConfig{Dial: b.pipeDial})
		o := newOutcome(3)
		start := time.Now()
		at := make([]time.Duration, 3)
		send := func(i int, d time.Duration) {
			inner := o.done(i)
			c.Send(mdReq(fmt.Sprint(i)), d, func(r kmsg.Response, err error) {
				at[i] = time.Since(start)
				inner(r, err)
			})
		}
		send(0, time.Second)
		send(1, 2*time.Second)
		time.Sleep(500 * time.Millisecond)
		c.ExtendDeadlines(0) // no change
		c.ExtendDeadlines(3 * time.Second)
		send(2, time.Second) // at 0.5 s: due at 1.5 s, not moved
		o.exactlyOnce(t)
		for i, want := range []time.Duration{4 * time.Second, 5 * time.Second, 1500 * time.Millisecond} {
			require.ErrorIs(t, o.err[i], ErrRequestTimeout)
			require.Equal(t, want, at[i], "request %d", i)
		}
		c.Close()
	})
}

// TestHandshakeRTT: HandshakeRTT is how long the ApiVersions exchange that
// opened the connection took (a broker answering it 30 ms after reading
// it, on synctest's virtual clock), not the time since, nor any later
// request's.
func TestHandshakeRTT(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newFakeBroker(t)
		delay := 30 * time.Millisecond
		b.onFrame = func([]byte) { time.Sleep(delay) }
		c, err := Dial(context.Background(), "pipe", DialConfig{Dial: b.pipeDial})
		require.NoError(t, err)
		defer c.Close()
		delay = 0
		time.Sleep(time.Second)
		require.Equal(t, 30*time.Millisecond, c.HandshakeRTT())
	})
}
