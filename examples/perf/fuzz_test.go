package main

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
)

// escapeProperty writes s so that parseProperties reads it back as s.
// It works on bytes, so text that is not UTF-8 passes through unchanged.
func escapeProperty(s string, key bool) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\\' || c == '=' || c == ':' || c == '#' || c == '!':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c == ' ' && (key || i == 0):
			b.WriteString(`\ `)
		case c < 0x20 || c == 0x7f:
			fmt.Fprintf(&b, `\u%04x`, c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// FuzzParseProperties: any input parses or fails without panicking, and
// whatever parses, written back escaped, reads back the same.
func FuzzParseProperties(f *testing.F) {
	f.Add("a=1\nb : 2\nc 3\n")
	f.Add("# c\n! c\nk=v\\\n  w\n")
	f.Add("k\\=x=\\u0041\\t\\\\\n")
	f.Add("\\\n")
	f.Add("k=\\u12")
	f.Fuzz(func(t *testing.T, in string) {
		got, err := parseProperties(strings.NewReader(in))
		if err != nil {
			return
		}
		var b strings.Builder
		for _, k := range slices.Sorted(maps.Keys(got)) {
			b.WriteString(escapeProperty(k, true) + "=" + escapeProperty(got[k], false) + "\n")
		}
		again, err := parseProperties(strings.NewReader(b.String()))
		if err != nil {
			t.Fatalf("re-parse of %q: %v", b.String(), err)
		}
		if !maps.Equal(got, again) {
			t.Fatalf("round trip changed the properties:\n in %q\nmid %q\n got %q\nback %q", in, b.String(), got, again)
		}
	})
}
