package protocol

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// byteGen draws values from fuzz input, so the fuzzer steers the structs it
// builds; past the input's end it returns zeros.
type byteGen struct{ src []byte }

func (g *byteGen) u8() byte {
	if len(g.src) == 0 {
		return 0
	}
	b := g.src[0]
	g.src = g.src[1:]
	return b
}

func (g *byteGen) u32() uint32 {
	return uint32(g.u8())<<24 | uint32(g.u8())<<16 | uint32(g.u8())<<8 | uint32(g.u8())
}

func (g *byteGen) str() string { return string(g.bytes(g.u8() % 8)) }

func (g *byteGen) nullableStr() *string {
	if g.u8()%3 == 0 {
		return nil
	}
	s := g.str()
	return &s
}

func (g *byteGen) bytes(n byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = g.u8()
	}
	return b
}

// tags returns 0 to 2 unknown tags with keys from 0 to 6: keys 0 and 1
// collide with CurrentLeader/NodeEndpoints and the window on purpose.
func (g *byteGen) tags() kmsg.Tags {
	var t kmsg.Tags
	for range g.u8() % 3 {
		t.Set(uint32(g.u8()%7), g.bytes(g.u8()%6))
	}
	return t
}

// randomProduceResponse builds a response at version from g: every field,
// including ones the version does not carry (the encoder drops them).
func randomProduceResponse(g *byteGen, version int16) *kmsg.ProduceResponse {
	r := kmsg.NewPtrProduceResponse()
	r.Version = version
	for range g.u8() % 4 {
		t := kmsg.NewProduceResponseTopic()
		t.Topic = g.str()
		copy(t.TopicID[:], g.bytes(16))
		for range g.u8() % 5 {
			p := kmsg.NewProduceResponseTopicPartition()
			p.Partition = int32(g.u32())
			p.ErrorCode = int16(g.u32())
			p.BaseOffset = int64(g.u32())<<32 | int64(g.u32())
			p.LogAppendTime = int64(g.u32())
			p.LogStartOffset = int64(g.u32())
			for range g.u8() % 3 {
				p.ErrorRecords = append(p.ErrorRecords, kmsg.ProduceResponseTopicPartitionErrorRecord{
					RelativeOffset: int32(g.u32()), ErrorMessage: g.nullableStr(), UnknownTags: g.tags(),
				})
			}
			p.ErrorMessage = g.nullableStr()
			if g.u8()%2 == 0 {
				p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch = int32(g.u32()), int32(g.u32())
				p.CurrentLeader.UnknownTags = g.tags()
			}
			switch g.u8() % 4 { // the window: mostly well formed
			case 0, 1:
				SetBatchesToRetain(&p, int32(g.u8()%4)*100)
			case 2:
				p.UnknownTags.Set(tagBatchesToRetain, g.bytes(g.u8()%6))
			}
			if g.u8()%3 == 0 {
				p.UnknownTags.Set(2+uint32(g.u8()%4), g.bytes(g.u8()%4))
			}
			t.Partitions = append(t.Partitions, p)
		}
		t.UnknownTags = g.tags()
		r.Topics = append(r.Topics, t)
	}
	r.ThrottleMillis = int32(g.u32())
	for range g.u8() % 3 {
		r.Brokers = append(r.Brokers, kmsg.ProduceResponseBroker{
			NodeID: int32(g.u32()), Host: g.str(), Port: int32(g.u32()), Rack: g.nullableStr(), UnknownTags: g.tags(),
		})
	}
	r.UnknownTags = g.tags()
	return r
}

// decodeBoth decodes body at version with kmsg and with ours; both must
// accept it or both reject it, and accepted, give the same value.
func decodeBoth(t *testing.T, body []byte, version int16) *kmsg.ProduceResponse {
	t.Helper()
	want := kmsg.NewPtrProduceResponse()
	want.Version = version
	werr := want.ReadFrom(body)
	got, err := decodeProduceResponse(body, version)
	if werr != nil {
		require.Error(t, err, "v%d: kmsg rejects (%v), ours accepts", version, werr)
		require.Nil(t, got)
		return nil
	}
	require.NoError(t, err, "v%d: kmsg accepts, ours rejects", version)
	require.Equal(t, want, got, "v%d", version)
	return got
}

// checkWindows checks BatchesToRetain on every partition of r against the
// window bytes kmsg decoded into the partition's UnknownTags.
func checkWindows(t *testing.T, r *kmsg.ProduceResponse) {
	t.Helper()
	for i := range r.Topics {
		for j := range r.Topics[i].Partitions {
			p := &r.Topics[i].Partitions[j]
			var raw []byte
			found := false
			p.UnknownTags.Each(func(k uint32, v []byte) {
				if k == tagBatchesToRetain {
					raw, found = v, true
				}
			})
			n, present, err := BatchesToRetain(r.Version, p)
			switch {
			case r.Version < 14 || !found:
				require.NoError(t, err)
				require.False(t, present)
				require.Equal(t, int32(DefaultBatchesToRetain), n)
			case len(raw) != 4:
				require.ErrorIs(t, err, ErrMalformedResponse)
				require.False(t, present)
			default:
				require.NoError(t, err)
				require.True(t, present)
				require.Equal(t, int32(binary.BigEndian.Uint32(raw)), n)
			}
		}
	}
}

// FuzzProduceResponseDecoder holds our ProduceResponse decoder to kmsg's:
// the first byte picks the version (0 to MaxProduceVersion); the rest is
// decoded as a body by both, and also drives the building of a random
// response that kmsg encodes and both decode. Both must accept or both
// reject, and agree on every field; BatchesToRetain must read the window
// kmsg decoded.
func FuzzProduceResponseDecoder(f *testing.F) {
	for _, s := range produceDecoderSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		v := int16(data[0]) % (MaxProduceVersion + 1)
		if r := decodeBoth(t, data[1:], v); r != nil {
			checkWindows(t, r)
		}
		built := randomProduceResponse(&byteGen{src: data[1:]}, v)
		body := built.AppendTo(nil)
		r := decodeBoth(t, body, v)
		// An unknown top-level tag 0 is read back as NodeEndpoints, and
		// random bytes rarely decode as that; anything else must.
		if !(v >= 9 && hasTag(&built.UnknownTags, 0)) {
			require.NotNil(t, r, "v%d: a body kmsg encoded was rejected", v)
		}
		if r != nil {
			checkWindows(t, r)
		}
	})
}

// produceDecoderSeeds are bodies kmsg encoded from fixed and generated
// responses at every version, prefixed with the version byte.
func produceDecoderSeeds() [][]byte {
	var out [][]byte
	for v := range int16(MaxProduceVersion + 1) {
		r := produceResponse(v)
		if v >= 14 {
			SetBatchesToRetain(&r.Topics[0].Partitions[0], 64)
			r.Topics[0].Partitions[2].UnknownTags.Set(1, []byte{1, 2}) // malformed
		}
		out = append(out, append([]byte{byte(v)}, r.AppendTo(nil)...))
		g := make([]byte, 200)
		for i := range g {
			g[i] = byte(i*37 + int(v))
		}
		out = append(out, append([]byte{byte(v)}, g...))
		out = append(out, append([]byte{byte(v)}, randomProduceResponse(&byteGen{src: g}, v).AppendTo(nil)...))
	}
	return out
}

// TestDecodeProduceResponseEveryVersion decodes a response using every
// field, unknown tags at every level and every kind of window, at each
// version, and checks it against kmsg and against what was encoded.
func TestDecodeProduceResponseEveryVersion(t *testing.T) {
	resetSharedWindows(t)
	msg := "bad"
	for v := range int16(MaxProduceVersion + 1) {
		t.Run(fmt.Sprint("v", v), func(t *testing.T) {
			r := kmsg.NewPtrProduceResponse()
			r.Version = v
			r.ThrottleMillis = 77
			for ti := range 2 {
				tp := kmsg.NewProduceResponseTopic()
				tp.Topic = fmt.Sprint("topic-", ti)
				tp.TopicID = [16]byte{byte(ti + 1)}
				for pi := range int32(6) {
					p := kmsg.NewProduceResponseTopicPartition()
					p.Partition = pi
					p.BaseOffset = 1000 + int64(pi)
					p.LogAppendTime = 5
					p.LogStartOffset = 6
					switch pi {
					case 0:
						SetBatchesToRetain(&p, 200)
					case 1:
						SetBatchesToRetain(&p, 200)
						p.UnknownTags.Set(9, []byte{7})
					case 2:
						p.UnknownTags.Set(1, []byte{0, 1}) // malformed window
					case 3:
						p.ErrorCode = 6
						p.ErrorMessage = &msg
						p.ErrorRecords = []kmsg.ProduceResponseTopicPartitionErrorRecord{{RelativeOffset: 3, ErrorMessage: &msg}}
						p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch = 4, 8
						SetBatchesToRetain(&p, 300)
					case 4:
						SetBatchesToRetain(&p, 300)
					}
					tp.Partitions = append(tp.Partitions, p)
				}
				tp.UnknownTags.Set(5, []byte("t"))
				r.Topics = append(r.Topics, tp)
			}
			r.Brokers = []kmsg.ProduceResponseBroker{{NodeID: 4, Host: "h", Port: 9092, Rack: &msg}}
			r.UnknownTags.Set(3, []byte("top"))
			got := decodeBoth(t, r.AppendTo(nil), v)
			require.NotNil(t, got)
			checkWindows(t, got)
			require.Len(t, got.Topics, 2)
			for ti, tp := range got.Topics {
				if v >= 13 {
					assert.Equal(t, [16]byte{byte(ti + 1)}, tp.TopicID)
				} else {
					assert.Equal(t, fmt.Sprint("topic-", ti), tp.Topic)
				}
				require.Len(t, tp.Partitions, 6)
				p3 := tp.Partitions[3]
				assert.Equal(t, int64(1003), p3.BaseOffset)
				assert.Equal(t, int16(6), p3.ErrorCode)
				if v >= 8 {
					require.NotNil(t, p3.ErrorMessage)
					assert.Equal(t, msg, *p3.ErrorMessage)
					assert.Equal(t, int32(3), p3.ErrorRecords[0].RelativeOffset)
				}
				if v >= 9 {
					assert.Equal(t, int32(4), p3.CurrentLeader.LeaderID)
					assert.Equal(t, int32(8), p3.CurrentLeader.LeaderEpoch)
				}
			}
			if v >= 9 {
				require.Len(t, got.Brokers, 1)
				assert.Equal(t, "h", got.Brokers[0].Host)
			}
			if v >= 14 {
				// Partitions 0 and 4 of both topics hold only a window:
				// per value, one map.
				a, b := got.Topics[0].Partitions, got.Topics[1].Partitions
				assert.Equal(t, tagsID(&a[0].UnknownTags), tagsID(&b[0].UnknownTags))
				assert.Equal(t, tagsID(&a[4].UnknownTags), tagsID(&b[4].UnknownTags))
				assert.NotEqual(t, tagsID(&a[0].UnknownTags), tagsID(&a[4].UnknownTags))
				// With another tag or a bad length, a map of its own.
				assert.NotEqual(t, tagsID(&a[1].UnknownTags), tagsID(&b[1].UnknownTags))
				assert.NotEqual(t, tagsID(&a[2].UnknownTags), tagsID(&b[2].UnknownTags))
			}
		})
	}
}

// TestParseProduceResponseTruncated cuts a valid v14 frame at every length:
// each cut is an error wrapping ErrMalformedResponse, never a panic.
func TestParseProduceResponseTruncated(t *testing.T) {
	for _, v := range []int16{3, 8, 9, 13, 14} {
		r := produceResponse(v)
		if v >= 14 {
			SetBatchesToRetain(&r.Topics[0].Partitions[0], 64)
		}
		frame := AppendResponse(nil, 5, r)[4:]
		req := kmsg.NewPtrProduceRequest()
		req.Version = v
		_, err := ParseResponse(frame, req, 5)
		require.NoError(t, err)
		for n := range len(frame) {
			_, err := ParseResponse(frame[:n], req, 5)
			require.ErrorIs(t, err, ErrMalformedResponse, "v%d cut at %d of %d", v, n, len(frame))
		}
	}
}

// TestParseProduceResponseBadLengths gives huge and null array lengths and
// a window tag longer than the body: the same verdict as kmsg, and an
// error wrapping ErrMalformedResponse when rejected.
func TestParseProduceResponseBadLengths(t *testing.T) {
	v14 := func(parts ...byte) []byte { return parts }
	cases := map[string]struct {
		body []byte
		ok   bool
	}{
		"topics beyond the body": {v14(0x7f), false},
		"topics huge uvarint":    {v14(0xff, 0xff, 0xff, 0xff, 0x0f), false},
		"null topics":            {v14(0, 0, 0, 0, 0, 0), true},
		"partitions beyond":      {append(append([]byte{2}, make([]byte, 16)...), 0x7f), false},
		"window longer than body": {append(append(append([]byte{2}, make([]byte, 16)...), 2),
			append(make([]byte, 4+2+8+8+8), 1, 0, 1, 1, 0x7f, 0, 0, 0)...), false},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			got := decodeBoth(t, c.body, 14)
			require.Equal(t, c.ok, got != nil)
			frame := append([]byte{0, 0, 0, 1, 0}, c.body...)
			req := kmsg.NewPtrProduceRequest()
			req.Version = 14
			_, err := ParseResponse(frame, req, 1)
			if c.ok {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, ErrMalformedResponse)
			}
		})
	}
}

// manyPartitions returns a v14 response body with n partitions over
// topics topics, each carrying window w.
func manyPartitions(topics, n int, w int32) []byte {
	r := kmsg.NewPtrProduceResponse()
	r.Version = 14
	for ti := range topics {
		tp := kmsg.NewProduceResponseTopic()
		tp.TopicID = [16]byte{byte(ti), byte(ti >> 8)}
		for pi := range n / topics {
			p := kmsg.NewProduceResponseTopicPartition()
			p.Partition = int32(pi)
			p.BaseOffset = int64(pi) * 16
			p.UnknownTags = BatchesToRetainTags(w)
			tp.Partitions = append(tp.Partitions, p)
		}
		r.Topics = append(r.Topics, tp)
	}
	return r.AppendTo(nil)
}

// allocsPerPartition is the allocations of decoding and reading the window
// of every partition of a 1,000-partition body, minus those of a
// 10-partition one, per extra partition.
func allocsPerPartition(topics int, decode func([]byte) *kmsg.ProduceResponse) float64 {
	run := func(n int) float64 {
		body := manyPartitions(topics, n, 200)
		return testing.AllocsPerRun(20, func() {
			r := decode(body)
			for i := range r.Topics {
				for j := range r.Topics[i].Partitions {
					if w, ok, _ := BatchesToRetain(14, &r.Topics[i].Partitions[j]); !ok || w != 200 {
						panic("window lost")
					}
				}
			}
		})
	}
	return (run(topics*100) - run(topics)) / float64(topics*99)
}

// resetSharedWindows empties the cache of shared windows, as in a new
// process, so a test does not depend on the values earlier tests (and
// fuzzing) put there. Tags handed out before stay valid: BatchesToRetain
// reads them through Each.
func resetSharedWindows(t *testing.T) {
	windowsMu.Lock()
	windows.Store(nil)
	windowsMu.Unlock()
	t.Cleanup(func() {
		windowsMu.Lock()
		windows.Store(nil)
		windowsMu.Unlock()
	})
}

// TestParseProduceResponseWindowAllocs checks the promise of ParseResponse
// and BatchesToRetain: decoding a v14 response and reading every window
// allocates nothing per partition (per response and per topic only), with
// one topic or many. The negative control is kmsg's decoder, which
// allocates per partition, and which the same measure catches.
func TestParseProduceResponseWindowAllocs(t *testing.T) {
	resetSharedWindows(t)
	req := kmsg.NewPtrProduceRequest()
	req.Version = 14
	ours := func(body []byte) *kmsg.ProduceResponse {
		frame := append([]byte{0, 0, 0, 1, 0}, body...)
		r, err := ParseResponse(frame, req, 1)
		if err != nil {
			panic(err)
		}
		return r.(*kmsg.ProduceResponse)
	}
	theirs := func(body []byte) *kmsg.ProduceResponse {
		r := kmsg.NewPtrProduceResponse()
		r.Version = 14
		if err := r.ReadFrom(body); err != nil {
			panic(err)
		}
		return r
	}
	for _, topics := range []int{1, 10} {
		assert.Zero(t, allocsPerPartition(topics, ours), "%d topics", topics)
		assert.GreaterOrEqual(t, allocsPerPartition(topics, theirs), 1.0, "negative control, %d topics", topics)
	}
	p := kmsg.NewProduceResponseTopicPartition()
	p.UnknownTags, _ = sharedWindow(200)
	assert.Zero(t, testing.AllocsPerRun(100, func() { _, _, _ = BatchesToRetain(14, &p) }))
}

// TestSharedWindowsBounded sends more distinct windows than are shared:
// the cache stops growing and every partition still reads its own value,
// from many connections at once.
func TestSharedWindowsBounded(t *testing.T) {
	resetSharedWindows(t)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for w := range int32(2 * maxSharedWindows) {
				w = 10000 + w*4 + int32(g)%2 // goroutines 0/2 and 1/3 race on the same values
				r, err := decodeProduceResponse(manyPartitions(1, 3, w), 14)
				if !assert.NoError(t, err) {
					return
				}
				for j := range r.Topics[0].Partitions {
					n, present, err := BatchesToRetain(14, &r.Topics[0].Partitions[j])
					assert.NoError(t, err)
					assert.True(t, present)
					assert.Equal(t, w, n)
				}
			}
		}()
	}
	wg.Wait()
	require.Len(t, *windows.Load(), maxSharedWindows)
	// A value past the bound has a map per partition, still read right.
	r, err := decodeProduceResponse(manyPartitions(1, 2, -77), 14)
	require.NoError(t, err)
	ps := r.Topics[0].Partitions
	require.NotEqual(t, tagsID(&ps[0].UnknownTags), tagsID(&ps[1].UnknownTags))
	n, present, err := BatchesToRetain(14, &ps[1])
	require.NoError(t, err)
	require.True(t, present)
	require.Equal(t, int32(-77), n)
}

// TestSharedWindowActive fails if kmsg.Tags stops being a struct holding
// one map: sharing would silently be off (decoding stays correct but
// allocates per partition).
func TestSharedWindowActive(t *testing.T) {
	require.True(t, tagsIDWorks)
	a := BatchesToRetainTags(3)
	b := a
	require.NotZero(t, tagsID(&a))
	require.Equal(t, tagsID(&a), tagsID(&b))
	c := BatchesToRetainTags(3)
	require.NotEqual(t, tagsID(&a), tagsID(&c))
	var none kmsg.Tags
	require.Zero(t, tagsID(&none))
}

// BenchmarkParseProduceResponse decodes a v14 response for 1,000
// partitions (one topic, and 100 topics of 10) and reads every window, with
// this package's decoder and with kmsg's (the path before it), reporting
// allocations per partition.
func BenchmarkParseProduceResponse(b *testing.B) {
	for _, topics := range []int{1, 100} {
		body := manyPartitions(topics, 1000, 200)
		frame := append(kbin.AppendInt32(nil, 7), 0)
		frame = append(frame, body...)
		decoders := []struct {
			name   string
			decode func() (*kmsg.ProduceResponse, error)
		}{
			{"kmsg", func() (*kmsg.ProduceResponse, error) {
				r := kmsg.NewPtrProduceResponse()
				r.Version = 14
				return r, r.ReadFrom(body)
			}},
			{"longhaul", func() (*kmsg.ProduceResponse, error) {
				resp, err := parseResponseAt(frame, 0, 14, 7)
				if err != nil {
					return nil, err
				}
				return resp.(*kmsg.ProduceResponse), nil
			}},
		}
		for _, d := range decoders {
			b.Run(fmt.Sprintf("topics=%d/%s", topics, d.name), func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(int64(len(body)))
				var mallocs float64
				for b.Loop() {
					r, err := d.decode()
					if err != nil {
						b.Fatal(err)
					}
					for i := range r.Topics {
						for j := range r.Topics[i].Partitions {
							if _, ok, _ := BatchesToRetain(14, &r.Topics[i].Partitions[j]); !ok {
								b.Fatal("no window")
							}
						}
					}
				}
				mallocs = testing.AllocsPerRun(5, func() { _, _ = d.decode() })
				b.ReportMetric(mallocs/1000, "decode-allocs/partition")
			})
		}
	}
}

// TestConnProduceWindowThroughConn answers Produce v14 over a Conn with a
// good window on one partition and a 2-byte one on another: the response
// is delivered, BatchesToRetain reads the first and reports the second as
// ErrMalformedResponse, and the connection stays up (only a body that does
// not decode kills it).
func TestConnProduceWindowThroughConn(t *testing.T) {
	b := newFakeBroker(t)
	b.handle = func(h RequestHeader, req kmsg.Request, reply func(any)) {
		resp := produceResponse(h.Version)
		SetBatchesToRetain(&resp.Topics[0].Partitions[0], 40)
		resp.Topics[0].Partitions[1].UnknownTags.Set(tagBatchesToRetain, []byte{0, 9})
		reply(resp)
	}
	c := dialT(t, b.listen(), DialConfig{})
	for range 2 {
		req := kmsg.NewPtrProduceRequest()
		req.Acks = -1
		resp, err := c.Do(context.Background(), req)
		require.NoError(t, err)
		pr := resp.(*kmsg.ProduceResponse)
		require.Equal(t, int16(14), pr.Version)
		ps := pr.Topics[0].Partitions
		n, present, err := BatchesToRetain(14, &ps[0])
		require.NoError(t, err)
		require.True(t, present)
		require.Equal(t, int32(40), n)
		_, present, err = BatchesToRetain(14, &ps[1])
		require.ErrorIs(t, err, ErrMalformedResponse)
		require.False(t, present)
		require.NoError(t, c.Err())
	}
}

// TestDecodeProduceResponseCopiesStringsAliasesTags: decodeProduceResponse
// copies strings (topic names, error messages) and leaves unknown tag
// values aliasing src, as kmsg does: overwriting src after decoding
// changes the tag value and not the strings.
func TestDecodeProduceResponseCopiesStringsAliasesTags(t *testing.T) {
	r := kmsg.NewPtrProduceResponse()
	r.Version = 12
	tp := kmsg.NewProduceResponseTopic()
	tp.Topic = "orders"
	p := kmsg.NewProduceResponseTopicPartition()
	msg := "error message"
	p.ErrorMessage = &msg
	p.UnknownTags.Set(9, []byte("tag value"))
	tp.Partitions = append(tp.Partitions, p)
	r.Topics = append(r.Topics, tp)
	src := r.AppendTo(nil)
	got, err := decodeProduceResponse(src, 12)
	require.NoError(t, err)
	for i := range src {
		src[i] = 'X'
	}
	gp := got.Topics[0].Partitions[0]
	assert.Equal(t, "orders", got.Topics[0].Topic)
	require.NotNil(t, gp.ErrorMessage)
	assert.Equal(t, "error message", *gp.ErrorMessage)
	var tag []byte
	gp.UnknownTags.Each(func(key uint32, val []byte) {
		if key == 9 {
			tag = val
		}
	})
	assert.Equal(t, []byte("XXXXXXXXX"), tag, "the tag value aliases src")
}
