package jaas

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestJAASParsesAsJava checks Parse against what Kafka's JaasConfig
// (java.io.StreamTokenizer) makes of each value: the same options where
// Java accepts it, an error where Java throws. The regular expression it
// replaced took only quoted values, kept Java's escapes such as \t or \101
// as written, read options inside comments, and took values Java rejects
// (no ';', two modules, a bad control flag).
func TestJAASParsesAsJava(t *testing.T) {
	const m = "org.apache.kafka.common.security.plain.PlainLoginModule"
	for _, tc := range []struct {
		in   string
		want map[string]string // nil: an error
	}{
		{m + ` required username="u" password="p";`, map[string]string{"username": "u", "password": "p"}},
		{m + ` REQUIRED username='u' password='p w';`, map[string]string{"username": "u", "password": "p w"}},
		{m + ` optional;`, map[string]string{}},
		// Words need no quotes: letters, digits, '.', '-', '_', '$'.
		{m + ` required username=alice password=s3cr-et_$.x;`, map[string]string{"username": "alice", "password": "s3cr-et_$.x"}},
		{m + ` required username="a"password="b";`, map[string]string{"username": "a", "password": "b"}},
		{m + "\n  required\n  username=\"u\"\n  password=\"p\";\n", map[string]string{"username": "u", "password": "p"}},
		// Java's escapes.
		{m + ` required password="a\\b\"c\'d";`, map[string]string{"password": `a\b"c'd`}},
		{m + ` required password="\t\n\r\b\f\a\v";`, map[string]string{"password": "\t\n\r\b\f\a\v"}},
		{m + ` required password="\101\1012\477\8\q";`, map[string]string{"password": "AA2'78q"}},
		{m + ` required password='é€😀' user=héllo;`, map[string]string{"password": "é€😀", "user": "héllo"}},
		// A quoted string ends at a line end, unterminated.
		{m + " required password=\"ab\n;", map[string]string{"password": "ab"}},
		// Comments.
		{m + ` required /* username="x" */ username="u"; // password="p"`, map[string]string{"username": "u"}},
		{m + " required username=\"u\" / anything\npassword=\"p\";", map[string]string{"username": "u", "password": "p"}},
		{m + " required username=\"u\" /\npassword=\"p\"\n;", map[string]string{"username": "u"}}, // a lone '/' before a line end skips the next line too, as in Java
		// Java rejects these.
		{``, nil},
		{`   `, nil},
		{m + ` required username="u"`, nil},                      // no ';'
		{m + ` mandatory username="u";`, nil},                    // control flag
		{m + ` required username=123;`, nil},                     // a number has no string value
		{m + ` required username=-u;`, nil},                      // '-' alone, then a word
		{m + ` required username;`, nil},                         // no value
		{m + ` required username=;`, nil},                        // no value
		{m + ` required = "u";`, nil},                            // no name
		{m + ` required username="u"; ` + m + ` required;`, nil}, // two modules
		{`"` + m + `" required;`, map[string]string{}},           // a quoted class name is a name
		{`123 required;`, nil},
		{m + ` required /* unterminated`, nil},
	} {
		e, err := Parse(tc.in)
		if tc.want == nil {
			require.Error(t, err, "%q", tc.in)
			continue
		}
		require.NoError(t, err, "%q", tc.in)
		require.Equal(t, tc.want, e.Options, "%q", tc.in)
	}
}

// javaQuote writes s as a double-quoted JAAS string Java reads back as s:
// backslash, quote and line ends escaped.
func javaQuote(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`, "\r", `\r`)
	return `"` + r.Replace(s) + `"`
}

// FuzzParseJAAS: Parse never panics; what it accepts names a module
// and a valid flag; and any options written with javaQuote (names as
// quoted strings too) read back exactly.
func FuzzParseJAAS(f *testing.F) {
	f.Add(`org.Foo required username="u" password="p";`, "u", "p\"\\\n")
	f.Add(`x required a=b /* c */ d='e\101';`, "", "\x00\t")
	f.Add(`// c`+"\n"+`x optional k="\477";`, "é", "😀")
	f.Fuzz(func(t *testing.T, in, k, v string) {
		if e, err := Parse(in); err == nil {
			require.NotEmpty(t, e.Flag)
			require.NotNil(t, e.Options)
		}
		if !utf8.ValidString(k) || !utf8.ValidString(v) {
			return // Java strings hold characters, not bytes
		}
		want := map[string]string{k: v, "password": k + v}
		keys := make([]string, 0, len(want))
		for key := range want {
			keys = append(keys, key)
		}
		sort.Strings(keys)
		var b strings.Builder
		b.WriteString("org.Foo required")
		for _, key := range keys {
			fmt.Fprintf(&b, " %s=%s", javaQuote(key), javaQuote(want[key]))
		}
		b.WriteString(";")
		e, err := Parse(b.String())
		require.NoError(t, err, "%q", b.String())
		require.Equal(t, want, e.Options, "%q", b.String())
	})
}

// TestJAASQuotes: JAAS option values in single quotes read as in
// double quotes, as Java's JAAS parser does; escaped quotes are kept.
func TestJAASQuotes(t *testing.T) {
	options := func(s string) map[string]string {
		e, err := Parse(s)
		require.NoError(t, err)
		return e.Options
	}
	assert.Equal(t, map[string]string{"username": "u", "password": "p w"},
		options(`x.PlainLoginModule required username='u' password='p w';`))
	assert.Equal(t, map[string]string{"username": `a'b`, "password": `c"d`},
		options(`x.PlainLoginModule required username='a\'b' password="c\"d";`))
}
