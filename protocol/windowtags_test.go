package protocol

// Tests of the KIP-1269 window tag (tag 1 of a v14 partition response):
// ParseResponse's shared, read-only tags per window value,
// BatchesToRetainTags, SetBatchesToRetain on a decoded partition, and that
// no other package touches tag numbers.

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// parseV14 encodes r (v14) as a broker would and decodes it with
// ParseResponse.
func parseV14(t *testing.T, r *kmsg.ProduceResponse) *kmsg.ProduceResponse {
	t.Helper()
	frame := AppendResponse(nil, 9, r)
	req := kmsg.NewPtrProduceRequest()
	req.Version = 14
	resp, err := ParseResponse(frame[4:], req, 9)
	require.NoError(t, err)
	return resp.(*kmsg.ProduceResponse)
}

// windowsResponse is a v14 response whose partitions carry windows 7, 7
// and 9 alone, then 7 next to another unknown tag (5).
func windowsResponse() *kmsg.ProduceResponse {
	r := kmsg.NewPtrProduceResponse()
	r.Version = 14
	tp := kmsg.NewProduceResponseTopic()
	tp.TopicID = [16]byte{4}
	for i, w := range []int32{7, 7, 9, 7} {
		p := kmsg.NewProduceResponseTopicPartition()
		p.Partition = int32(i)
		SetBatchesToRetain(&p, w)
		if i == 3 {
			p.UnknownTags.Set(5, []byte("other"))
		}
		tp.Partitions = append(tp.Partitions, p)
	}
	r.Topics = append(r.Topics, tp)
	return r
}

// TestParseResponseSharesTagsPerWindowValue: at v14, partitions whose only
// unknown tag is the window share one UnknownTags per window value, within
// a response and across responses; a partition with another unknown tag
// gets a map of its own and still reads its window and its other tag.
func TestParseResponseSharesTagsPerWindowValue(t *testing.T) {
	resetSharedWindows(t)
	ps := parseV14(t, windowsResponse()).Topics[0].Partitions
	require.Len(t, ps, 4)
	id7 := tagsID(&ps[0].UnknownTags)
	require.NotZero(t, id7)
	assert.Equal(t, id7, tagsID(&ps[1].UnknownTags), "same window, one map")
	assert.NotEqual(t, id7, tagsID(&ps[2].UnknownTags), "another window, another map")
	assert.NotEqual(t, id7, tagsID(&ps[3].UnknownTags), "another unknown tag: a map of its own")
	assert.Equal(t, 2, ps[3].UnknownTags.Len())
	for i, want := range []int32{7, 7, 9, 7} {
		n, present, err := BatchesToRetain(14, &ps[i])
		require.NoError(t, err)
		require.True(t, present)
		assert.Equal(t, want, n, "partition %d", i)
	}
	var other []byte
	ps[3].UnknownTags.Each(func(key uint32, val []byte) {
		if key == 5 {
			other = val
		}
	})
	assert.Equal(t, []byte("other"), other)

	again := parseV14(t, windowsResponse()).Topics[0].Partitions
	assert.Equal(t, id7, tagsID(&again[0].UnknownTags), "shared across responses")
	assert.Equal(t, tagsID(&ps[2].UnknownTags), tagsID(&again[2].UnknownTags))

	// Below v14 tag 1 is not the window: nothing is shared (kmsg's map).
	r13 := windowsResponse()
	r13.Version = 13
	frame := AppendResponse(nil, 3, r13)
	req := kmsg.NewPtrProduceRequest()
	req.Version = 13
	resp, err := ParseResponse(frame[4:], req, 3)
	require.NoError(t, err)
	p13 := resp.(*kmsg.ProduceResponse).Topics[0].Partitions
	assert.NotEqual(t, id7, tagsID(&p13[0].UnknownTags))
}

// TestParseResponseSharedTagsAreReadOnly is the caution of ParseResponse
// made concrete: a Set on one partition's shared UnknownTags changes every
// partition with that window, in this response and in responses decoded
// later, which is why they must be treated as read-only.
func TestParseResponseSharedTagsAreReadOnly(t *testing.T) {
	resetSharedWindows(t)
	ps := parseV14(t, windowsResponse()).Topics[0].Partitions
	require.Equal(t, 1, ps[1].UnknownTags.Len())
	ps[0].UnknownTags.Set(6, []byte("x"))
	assert.Equal(t, 2, ps[1].UnknownTags.Len(), "the other partition with window 7 changed too")
	assert.Equal(t, 1, ps[2].UnknownTags.Len(), "window 9 is another map")
	later := parseV14(t, windowsResponse()).Topics[0].Partitions
	assert.Equal(t, 2, later[0].UnknownTags.Len(), "a later response shares the changed map")
}

// TestBatchesToRetainTagsContents: the returned Tags hold tag 1 alone, the
// window as a big-endian int32; copies share one map, so a Set on a copy
// changes what the original reads (the reason none may be modified while
// another is in use).
func TestBatchesToRetainTagsContents(t *testing.T) {
	for _, n := range []int32{0, 1, 5, -3, 1 << 30} {
		tags := BatchesToRetainTags(n)
		require.Equal(t, 1, tags.Len())
		tags.Each(func(key uint32, val []byte) {
			assert.Equal(t, uint32(1), key)
			assert.Equal(t, kbin.AppendInt32(nil, n), val)
		})
	}
	orig := BatchesToRetainTags(3)
	cp := orig
	cp.Set(tagBatchesToRetain, kbin.AppendInt32(nil, 4))
	p := kmsg.NewProduceResponseTopicPartition()
	p.UnknownTags = orig
	n, present, err := BatchesToRetain(14, &p)
	require.NoError(t, err)
	require.True(t, present)
	assert.Equal(t, int32(4), n, "the copy's Set is seen through the original")
}

// TestNoOtherPackageTouchesTagNumbers: the package doc says no other
// package touches tag numbers: outside protocol/, no non-test Go file of
// the repository sets, reads or deletes unknown tags by number. The same
// pattern finds this package's own uses (the check is not vacuous).
func TestNoOtherPackageTouchesTagNumbers(t *testing.T) {
	pat := regexp.MustCompile(`UnknownTags\.(Set|Each|Delete)\(|Tags\.(Set|Each|Delete)\(`)
	ours := 0
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); name == ".git" || name == "testdata" || name == "node_modules" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		n := len(pat.FindAllIndex(src, -1))
		if filepath.Dir(path) == filepath.Join("..", "protocol") {
			ours += n
			return nil
		}
		assert.Zero(t, n, "%s touches tagged fields by number", path)
		return nil
	})
	require.NoError(t, err)
	require.Positive(t, ours, "the pattern finds protocol's own uses")
}

// TestSetBatchesToRetainOnDecodedPartition: SetBatchesToRetain replaces the
// window of a partition ParseResponse decoded, whose tags are the shared,
// read-only map of its window value, without touching that map: the
// partition reads the new value, the other partition with the old window
// and a later response still read the old one.
func TestSetBatchesToRetainOnDecodedPartition(t *testing.T) {
	resetSharedWindows(t)
	ps := parseV14(t, windowsResponse()).Topics[0].Partitions
	old, _, err := BatchesToRetain(14, &ps[1])
	require.NoError(t, err)
	SetBatchesToRetain(&ps[0], 64)
	for i, want := range map[int]int32{0: 64, 1: old} {
		n, present, err := BatchesToRetain(14, &ps[i])
		require.NoError(t, err)
		require.True(t, present)
		assert.Equal(t, want, n, "partition %d", i)
	}
	later := parseV14(t, windowsResponse()).Topics[0].Partitions
	n, _, err := BatchesToRetain(14, &later[1])
	require.NoError(t, err)
	assert.Equal(t, old, n, "a later response's shared window is unchanged")
	later[1].UnknownTags.Each(func(_ uint32, val []byte) {
		assert.Equal(t, kbin.AppendInt32(nil, old), val, "the shared map's bytes are unchanged")
	})
}
