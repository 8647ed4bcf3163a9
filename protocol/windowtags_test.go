package protocol

// Tests of the KIP-1269 window tag (tag 1 of a v14 partition response) on
// kmsg's types: BatchesToRetainTags, and that no other package touches tag
// numbers.

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
