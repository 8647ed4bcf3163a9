// Package jaas reads a Java JAAS login configuration (Kafka's
// sasl.jaas.config) as the Java client does, so a value pasted from a Java
// config gives the same login options, and one Java rejects is an error.
package jaas

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Entry is the one login module of a sasl.jaas.config value.
type Entry struct {
	Module  string            // login module class
	Flag    string            // control flag, upper case: REQUIRED, REQUISITE, SUFFICIENT or OPTIONAL
	Options map[string]string // key=value options, never nil
}

// Parse reads a sasl.jaas.config value as the Java client does (Kafka's
// JaasConfig on java.io.StreamTokenizer, then JaasContext's check of one
// module), so a value that works there gives the same options here and one
// Java rejects is an error: "<module> <flag> [key=value]... ;". Values are
// words (letters, digits, '.', '-', '_', '$'; not starting with a digit,
// '.' or '-') or strings in double or single quotes with Java's escapes
// (\n, \t, \b, \f, \r, \a, \v, octal \0 to \377, and \ before any other
// character for that character); a string ends at its quote, a line end
// or the end. Comments /* ... */, // ... and a lone / to the line end are
// skipped.
func Parse(s string) (Entry, error) {
	tz := tokenizer{s: s}
	var entries []Entry
	for tz.next() != tokEOF {
		e, err := tz.entry()
		if err != nil {
			return Entry{}, err
		}
		entries = append(entries, e)
	}
	switch len(entries) {
	case 0:
		return Entry{}, fmt.Errorf("login module not specified")
	case 1:
		return entries[0], nil
	}
	return Entry{}, fmt.Errorf("%d login modules, should be 1", len(entries))
}

// Token types of tokenizer besides ordinary characters (their code).
const (
	tokEOF    = -1
	tokWord   = -3
	tokNumber = -2
)

// tokenizer is java.io.StreamTokenizer as Kafka's JaasConfig sets it
// up, over a Go string read as runes.
type tokenizer struct {
	s    string
	pos  int
	prev int    // pos before the last read (unread)
	typ  int    // the last token: tokEOF, tokWord, tokNumber, a quote or another character
	sval string // the word or the quoted string; "" otherwise
	sok  bool   // sval is set (Java's sval != null)
}

// entry reads one login module after its first token (tz.next was called).
func (tz *tokenizer) entry() (Entry, error) {
	if !tz.sok {
		return Entry{}, fmt.Errorf("login module class expected, found %s", tz.describe())
	}
	e := Entry{Module: tz.sval, Options: map[string]string{}}
	if tz.next() == tokEOF {
		return Entry{}, fmt.Errorf("login module control flag not specified")
	}
	switch f := strings.ToUpper(tz.sval); {
	case tz.sok && (f == "REQUIRED" || f == "REQUISITE" || f == "SUFFICIENT" || f == "OPTIONAL"):
		e.Flag = f
	default:
		return Entry{}, fmt.Errorf("invalid login module control flag %s: want required, requisite, sufficient or optional", tz.describe())
	}
	for tz.next() != tokEOF && tz.typ != ';' {
		if !tz.sok {
			return Entry{}, fmt.Errorf("option name expected, found %s", tz.describe())
		}
		key := tz.sval
		if tz.next() != '=' || tz.next() == tokEOF || !tz.sok {
			return Entry{}, fmt.Errorf("value not specified for key %q (quote values that start with a digit, '.' or '-')", key)
		}
		e.Options[key] = tz.sval
	}
	if tz.typ != ';' {
		return Entry{}, fmt.Errorf("entry not terminated by ';'")
	}
	return e, nil
}

// describe names the last token for an error.
func (tz *tokenizer) describe() string {
	switch {
	case tz.typ == tokEOF:
		return "the end"
	case tz.typ == tokNumber:
		return "a number"
	case tz.sok:
		return fmt.Sprintf("%q", tz.sval)
	}
	return fmt.Sprintf("%q", rune(tz.typ))
}

// Character classes of StreamTokenizer's table after Kafka's setup.
const (
	classWhite = 1 << iota
	classDigit
	classAlpha
	classQuote
	classComment
)

// charClass is c's class: whitespace 0..' ', words 'a'-'z', 'A'-'Z', 160
// and above, '-', '_', '$'; number characters '0'-'9', '.', '-'; quotes
// '"' and '\”; '/' a comment character.
func charClass(c rune) int {
	switch {
	case c >= 256 || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 160 || c == '_' || c == '$':
		return classAlpha
	case c == '-':
		return classAlpha | classDigit
	case c >= '0' && c <= '9' || c == '.':
		return classDigit
	case c >= 0 && c <= ' ':
		return classWhite
	case c == '"' || c == '\'':
		return classQuote
	case c == '/':
		return classComment
	}
	return 0
}

// read returns the next rune, or -1 at the end.
func (tz *tokenizer) read() rune {
	tz.prev = tz.pos
	if tz.pos >= len(tz.s) {
		return -1
	}
	r, n := utf8.DecodeRuneInString(tz.s[tz.pos:])
	tz.pos += n
	return r
}

// unread steps back over the rune read last (StreamTokenizer's peekc).
func (tz *tokenizer) unread() { tz.pos = tz.prev }

// next reads the next token into tz and returns its type.
func (tz *tokenizer) next() int {
	tz.sval, tz.sok = "", false
	c := tz.read()
	for c >= 0 && charClass(c)&classWhite != 0 {
		c = tz.read()
	}
	start := tz.prev
	ct := charClass(c)
	switch {
	case c < 0:
		tz.typ = tokEOF
	case ct&classDigit != 0:
		if c == '-' {
			c = tz.read()
			if c != '.' && (c < '0' || c > '9') {
				tz.unread()
				tz.typ = '-'
				return tz.typ
			}
		}
		// A number: digits with at most one '.'; no sval.
		dot := false
		for c >= '0' && c <= '9' || c == '.' && !dot {
			dot = dot || c == '.'
			c = tz.read()
		}
		tz.unread()
		tz.typ = tokNumber
	case ct&classAlpha != 0:
		for c >= 0 && charClass(c)&(classAlpha|classDigit) != 0 {
			c = tz.read()
		}
		tz.unread()
		tz.typ, tz.sval, tz.sok = tokWord, strings.ToValidUTF8(tz.s[start:tz.pos], "\uFFFD"), true
	case ct&classQuote != 0:
		tz.typ = int(c)
		tz.sval, tz.sok = tz.quoted(c), true
	case c == '/':
		if tz.read() == '*' {
			prev := rune(0)
			for c = tz.read(); c != '/' || prev != '*'; c = tz.read() {
				if c < 0 {
					tz.typ = tokEOF
					return tz.typ
				}
				prev = c
			}
			return tz.next()
		}
		// "//", or a lone '/' (a comment character): to the line end,
		// the character after the first '/' skipped unread, as Java
		// does.
		for c = tz.read(); c >= 0 && c != '\n' && c != '\r'; c = tz.read() {
		}
		tz.unread()
		return tz.next()
	default:
		tz.typ = int(c)
	}
	return tz.typ
}

// quoted reads a string after its opening quote q, with Java's escapes.
func (tz *tokenizer) quoted(q rune) string {
	var b strings.Builder
	d := tz.read()
	for d >= 0 && d != q && d != '\n' && d != '\r' {
		var c rune
		if d == '\\' {
			c = tz.read()
			if first := c; c >= '0' && c <= '7' {
				c -= '0'
				c2 := tz.read()
				if c2 >= '0' && c2 <= '7' {
					c = c<<3 + c2 - '0'
					c2 = tz.read()
					if c2 >= '0' && c2 <= '7' && first <= '3' {
						c = c<<3 + c2 - '0'
						d = tz.read()
					} else {
						d = c2
					}
				} else {
					d = c2
				}
			} else {
				switch c {
				case 'a':
					c = 7
				case 'b':
					c = '\b'
				case 'f':
					c = '\f'
				case 'n':
					c = '\n'
				case 'r':
					c = '\r'
				case 't':
					c = '\t'
				case 'v':
					c = '\v'
				case -1:
					c = 0xFFFF // Java's (char)-1
				}
				d = tz.read()
			}
		} else {
			c, d = d, tz.read()
		}
		b.WriteRune(c)
	}
	if d != q {
		tz.unread() // a line end or the end: read again by the next token
	}
	return b.String()
}
