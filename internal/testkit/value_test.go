package testkit

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestValueRoundTrip: ParseValue finds the id, sequence and identity
// length of every value Value writes, padded or not, and rejects values
// Value cannot write.
func TestValueRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		id   string
		seq  uint64
		size int
	}{{"0", 0, 0}, {"3", 12345, 100}, {"p0/7", 1 << 40, 24}, {"tail1/2", 99, 3}, {"a", 1<<64 - 1, 0}} {
		v := Value(tc.id, tc.seq, tc.size)
		assert.GreaterOrEqual(t, len(v), tc.size)
		id, seq, n, ok := ParseValue(v)
		require.True(t, ok, "%q", v)
		assert.Equal(t, tc.id, string(id))
		assert.Equal(t, tc.seq, seq)
		assert.Equal(t, string(Value(tc.id, tc.seq, 0)), string(v[:n]))
	}
	for _, bad := range []string{"", "x", "1/", "/1/", "1/x/", "1//", "a/18446744073709551616/", "a/1x/", "a/01/"} {
		_, _, _, ok := ParseValue([]byte(bad))
		assert.False(t, ok, "%q parsed", bad)
	}
}

// FuzzParseValue: ParseValue never panics, and whatever it accepts,
// Value writes again to the same identity.
func FuzzParseValue(f *testing.F) {
	f.Add([]byte("p0/1/xxxx"))
	f.Add([]byte("//"))
	f.Fuzz(func(t *testing.T, v []byte) {
		id, seq, n, ok := ParseValue(v)
		if ok {
			require.Equal(t, string(v[:n]), string(Value(string(id), seq, 0)))
		}
	})
}
