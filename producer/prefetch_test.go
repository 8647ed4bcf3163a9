package producer

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPrefetchChangesNoByte checks prefetch's promise that it changes no
// byte, for every start within a line and lengths around line boundaries,
// with the bytes right after the range as a guard (an instruction that
// wrote, or ran past the end, would show in either).
func TestPrefetchChangesNoByte(t *testing.T) {
	buf := make([]byte, 1024)
	for i := range buf {
		buf[i] = byte(i*7 + 1)
	}
	want := bytes.Clone(buf)
	prefetch(nil)
	prefetch(buf[:0])
	for start := 0; start < 64; start++ {
		for _, n := range []int{1, 63, 64, 65, 128, 500} {
			prefetch(buf[start : start+n])
		}
	}
	require.Equal(t, want, buf)
}
