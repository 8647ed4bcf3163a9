package testkit

import (
	"bytes"
	"strconv"
)

// Value returns a record value that names its stream and its place in it:
// "id/seq/", padded with 'x' to size bytes. id names the stream (a
// producer, or a producer and partition) and must not be empty; the
// padding holds no '/', so [ParseValue] finds the identity again however
// the value was padded.
func Value(id string, seq uint64, size int) []byte {
	v := make([]byte, 0, max(size, len(id)+22))
	v = append(v, id...)
	v = append(v, '/')
	v = strconv.AppendUint(v, seq, 10)
	v = append(v, '/')
	for len(v) < size {
		v = append(v, 'x')
	}
	return v
}

// ParseValue is [Value]'s inverse: it returns the id and sequence of v and
// n, the length of the identity "id/seq/" (v[:n] is the value Value writes
// with size 0). ok is false for a value Value did not write. id aliases v.
func ParseValue(v []byte) (id []byte, seq uint64, n int, ok bool) {
	last := bytes.LastIndexByte(v, '/')
	if last < 0 {
		return nil, 0, 0, false
	}
	prev := bytes.LastIndexByte(v[:last], '/')
	digits := v[prev+1 : last]
	if prev < 1 || len(digits) == 0 || len(digits) > 1 && digits[0] == '0' {
		return nil, 0, 0, false // no id, no number, or not as Value writes it
	}
	for _, c := range digits {
		if c < '0' || c > '9' || seq > (1<<64-1-uint64(c-'0'))/10 {
			return nil, 0, 0, false
		}
		seq = seq*10 + uint64(c-'0')
	}
	return v[:prev], seq, last + 1, true
}
