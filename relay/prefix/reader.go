package prefix

import (
	"bytes"
	"unicode/utf8"

	"modelrelay/relay/rawjson"
)

// reader walks one JSON document in a single pass, without building it: the caller reads
// the members it wants where they are and skips the rest. It is a cursor rather than
// rawjson's Object and Array readers because those step over each value before handing it
// out, so reading messages through them would walk every message twice (once to step over
// it, once to read it): on the 64 KiB bodies of BenchmarkParse, stepping over the body once
// costs about a sixth of reading its prompt. It steps over strings and values with rawjson's
// functions for checked text (the relay has checked the body: checking every byte again
// would cost about twice as much on prose, 3.5 against 6.7 GB/s), and it is lenient where
// leniency costs nothing (a missing comma). It never panics: on malformed input it sets bad
// and every method becomes a no-op, so loops end.
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
	end := rawjson.StringEnd(r.b, r.i)
	if end < 0 {
		r.bad, r.i = true, len(r.b)
		return nil
	}
	s := r.b[r.i+1 : end-1]
	r.i = end
	return s
}

// skip steps over the next value and returns its bytes (a string with its quotes).
func (r *reader) skip() []byte {
	if r.peek() == 0 {
		r.bad = true
		return nil
	}
	end := rawjson.ValueEnd(r.b, r.i)
	if end < 0 {
		r.bad, r.i = true, len(r.b)
		return nil
	}
	v := r.b[r.i:end]
	r.i = end
	return v
}

// str returns the raw content of a string value as skip returns it, or nil for any other
// value.
func str(v []byte) []byte {
	if len(v) >= 2 && v[0] == '"' {
		return v[1 : len(v)-1]
	}
	return nil
}

// fieldValue returns the value of the first member named name of the object v, or nil.
func fieldValue(v []byte, name string) []byte {
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
// string inside JSON text. What is not an escape JSON has is kept as sent.
//
// It decodes the escapes of two bytes itself, and leaves only \u escapes to rawjson.Unescape:
// prompts escape every newline, tab and quote (source code in tool results, an escape every
// ten bytes or so), and a call for each of them made BenchmarkParse/anthropic/64KB run 2.4%
// more instructions (679k against 663k a parse, counted by callgrind).
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
		esc, c := s, s[1]
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
			r, n := rawjson.Unescape(esc)
			if n == 0 {
				dst = append(dst, '\\', 'u')
				break
			}
			if requote && (r == '"' || r == '\\') {
				dst = append(dst, '\\')
			}
			dst = utf8.AppendRune(dst, r)
			s = esc[n:]
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
