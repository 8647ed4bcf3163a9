package protocol

import (
	"encoding/binary"
	"reflect"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// This file decodes ProduceResponse bodies into kmsg's types without kmsg's
// per-partition cost. kmsg stores every tagged field it does not know in a
// new map per partition (kmsg.Tags.Set), and KIP-1269's window (tag 1) is
// in every partition of a v14 response, so decoding a response for 1,000
// partitions made 1,000 maps, and reading them back (kmsg.Tags.Each)
// allocated again. Here a partition whose only unknown tag is a well-formed
// window gets a kmsg.Tags shared by every partition with the same value
// ([sharedWindow]), which [BatchesToRetain] recognizes without Each. The
// decoder otherwise gives exactly what kmsg's ReadFrom gives, the same
// fields, the same nil-or-empty slices, the same accepted and rejected
// inputs; a differential fuzz test (FuzzProduceResponseDecoder) holds it to
// that.

// Smallest encodings of one array element, in bytes; an array whose length
// times its element's minimum exceeds what is left cannot be complete, so
// it is rejected before anything is allocated for it. They are the minima
// kmsg checks, and hold at every version they are used for.
const (
	minTopicV0       = 2  // topic name length, at least
	minTopicV13      = 18 // uuid, compact array length, tag count
	minPartitionV0   = 14 // partition, error code, base offset
	minPartitionV8   = 33 // + log append time, log start offset, record errors, error message (+ tags)
	minRecordError   = 6  // relative offset, error message (+ tags)
	minNodeEndpoints = 11 // node id, host, port, rack, tags
)

// decodeProduceResponse decodes a ProduceResponse body at version (0 to
// [MaxProduceVersion]) as kmsg's ReadFrom would, into a new response. All
// partitions share one backing array when the topics have similar
// partition counts.
// Strings are copied; tag values (unknown tags) alias src, as with kmsg.
// The error is kbin.ErrNotEnoughData for any malformed body.
func decodeProduceResponse(src []byte, version int16) (*kmsg.ProduceResponse, error) {
	r := kmsg.NewPtrProduceResponse()
	r.Version = version
	d := produceDecoder{b: kbin.Reader{Src: src}, version: version, flexible: version >= 9}
	if err := d.response(r); err != nil {
		return nil, err
	}
	return r, nil
}

type produceDecoder struct {
	b        kbin.Reader
	version  int16
	flexible bool
	spare    []kmsg.ProduceResponseTopicPartition // unused part of the partitions' backing array
}

// arrayLen reads an array length of elements of at least size bytes each;
// a negative length is a null array. A length that what is left cannot
// hold is an error, so a hostile length never sizes an allocation.
func (d *produceDecoder) arrayLen(size int64) (int32, error) {
	var n int32
	if d.flexible {
		n = d.b.CompactArrayLen()
	} else {
		n = d.b.ArrayLen()
	}
	if !d.b.Ok() || int64(n)*size > int64(len(d.b.Src)) {
		return 0, kbin.ErrNotEnoughData
	}
	return n, nil
}

func (d *produceDecoder) string() string {
	if d.flexible {
		return d.b.CompactString()
	}
	return d.b.String()
}

func (d *produceDecoder) nullableString() *string {
	if d.flexible {
		return d.b.CompactNullableString()
	}
	return d.b.NullableString()
}

// readTags reads a tagged-field section whose tags are all unknown.
func readTags(b *kbin.Reader) kmsg.Tags {
	var t kmsg.Tags
	for n := b.Uvarint(); n > 0 && b.Ok(); n-- {
		key, size := b.Uvarint(), b.Uvarint()
		t.Set(key, b.Span(int(size)))
	}
	return t
}

func (d *produceDecoder) response(r *kmsg.ProduceResponse) error {
	b := &d.b
	minTopic := int64(minTopicV0)
	if d.version >= 13 {
		minTopic = minTopicV13
	}
	n, err := d.arrayLen(minTopic)
	if err != nil {
		return err
	}
	if n > 0 {
		r.Topics = make([]kmsg.ProduceResponseTopic, n)
	}
	for i := range r.Topics {
		if err := d.topic(&r.Topics[i], len(r.Topics)-i); err != nil {
			return err
		}
	}
	if d.version >= 1 {
		r.ThrottleMillis = b.Int32()
	}
	if d.flexible {
		for n := b.Uvarint(); n > 0 && b.Ok(); n-- {
			key := b.Uvarint()
			val := b.Span(int(b.Uvarint()))
			if key != 0 {
				r.UnknownTags.Set(key, val)
				continue
			}
			if err := d.nodeEndpoints(r, val); err != nil {
				return err
			}
		}
	}
	return b.Complete()
}

// nodeEndpoints decodes NodeEndpoints (top-level tag 0, v10+; kmsg reads it
// at every flexible version) from its tag value.
func (d *produceDecoder) nodeEndpoints(r *kmsg.ProduceResponse, val []byte) error {
	outer := d.b
	defer func() { d.b = outer }()
	d.b = kbin.Reader{Src: val}
	b := &d.b
	n, err := d.arrayLen(minNodeEndpoints)
	if err != nil {
		return err
	}
	// A repeated tag 0 reuses the first one's array, as kmsg's does: the
	// differential test compares nil and empty slices too.
	r.Brokers = r.Brokers[:0]
	if n > 0 {
		r.Brokers = append(r.Brokers, make([]kmsg.ProduceResponseBroker, n)...)
	}
	for i := range r.Brokers {
		e := &r.Brokers[i]
		e.NodeID = b.Int32()
		e.Host = d.string()
		e.Port = b.Int32()
		e.Rack = d.nullableString()
		e.UnknownTags = readTags(b)
	}
	return b.Complete()
}

// topic decodes one topic; left counts it and the topics after it, to size
// the partitions' backing array.
func (d *produceDecoder) topic(t *kmsg.ProduceResponseTopic, left int) error {
	b := &d.b
	if d.version <= 12 {
		t.Topic = d.string()
	} else {
		t.TopicID = b.Uuid()
	}
	minPart := int64(minPartitionV0)
	if d.version >= 8 {
		minPart = minPartitionV8
	}
	n, err := d.arrayLen(minPart)
	if err != nil {
		return err
	}
	if n > 0 {
		t.Partitions = d.partitions(int(n), left, minPart)
	}
	for i := range t.Partitions {
		if err := d.partition(&t.Partitions[i]); err != nil {
			return err
		}
	}
	if d.flexible {
		t.UnknownTags = readTags(b)
	}
	return nil
}

// partitions returns n default partitions, cut from one backing array
// shared by the response's topics: it is sized for left topics of n
// partitions each, at most what the remaining bytes can hold, so a response
// whose topics have similar partition counts allocates once.
func (d *produceDecoder) partitions(n, left int, minPart int64) []kmsg.ProduceResponseTopicPartition {
	if cap(d.spare)-len(d.spare) < n {
		size := int64(n) * int64(left)
		size = min(size, int64(len(d.b.Src))/minPart)
		size = max(size, int64(n))
		d.spare = make([]kmsg.ProduceResponseTopicPartition, 0, size)
	}
	at := len(d.spare)
	d.spare = d.spare[:at+n]
	ps := d.spare[at : at+n : at+n]
	for i := range ps {
		ps[i].Default()
	}
	return ps
}

func (d *produceDecoder) partition(p *kmsg.ProduceResponseTopicPartition) error {
	b := &d.b
	p.Partition = b.Int32()
	p.ErrorCode = b.Int16()
	p.BaseOffset = b.Int64()
	if d.version >= 2 {
		p.LogAppendTime = b.Int64()
	}
	if d.version >= 5 {
		p.LogStartOffset = b.Int64()
	}
	if d.version >= 8 {
		n, err := d.arrayLen(minRecordError)
		if err != nil {
			return err
		}
		if n > 0 {
			p.ErrorRecords = make([]kmsg.ProduceResponseTopicPartitionErrorRecord, n)
		}
		for i := range p.ErrorRecords {
			e := &p.ErrorRecords[i]
			e.RelativeOffset = b.Int32()
			e.ErrorMessage = d.nullableString()
			if d.flexible {
				e.UnknownTags = readTags(b)
			}
		}
		p.ErrorMessage = d.nullableString()
	}
	if !d.flexible {
		return nil
	}
	// The window is kept aside while the tags are read so that a partition
	// whose only unknown tag is a well-formed window shares its Tags.
	var window []byte
	hasWindow := false
	for n := b.Uvarint(); n > 0 && b.Ok(); n-- {
		key := b.Uvarint()
		val := b.Span(int(b.Uvarint()))
		switch {
		case key == 0:
			if err := d.currentLeader(&p.CurrentLeader, val); err != nil {
				return err
			}
		case key == tagBatchesToRetain && d.version >= 14:
			window, hasWindow = val, true
		default:
			p.UnknownTags.Set(key, val)
		}
	}
	if hasWindow {
		// A broken body is rejected anyway: its value must not take a
		// place in the shared cache.
		if p.UnknownTags.Len() == 0 && len(window) == 4 && b.Ok() {
			if t, ok := sharedWindow(int32(binary.BigEndian.Uint32(window))); ok {
				p.UnknownTags = t
				return nil
			}
		}
		p.UnknownTags.Set(tagBatchesToRetain, window)
	}
	return nil
}

// currentLeader decodes CurrentLeader (partition tag 0, v10+; kmsg reads it
// at every flexible version) from its tag value.
func (d *produceDecoder) currentLeader(l *kmsg.ProduceResponseTopicPartitionCurrentLeader, val []byte) error {
	b := kbin.Reader{Src: val}
	l.Default()
	l.LeaderID = b.Int32()
	l.LeaderEpoch = b.Int32()
	l.UnknownTags = readTags(&b)
	return b.Complete()
}

// maxSharedWindows bounds how many distinct window values get a shared
// Tags, so that a broker sending ever new values cannot grow the cache; a
// value beyond it gets a Tags of its own, as kmsg would give.
const maxSharedWindows = 32

// windowEntry is a window value and the read-only Tags holding it.
type windowEntry struct {
	n    int32
	id   uintptr // tagsID(&tags)
	tags kmsg.Tags
}

var (
	// windows holds the shared Tags, copy on write: readers (decoders on
	// every connection, BatchesToRetain) load it without a lock, writers
	// hold windowsMu. An entry is never removed, so its map is never freed
	// and its id never names another map.
	windows   atomic.Pointer[[]windowEntry]
	windowsMu sync.Mutex
)

// sharedWindow returns the read-only Tags holding only tag 1 = n, the same
// one for every call with n, or false once maxSharedWindows values have
// one and n is not among them (or tagsID does not work).
func sharedWindow(n int32) (kmsg.Tags, bool) {
	if ws := windows.Load(); ws != nil {
		for i := range *ws {
			if e := &(*ws)[i]; e.n == n {
				return e.tags, true
			}
		}
	}
	if !tagsIDWorks {
		return kmsg.Tags{}, false
	}
	windowsMu.Lock()
	defer windowsMu.Unlock()
	var old []windowEntry
	if ws := windows.Load(); ws != nil {
		old = *ws
	}
	for i := range old {
		if old[i].n == n {
			return old[i].tags, true
		}
	}
	if len(old) >= maxSharedWindows {
		return kmsg.Tags{}, false
	}
	e := windowEntry{n: n, tags: BatchesToRetainTags(n)}
	e.id = tagsID(&e.tags)
	ws := append(append(make([]windowEntry, 0, len(old)+1), old...), e)
	windows.Store(&ws)
	return e.tags, true
}

// sharedWindowValue returns the window a Tags from sharedWindow holds, or
// false if t is not one of them.
func sharedWindowValue(t *kmsg.Tags) (int32, bool) {
	ws := windows.Load()
	if ws == nil || t.Len() != 1 || !tagsIDWorks {
		return 0, false
	}
	id := tagsID(t)
	for i := range *ws {
		if (*ws)[i].id == id {
			return (*ws)[i].n, true
		}
	}
	return 0, false
}

// tagsIDWorks reports whether kmsg.Tags is what tagsID expects: a struct
// holding one map. If a kmsg release changes that, sharing is off and
// decoding allocates per partition again, as kmsg does, without being
// wrong; TestSharedWindowActive fails to say so.
var tagsIDWorks = func() bool {
	t := reflect.TypeFor[kmsg.Tags]()
	return t.Kind() == reflect.Struct && t.NumField() == 1 && t.Field(0).Type.Kind() == reflect.Map
}()

// tagsID returns the identity of t's map (0 for none): copies of a Tags
// share their map, so a partition's UnknownTags holding a shared window
// has the id of the entry it was copied from. kmsg.Tags has no way to read
// one key without Each, which allocates and sorts; this is the reason for
// looking at its field. Reading a map's address through reflect does not
// need the field to be exported and does not allocate.
func tagsID(t *kmsg.Tags) uintptr {
	return reflect.ValueOf(t).Elem().Field(0).Pointer()
}
