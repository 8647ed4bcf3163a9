package protocol

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

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

// ask is one batch of a request: its topic and partition.
type ask struct {
	topic     string
	id        [16]byte
	partition int32
}

// requestFor is a ProduceRequest adding one (empty) batch per ask, in order.
func requestFor(asks []ask) *ProduceRequest {
	req := &ProduceRequest{Acks: -1}
	for _, a := range asks {
		req.Add(a.topic, a.id, a.partition, nil)
	}
	return req
}

// asksOf lists every partition of r, in order.
func asksOf(r *kmsg.ProduceResponse) []ask {
	var out []ask
	for _, t := range r.Topics {
		for _, p := range t.Partitions {
			out = append(out, ask{t.Topic, t.TopicID, p.Partition})
		}
	}
	return out
}

// perturb varies the asks for a response by mode: as answered, reversed,
// every other one, with a partition the response does not answer, or none.
func perturb(asks []ask, mode byte) []ask {
	asks = slices.Clone(asks)
	switch mode % 5 {
	case 1:
		slices.Reverse(asks)
	case 2:
		var half []ask
		for i := 0; i < len(asks); i += 2 {
			half = append(half, asks[i])
		}
		asks = half
	case 3:
		asks = append(asks, ask{"never", [16]byte{0xee}, -7})
	case 4:
		asks = nil
	}
	return asks
}

// wantResult is what decoding kr must give for asks, by ProduceResult's
// rules read naively: kmsg's values, each answer filling the next Add in
// wire order if it is for that partition, else the first unanswered one
// that is; answers for partitions not asked for dropped.
func wantResult(kr *kmsg.ProduceResponse, asks []ask) ProduceResult {
	v := kr.Version
	sameTopic := func(a ask, name string, id [16]byte) bool {
		if v >= 13 {
			return a.id == id
		}
		return a.topic == name
	}
	// Wire order: topics by first Add, batches by Add within a topic.
	var groups [][]int
	for i, a := range asks {
		g := slices.IndexFunc(groups, func(g []int) bool {
			return asks[g[0]].topic == a.topic && asks[g[0]].id == a.id
		})
		if g < 0 {
			groups = append(groups, nil)
			g = len(groups) - 1
		}
		groups[g] = append(groups[g], i)
	}
	var order []int
	for _, g := range groups {
		order = append(order, g...)
	}
	res := ProduceResult{Version: v, Throttle: time.Duration(kr.ThrottleMillis) * time.Millisecond}
	for _, a := range asks {
		res.Partitions = append(res.Partitions, ProducePartitionResult{
			Topic: a.topic, TopicID: a.id, Partition: a.partition,
			BaseOffset: -1, LogAppendTime: -1, LogStartOffset: -1,
			Window: DefaultBatchesToRetain, LeaderID: -1, LeaderEpoch: -1,
		})
	}
	next := 0
	for ti, t := range kr.Topics {
		// The request topic the answer names: the one at its position if
		// it matches, else the first that does.
		topic := -1
		if ti < len(groups) && sameTopic(asks[groups[ti][0]], t.Topic, t.TopicID) {
			topic = ti
		} else {
			topic = slices.IndexFunc(groups, func(g []int) bool { return sameTopic(asks[g[0]], t.Topic, t.TopicID) })
		}
		for j := range t.Partitions {
			kp := &t.Partitions[j]
			fits := func(at int) bool {
				i := order[at]
				return topic >= 0 && slices.Contains(groups[topic], i) &&
					asks[i].partition == kp.Partition && !res.Partitions[i].Answered
			}
			at := -1
			if next < len(order) && fits(next) {
				at = next
			} else {
				for k := range order {
					if fits(k) {
						at = k
						break
					}
				}
			}
			if at < 0 {
				continue
			}
			next = at + 1
			p := &res.Partitions[order[at]]
			p.Answered = true
			p.ErrorCode, p.BaseOffset = kp.ErrorCode, kp.BaseOffset
			p.LogAppendTime, p.LogStartOffset = kp.LogAppendTime, kp.LogStartOffset
			if kp.ErrorMessage != nil {
				p.ErrorMessage = *kp.ErrorMessage
			}
			for _, e := range kp.ErrorRecords {
				re := RecordError{RelativeOffset: e.RelativeOffset}
				if e.ErrorMessage != nil {
					re.Message = *e.ErrorMessage
				}
				p.RecordErrors = append(p.RecordErrors, re)
			}
			var err error
			p.Window, p.WindowPresent, err = BatchesToRetain(v, kp)
			p.WindowErr = err
			p.LeaderID, p.LeaderEpoch = kp.CurrentLeader.LeaderID, kp.CurrentLeader.LeaderEpoch
		}
	}
	for _, b := range kr.Brokers {
		e := NodeEndpoint{NodeID: b.NodeID, Host: b.Host, Port: b.Port}
		if b.Rack != nil {
			e.Rack = *b.Rack
		}
		res.NodeEndpoints = append(res.NodeEndpoints, e)
	}
	return res
}

// comparable returns r's exported fields with errors reduced to whether
// they are set, and empty slices as nil.
func comparableResult(r *ProduceResult) ProduceResult {
	out := ProduceResult{Version: r.Version, Throttle: r.Throttle}
	if len(r.NodeEndpoints) > 0 {
		out.NodeEndpoints = r.NodeEndpoints
	}
	for _, p := range r.Partitions {
		p.topic = 0
		if p.WindowErr != nil {
			if !errors.Is(p.WindowErr, ErrMalformedResponse) {
				panic("window error does not wrap ErrMalformedResponse")
			}
			p.WindowErr = ErrMalformedResponse
		}
		if len(p.RecordErrors) == 0 {
			p.RecordErrors = nil
		}
		out.Partitions = append(out.Partitions, p)
	}
	return out
}

// decodeResult decodes body at version for asks into a result that a
// previous, different answer used (so reset must clear it all).
func decodeResult(body []byte, version int16, asks []ask) (*ProduceResult, error) {
	res := &ProduceResult{}
	stale := []ask{{"stale", [16]byte{9}, 3}, {"stale", [16]byte{9}, 4}}
	res.reset(requestFor(stale), 14)
	res.Partitions[0].Answered, res.Partitions[0].ErrorCode = true, 7
	res.Partitions[1].RecordErrors = []RecordError{{1, "old"}}
	res.NodeEndpoints = []NodeEndpoint{{NodeID: 1}}
	res.Throttle = time.Hour
	res.reset(requestFor(asks), version)
	return res, res.decode(body)
}

// decodeBoth decodes body at version with kmsg and with ours for asks
// (and for none, and one unrelated partition): both must accept it or
// both reject it, whatever was asked, and accepted, agree on every value.
// It returns kmsg's decoding, nil if rejected.
func decodeBoth(t *testing.T, body []byte, version int16, asks func(*kmsg.ProduceResponse) []ask) *kmsg.ProduceResponse {
	t.Helper()
	want := kmsg.NewPtrProduceResponse()
	want.Version = version
	werr := want.ReadFrom(body)
	for _, a := range [][]ask{nil, {{"x", [16]byte{1}, 0}}} {
		_, err := decodeResult(body, version, a)
		require.Equal(t, werr == nil, err == nil, "v%d: kmsg %v, ours %v", version, werr, err)
	}
	if werr != nil {
		return nil
	}
	a := asks(want)
	got, err := decodeResult(body, version, a)
	require.NoError(t, err)
	require.Equal(t, comparableResult(ptr(wantResult(want, a))), comparableResult(got), "v%d", version)
	return want
}

func ptr[T any](v T) *T { return &v }

// FuzzProduceResponseDecoder holds the ProduceResult decoder to kmsg's
// ProduceResponse decoder: the first byte picks the version (0 to
// MaxProduceVersion) and how the asked partitions differ from the answered
// ones (perturb); the rest is decoded as a body by both, and also drives
// the building of a random response that kmsg encodes and both decode.
// Both must accept or both reject, and agree on every value, windows and
// their errors included.
func FuzzProduceResponseDecoder(f *testing.F) {
	for _, s := range produceDecoderSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		v := int16(data[0]) % (MaxProduceVersion + 1)
		mode := data[0] / (MaxProduceVersion + 1)
		asks := func(r *kmsg.ProduceResponse) []ask { return perturb(asksOf(r), mode) }
		decodeBoth(t, data[1:], v, asks)
		built := randomProduceResponse(&byteGen{src: data[1:]}, v)
		r := decodeBoth(t, built.AppendTo(nil), v, asks)
		// An unknown top-level tag 0 is read back as NodeEndpoints, and
		// random bytes rarely decode as that; anything else must.
		if !(v >= 9 && hasTag(&built.UnknownTags, 0)) {
			require.NotNil(t, r, "v%d: a body kmsg encoded was rejected", v)
		}
	})
}

// produceDecoderSeeds are bodies kmsg encoded from fixed and generated
// responses at every version, prefixed with the version (and perturb
// mode) byte.
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
		first := byte(v) + byte(v%5)*(MaxProduceVersion+1) // every perturb mode, over the versions
		out = append(out, append([]byte{first}, randomProduceResponse(&byteGen{src: g}, v).AppendTo(nil)...))
	}
	return out
}

// TestDecodeProduceResponseEveryVersion decodes a response using every
// field, unknown tags at every level and every kind of window, at each
// version, and checks it against kmsg and against what was encoded.
func TestDecodeProduceResponseEveryVersion(t *testing.T) {
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
			body := r.AppendTo(nil)
			require.NotNil(t, decodeBoth(t, body, v, asksOf))
			got, err := decodeResult(body, v, asksOf(r))
			require.NoError(t, err)
			require.Len(t, got.Partitions, 12)
			if v >= 1 {
				assert.Equal(t, 77*time.Millisecond, got.Throttle)
			}
			for ti := range 2 {
				ps := got.Partitions[ti*6 : ti*6+6]
				for pi, p := range ps {
					assert.True(t, p.Answered)
					assert.Equal(t, int64(1000+pi), p.BaseOffset)
				}
				p3 := ps[3]
				assert.Equal(t, int16(6), p3.ErrorCode)
				if v >= 8 {
					assert.Equal(t, msg, p3.ErrorMessage)
					assert.Equal(t, []RecordError{{3, msg}}, p3.RecordErrors)
				}
				if v >= 9 {
					assert.Equal(t, [2]int32{4, 8}, [2]int32{p3.LeaderID, p3.LeaderEpoch})
				}
				if v >= 14 {
					for pi, w := range map[int]int32{0: 200, 1: 200, 3: 300, 4: 300} {
						assert.True(t, ps[pi].WindowPresent)
						assert.Equal(t, w, ps[pi].Window)
					}
					assert.ErrorIs(t, ps[2].WindowErr, ErrMalformedResponse)
					assert.False(t, ps[2].WindowPresent)
					assert.False(t, ps[5].WindowPresent)
				} else {
					assert.False(t, ps[0].WindowPresent, "tag 1 is not the window before v14")
				}
			}
			if v >= 9 {
				assert.Equal(t, []NodeEndpoint{{4, "h", 9092, msg}}, got.NodeEndpoints)
			}
		})
	}
}

// TestProduceResultMatchesAnswersToAdds: Partitions[i] answers the i-th
// Add, whether the broker answers in wire order (topics grouped, Adds of
// two topics interleaved) or any other, by topic name (v < 13) or id
// (v13+); a partition the response leaves out stays unanswered, an answer
// for a partition not asked for is dropped, and two Adds of one partition
// take its answers in turn.
func TestProduceResultMatchesAnswersToAdds(t *testing.T) {
	a0, b0, a1 := ask{"a", [16]byte{1}, 0}, ask{"b", [16]byte{2}, 0}, ask{"a", [16]byte{1}, 1}
	asks := []ask{a0, b0, a1} // on the wire: a0, a1, b0
	answer := func(v int16, order ...ask) []byte {
		r := kmsg.NewPtrProduceResponse()
		r.Version = v
		for k, a := range order {
			rt := kmsg.NewProduceResponseTopic()
			rt.Topic, rt.TopicID = a.topic, a.id
			rp := kmsg.NewProduceResponseTopicPartition()
			rp.Partition, rp.BaseOffset = a.partition, int64(100*(k+1))
			rt.Partitions = append(rt.Partitions, rp)
			r.Topics = append(r.Topics, rt)
		}
		return r.AppendTo(nil)
	}
	offsets := func(r *ProduceResult) []int64 {
		var out []int64
		for _, p := range r.Partitions {
			out = append(out, p.BaseOffset)
		}
		return out
	}
	for _, v := range []int16{9, 13} {
		r, err := decodeResult(answer(v, a0, a1, b0), v, asks)
		require.NoError(t, err)
		assert.Equal(t, []int64{100, 300, 200}, offsets(r), "v%d wire order", v)
		for i, p := range r.Partitions {
			assert.Equal(t, asks[i], ask{p.Topic, p.TopicID, p.Partition})
			assert.True(t, p.Answered)
		}
		r, err = decodeResult(answer(v, b0, a1, a0), v, asks)
		require.NoError(t, err)
		assert.Equal(t, []int64{300, 100, 200}, offsets(r), "v%d reversed", v)

		r, err = decodeResult(answer(v, a0, ask{"c", [16]byte{3}, 0}, b0), v, asks)
		require.NoError(t, err)
		assert.Equal(t, []int64{100, 300, -1}, offsets(r), "v%d: a1 left out, c not asked", v)
		assert.False(t, r.Partitions[2].Answered)

		r, err = decodeResult(answer(v, a0, a0), v, []ask{a0, a0})
		require.NoError(t, err)
		assert.Equal(t, []int64{100, 200}, offsets(r), "v%d: one partition added twice", v)
	}
	// By name before v13, by id from v13: an answer naming the topic the
	// other way is not for it.
	wrongID := ask{"a", [16]byte{7}, 0}
	r, err := decodeResult(answer(12, wrongID), 12, []ask{a0})
	require.NoError(t, err)
	assert.True(t, r.Partitions[0].Answered, "v12 matches by name")
	r, err = decodeResult(answer(13, wrongID), 13, []ask{a0})
	require.NoError(t, err)
	assert.False(t, r.Partitions[0].Answered, "v13 matches by id")
}

// TestParseProduceResponseTruncated cuts a valid frame at every length:
// each cut is an error wrapping ErrMalformedResponse, never a panic.
func TestParseProduceResponseTruncated(t *testing.T) {
	for _, v := range []int16{3, 8, 9, 13, 14} {
		r := produceResponse(v)
		if v >= 14 {
			SetBatchesToRetain(&r.Topics[0].Partitions[0], 64)
		}
		frame := AppendResponse(nil, 5, r)[4:]
		res := &ProduceResult{}
		asks := asksOf(r)
		res.reset(requestFor(asks), v)
		require.NoError(t, decodeProduceFrame(frame, v, 5, res))
		require.Error(t, decodeProduceFrame(frame, v, 6, res), "another correlation id")
		for n := range len(frame) {
			res.reset(requestFor(asks), v)
			err := decodeProduceFrame(frame[:n], v, 5, res)
			require.ErrorIs(t, err, ErrMalformedResponse, "v%d cut at %d of %d", v, n, len(frame))
		}
	}
}

// TestParseProduceResponseBadLengths gives huge and null array lengths and
// a window tag longer than the body: the same verdict as kmsg.
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
			got := decodeBoth(t, c.body, 14, asksOf)
			require.Equal(t, c.ok, got != nil)
		})
	}
}

// manyPartitions returns a v14 response body with n partitions over
// topics topics, each carrying window w, and the asks it answers.
func manyPartitions(topics, n int, w int32) ([]byte, []ask) {
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
	return r.AppendTo(nil), asksOf(r)
}

// TestProduceResultDecodeAllocs: decoding a v14 answer with a window per
// partition into a reused ProduceResult allocates nothing at all, with one
// topic or many. The negative control is kmsg's decoder, which allocates
// per partition, and which the same measure catches.
func TestProduceResultDecodeAllocs(t *testing.T) {
	for _, topics := range []int{1, 10} {
		body, asks := manyPartitions(topics, 1000, 200)
		res := &ProduceResult{}
		req := requestFor(asks)
		ours := testing.AllocsPerRun(20, func() {
			res.reset(req, 14)
			if err := res.decode(body); err != nil || !res.Partitions[999].WindowPresent {
				panic("not decoded")
			}
		})
		assert.Zero(t, ours, "%d topics", topics)
		theirs := testing.AllocsPerRun(5, func() {
			r := kmsg.NewPtrProduceResponse()
			r.Version = 14
			if err := r.ReadFrom(body); err != nil {
				panic(err)
			}
		})
		assert.GreaterOrEqual(t, theirs/1000, 1.0, "negative control, %d topics", topics)
	}
}

// BenchmarkParseProduceResponse decodes a v14 response for 1,000
// partitions (one topic, and 100 topics of 10) with kmsg's decoder and
// into a reused ProduceResult, reporting allocations per partition.
func BenchmarkParseProduceResponse(b *testing.B) {
	for _, topics := range []int{1, 100} {
		body, asks := manyPartitions(topics, 1000, 200)
		res := &ProduceResult{}
		req := requestFor(asks)
		decoders := []struct {
			name   string
			decode func() error
		}{
			{"kmsg", func() error {
				r := kmsg.NewPtrProduceResponse()
				r.Version = 14
				return r.ReadFrom(body)
			}},
			{"longhaul", func() error {
				res.reset(req, 14)
				return res.decode(body)
			}},
		}
		for _, d := range decoders {
			b.Run(fmt.Sprintf("topics=%d/%s", topics, d.name), func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(int64(len(body)))
				for b.Loop() {
					if err := d.decode(); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(testing.AllocsPerRun(5, func() { _ = d.decode() })/1000, "decode-allocs/partition")
			})
		}
	}
}

// TestConnProduceWindowThroughConn answers Produce v14 over a Conn with a
// good window on one partition and a 2-byte one on another: the answer is
// delivered, the first window read and the second reported as
// ErrMalformedResponse, and the connection stays up (only a body that does
// not decode kills it). The same result, reused, reads the second answer.
func TestConnProduceWindowThroughConn(t *testing.T) {
	b := newFakeBroker(t)
	b.handle = func(h RequestHeader, req kmsg.Request, reply func(any)) {
		resp := produceResponse(h.Version)
		resp.ThrottleMillis = 12
		SetBatchesToRetain(&resp.Topics[0].Partitions[0], 40)
		resp.Topics[0].Partitions[1].UnknownTags.Set(tagBatchesToRetain, []byte{0, 9})
		reply(resp)
	}
	c := dialT(t, b.listen(), DialConfig{})
	req := &ProduceRequest{Acks: -1, Timeout: time.Second}
	res := &ProduceResult{}
	for range 2 {
		req.Reset()
		for p := range int32(3) {
			req.Add("orders", [16]byte{1, 2, 3}, p, []byte("batch"))
		}
		errc := make(chan error, 1)
		c.Produce(req, res, 10*time.Second, func(err error) { errc <- err })
		require.NoError(t, <-errc)
		require.Equal(t, int16(14), res.Version)
		require.Equal(t, 12*time.Millisecond, res.Throttle)
		ps := res.Partitions
		require.Len(t, ps, 3)
		require.True(t, ps[0].WindowPresent)
		require.Equal(t, int32(40), ps[0].Window)
		require.ErrorIs(t, ps[1].WindowErr, ErrMalformedResponse)
		require.False(t, ps[1].WindowPresent)
		require.Equal(t, int32(DefaultBatchesToRetain), ps[1].Window)
		require.Equal(t, [2]int32{7, 9}, [2]int32{ps[1].LeaderID, ps[1].LeaderEpoch})
		require.Equal(t, int64(200), ps[2].BaseOffset)
		require.NoError(t, c.Err())
	}
}

// TestConnProduceBelowV3Refused: a broker negotiating Produce below v3
// cannot take idempotent batches; Produce completes with
// ErrUnsupportedVersion without sending anything.
func TestConnProduceBelowV3Refused(t *testing.T) {
	b := newFakeBroker(t)
	b.keys = withKey(b.keys, 0, 0, 2)
	b.handle = func(RequestHeader, kmsg.Request, func(any)) { t.Error("a request was sent") }
	c := dialT(t, b.listen(), DialConfig{})
	errc := make(chan error, 1)
	c.Produce(&ProduceRequest{Acks: -1}, &ProduceResult{}, time.Second, func(err error) { errc <- err })
	require.ErrorIs(t, <-errc, ErrUnsupportedVersion)
}

// TestProduceResultCopiesStrings: the result copies what it keeps of the
// frame (error messages, record errors, endpoints), so the connection may
// read the next frame into the same buffer: overwriting the body after
// decoding changes nothing.
func TestProduceResultCopiesStrings(t *testing.T) {
	r := kmsg.NewPtrProduceResponse()
	r.Version = 12
	tp := kmsg.NewProduceResponseTopic()
	tp.Topic = "orders"
	p := kmsg.NewProduceResponseTopicPartition()
	msg, rack := "error message", "rack"
	p.ErrorMessage = &msg
	p.ErrorRecords = []kmsg.ProduceResponseTopicPartitionErrorRecord{{RelativeOffset: 1, ErrorMessage: &msg}}
	tp.Partitions = append(tp.Partitions, p)
	r.Topics = append(r.Topics, tp)
	r.Brokers = []kmsg.ProduceResponseBroker{{NodeID: 1, Host: "host", Rack: &rack}}
	src := r.AppendTo(nil)
	got, err := decodeResult(src, 12, asksOf(r))
	require.NoError(t, err)
	for i := range src {
		src[i] = 'X'
	}
	gp := got.Partitions[0]
	assert.Equal(t, "error message", gp.ErrorMessage)
	assert.Equal(t, []RecordError{{1, "error message"}}, gp.RecordErrors)
	assert.Equal(t, []NodeEndpoint{{NodeID: 1, Host: "host", Rack: "rack"}}, got.NodeEndpoints)
}

// TestProduceResultNodeEndpointsTag: NodeEndpoints is read from top-level
// tag 0 wherever it comes among unknown tags, and is nil when the tag holds
// no broker (as when it is absent).
func TestProduceResultNodeEndpointsTag(t *testing.T) {
	endpoints := func(n int) []byte {
		b := kbin.AppendCompactArrayLen(nil, n)
		for i := range n {
			b = kbin.AppendInt32(b, int32(i+1))
			b = kbin.AppendCompactString(b, "h")
			b = kbin.AppendInt32(b, 9092)
			b = kbin.AppendCompactNullableString(b, nil)
			b = append(b, 0)
		}
		return b
	}
	body := func(tags ...[]byte) []byte {
		b := kbin.AppendCompactArrayLen(nil, 0) // no topics
		b = kbin.AppendInt32(b, 0)              // throttle
		b = kbin.AppendUvarint(b, uint32(len(tags)/2))
		for i := 0; i < len(tags); i += 2 {
			b = kbin.AppendUvarint(b, uint32(tags[i][0]))
			b = kbin.AppendUvarint(b, uint32(len(tags[i+1])))
			b = append(b, tags[i+1]...)
		}
		return b
	}
	r, err := decodeResult(body([]byte{3}, []byte("x"), []byte{0}, endpoints(2)), 10, nil)
	require.NoError(t, err)
	require.Equal(t, []NodeEndpoint{{1, "h", 9092, ""}, {2, "h", 9092, ""}}, r.NodeEndpoints, "tag 0 after an unknown tag")
	r, err = decodeResult(body([]byte{0}, endpoints(0)), 10, nil)
	require.NoError(t, err)
	require.Nil(t, r.NodeEndpoints, "no broker in the tag")
}
