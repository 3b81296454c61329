package prefix

import (
	"bytes"
	"unicode/utf16"
	"unicode/utf8"
)

// reader walks one JSON document in a single pass, without building it: the caller reads
// the members it wants where they are and skips the rest. It is lenient where leniency costs
// nothing (a missing comma, a bad literal inside a value it skips: the relay has validated
// the body already) and never panics: on malformed input it sets bad and every method
// becomes a no-op, so loops end.
type reader struct {
	b   []byte
	i   int
	bad bool
}

func (r *reader) ws() {
	for r.i < len(r.b) {
		switch r.b[r.i] {
		case ' ', '\t', '\n', '\r':
			r.i++
		default:
			return
		}
	}
}

// peek returns the next byte that is not whitespace, or 0 at the end or once bad.
func (r *reader) peek() byte {
	r.ws()
	if r.bad || r.i >= len(r.b) {
		return 0
	}
	return r.b[r.i]
}

// enter consumes open ('{' or '[') if it is next.
func (r *reader) enter(open byte) bool {
	if r.peek() != open {
		return false
	}
	r.i++
	return true
}

// next moves to the next member or element of the object or array entered; it consumes
// close and returns false at the end.
func (r *reader) next(close byte) bool {
	c := r.peek()
	if c == ',' {
		r.i++
		c = r.peek()
	}
	if c == close && c != 0 {
		r.i++
		return false
	}
	if c == 0 {
		r.bad = true // the document ended inside the container
		return false
	}
	return true
}

// key reads a member's key and its colon; it returns the key's raw bytes (escapes as sent:
// a key spelled with escapes matches no name this package looks for).
func (r *reader) key() []byte {
	if r.peek() != '"' {
		r.bad = true
		return nil
	}
	k := r.rawString()
	if r.peek() != ':' {
		r.bad = true
		return nil
	}
	r.i++
	return k
}

// rawString reads the string at r.i (its opening quote) and returns its content as sent,
// escapes and all.
func (r *reader) rawString() []byte {
	if r.bad {
		return nil
	}
	start := r.i + 1
	// Most strings are short (keys, roles, types, schema words): a loop finds their end
	// sooner than starting a vectorised search.
	for j, c := range r.b[start:min(start+shortString, len(r.b))] {
		if c == '"' {
			r.i = start + j + 1
			return r.b[start : start+j]
		}
		if c == '\\' {
			break
		}
	}
	j := start
	for j <= len(r.b) {
		k := bytes.IndexByte(r.b[j:], '"')
		if k < 0 {
			break
		}
		j += k
		n := 0 // backslashes before the quote: an odd count escapes it
		for p := j - 1; p >= start && r.b[p] == '\\'; p-- {
			n++
		}
		if n&1 == 0 {
			r.i = j + 1
			return r.b[start:j]
		}
		j++
	}
	r.bad = true
	r.i = len(r.b)
	return nil
}

// skip steps over the next value and returns its bytes (a string with its quotes).
func (r *reader) skip() []byte {
	c := r.peek()
	start := r.i
	switch c {
	case 0:
		r.bad = true
		return nil
	case '"':
		r.rawString()
	case '{', '[':
		depth := 0
		for r.i < len(r.b) && !r.bad {
			switch r.b[r.i] {
			case '"':
				r.rawString()
				continue
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					r.i++
					return r.b[start:r.i]
				}
			}
			r.i++
		}
		r.bad = true
	default: // a number or a literal
		for r.i < len(r.b) {
			switch r.b[r.i] {
			case ',', '}', ']', ':', '"', '{', '[', ' ', '\t', '\n', '\r':
				goto end
			}
			r.i++
		}
	end:
		if r.i == start {
			r.bad = true
		}
	}
	if r.bad {
		return nil
	}
	return r.b[start:r.i]
}

// str returns the raw content of a string value as skip returns it, or nil for any other
// value.
func str(v []byte) []byte {
	if len(v) >= 2 && v[0] == '"' {
		return v[1 : len(v)-1]
	}
	return nil
}

// field returns the value of the first member named name of the object v, or nil.
func field(v []byte, name string) []byte {
	r := reader{b: v}
	if !r.enter('{') {
		return nil
	}
	for r.next('}') {
		k := r.key()
		val := r.skip()
		if string(k) == name {
			return val
		}
	}
	return nil
}

// appendUnescaped appends the JSON string content s, unescaped, to dst, stopping near limit.
// With requote it escapes '"' and '\' again (and nothing else): the canonical form of a
// string inside JSON text. An invalid escape is kept as sent.
func appendUnescaped(dst, s []byte, requote bool, limit int) []byte {
	if len(s) <= shortString && len(s) <= limit-len(dst) && !hasBackslash(s) {
		return append(dst, s...)
	}
	for len(s) > 0 && len(dst) < limit {
		k := bytes.IndexByte(s, '\\')
		if k < 0 {
			k = len(s)
		}
		dst = append(dst, s[:min(k, limit-len(dst))]...)
		s = s[k:]
		if len(s) < 2 {
			return append(dst, s...)
		}
		c := s[1]
		s = s[2:]
		switch c {
		case '"', '\\':
			if requote {
				dst = append(dst, '\\')
			}
			dst = append(dst, c)
		case '/':
			dst = append(dst, '/')
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			var n int
			dst, n = appendEscapedRune(dst, s, requote)
			s = s[n:]
		default:
			dst = append(dst, '\\', c)
		}
	}
	return dst
}

// shortString is how long a string is scanned byte by byte before a vectorised search.
const shortString = 24

func hasBackslash(s []byte) bool {
	for _, c := range s {
		if c == '\\' {
			return true
		}
	}
	return false
}

// appendEscapedRune decodes the hex digits of a \u escape (and of a low surrogate's \u
// escape after a high one) from s and returns how many bytes of s it used.
func appendEscapedRune(dst, s []byte, requote bool) ([]byte, int) {
	r, ok := hex4(s)
	if !ok {
		return append(dst, '\\', 'u'), 0
	}
	n := 4
	if utf16.IsSurrogate(r) {
		r2, ok := hex4(s[min(n+2, len(s)):])
		if ok && len(s) >= n+6 && s[n] == '\\' && s[n+1] == 'u' {
			if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
				r, n = dec, n+6
			}
		}
	}
	if requote && (r == '"' || r == '\\') {
		dst = append(dst, '\\')
	}
	return utf8.AppendRune(dst, r), n
}

func hex4(s []byte) (rune, bool) {
	if len(s) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range s[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}
