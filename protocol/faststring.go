package protocol

import (
	"bytes"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// JSON strings for the hand-written decoder: one pass validates a string and measures it
// unescaped, a second copies only the strings the message keeps into one allocation.

// span is one JSON string of the input: the bytes between its quotes, d[start:end], and n,
// its exact length once unescaped. plain means d[start:end] already is the value; notUTF8
// that it holds bytes that are not UTF-8 (without them, unescaping only looks for '\\').
type span struct {
	start, end, n  int
	plain, notUTF8 bool
}

// plainByte[c] is true for the bytes a JSON string holds as themselves: printable ASCII but
// the quote and the backslash.
var plainByte = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// str reads a JSON string and returns its span, or false where encoding/json's scanner would
// reject it (control bytes, bad escapes, no closing quote). It is the decoder's inner loop:
// one table lookup per ordinary byte, the unescaped length kept as a difference to the raw one.
func (p *hotParser) str() (span, bool) {
	if !p.eat('"') {
		return span{}, false
	}
	d := p.d
	s := span{start: p.i, plain: true}
	grow := 0 // unescaped length minus raw length so far
	for i := p.i; i < len(d); {
		c := d[i]
		if plainByte[c] {
			i++
			continue
		}
		switch {
		case c == '"':
			s.end, s.n, p.i = i, i-s.start+grow, i+1
			return s, true
		case c == '\\':
			r, adv := unescape(d[i:])
			if adv == 0 {
				return span{}, false
			}
			grow += utf8.RuneLen(r) - adv
			s.plain = false
			i += adv
		case c < 0x20:
			return span{}, false
		default:
			r, size := utf8.DecodeRune(d[i:])
			if r == utf8.RuneError && size == 1 { // not UTF-8: becomes U+FFFD, as in encoding/json
				grow += utf8.RuneLen(utf8.RuneError) - 1
				s.plain, s.notUTF8 = false, true
			}
			i += size
		}
	}
	return span{}, false
}

// verbatim returns how many leading bytes of s a JSON string holds as themselves: printable
// ASCII but the quote and the backslash, and valid UTF-8.
func verbatim(s []byte) int {
	i := 0
	for i < len(s) {
		c := s[i]
		if plainByte[c] {
			i++
			continue
		}
		if c < utf8.RuneSelf {
			break
		}
		r, size := utf8.DecodeRune(s[i:])
		if r == utf8.RuneError && size == 1 {
			break
		}
		i += size
	}
	return i
}

// unescape decodes the escape at the start of e (e[0] is the backslash) as encoding/json does:
// a surrogate pair makes one rune, a lone surrogate U+FFFD. adv is how many bytes it takes, 0
// if the escape is invalid JSON.
func unescape(e []byte) (r rune, adv int) {
	if len(e) < 2 {
		return 0, 0
	}
	switch e[1] {
	case '"', '\\', '/':
		return rune(e[1]), 2
	case 'b':
		return '\b', 2
	case 'f':
		return '\f', 2
	case 'n':
		return '\n', 2
	case 'r':
		return '\r', 2
	case 't':
		return '\t', 2
	case 'u':
		r = hex4(e[2:])
		if r < 0 {
			return 0, 0
		}
		if !utf16.IsSurrogate(r) {
			return r, 6
		}
		if len(e) >= 12 && e[6] == '\\' && e[7] == 'u' {
			if pair := utf16.DecodeRune(r, hex4(e[8:])); pair != utf8.RuneError {
				return pair, 12
			}
		}
		return utf8.RuneError, 6 // the next \u, if any, is read on its own
	}
	return 0, 0
}

// hex4 reads four hex digits, -1 if there are not four.
func hex4(b []byte) rune {
	if len(b) < 4 {
		return -1
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r<<4 | rune(c)
	}
	return r
}

// writeUnquoted writes the value of a string str validated: escapes decoded, bytes that are
// not UTF-8 replaced by U+FFFD.
func writeUnquoted(b *strings.Builder, s []byte, notUTF8 bool) {
	if !notUTF8 {
		writeUnescaped(b, s)
		return
	}
	for len(s) > 0 {
		k := verbatim(s)
		b.Write(s[:k])
		if s = s[k:]; len(s) == 0 {
			return
		}
		if s[0] != '\\' {
			b.WriteRune(utf8.RuneError)
			s = s[1:]
			continue
		}
		adv := writeEscape(b, s)
		if adv == 0 { // cannot happen after str; stop rather than loop
			return
		}
		s = s[adv:]
	}
}

// writeUnescaped is writeUnquoted for a string that is all UTF-8: everything but the escapes
// is copied, and the escapes are found with IndexByte, much faster than a loop over bytes.
func writeUnescaped(b *strings.Builder, s []byte) {
	for len(s) > 0 {
		k := bytes.IndexByte(s, '\\')
		if k < 0 {
			b.Write(s)
			return
		}
		b.Write(s[:k])
		adv := writeEscape(b, s[k:])
		if adv == 0 { // cannot happen after str; stop rather than loop
			return
		}
		s = s[k+adv:]
	}
}

// writeEscape writes the character of the escape s starts with and returns the escape's
// length (0 when s starts with none).
func writeEscape(b *strings.Builder, s []byte) int {
	r, adv := unescape(s)
	if adv == 0 {
		return 0
	}
	if r < utf8.RuneSelf {
		b.WriteByte(byte(r))
	} else {
		b.WriteRune(r)
	}
	return adv
}

// bigString is the length from which a string gets an allocation of its own rather than a
// share of the frame's: a kept request id or header must not pin a 64 MiB body.
const bigString = 4 << 10

// arena makes the strings of one message: the small ones are cut from one allocation.
type arena struct {
	d    []byte
	size int
	b    strings.Builder
}

// reserve counts s in the shared allocation; call it for every string before the first take.
func (a *arena) reserve(s span) {
	if s.n < bigString {
		a.size += s.n
	}
}

// take returns the value of s. If reserve missed a string, the builder grows and the strings
// already taken stay valid: a Builder never rewrites bytes it has handed out.
func (a *arena) take(s span) string {
	if s.n == 0 || s.end > len(a.d) || s.start > s.end {
		return ""
	}
	raw := a.d[s.start:s.end]
	if s.n >= bigString {
		if s.plain {
			return string(raw)
		}
		var own strings.Builder
		own.Grow(s.n)
		writeUnquoted(&own, raw, s.notUTF8)
		return own.String()
	}
	if a.b.Cap() == 0 {
		a.b.Grow(a.size)
	}
	from := a.b.Len()
	if s.plain {
		a.b.Write(raw)
	} else {
		writeUnquoted(&a.b, raw, s.notUTF8)
	}
	return a.b.String()[from:]
}
