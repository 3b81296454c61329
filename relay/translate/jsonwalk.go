package translate

import (
	"bytes"
	"encoding/json"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// The request mappers read the client's body where it lies instead of decoding it: a value
// is the bytes that spell it (a sub-slice of the body), and what they write is copied from
// those bytes, strings still escaped as the client sent them. Nothing is allocated per
// message or block, so a mapping costs its output and little more. The walk trusts the
// body's syntax: every entry point checks first that the body is valid JSON and UTF-8, and
// the walk still never reads out of bounds on anything else.

// kind of the value v: '"' string, '{' object, '[' array, 't' or 'f' a boolean, 'n' null,
// '0' a number; 0 for none (an absent member).
func kind(v []byte) byte {
	if len(v) == 0 {
		return 0
	}
	switch c := v[0]; c {
	case '"', '{', '[', 't', 'f', 'n':
		return c
	}
	return '0'
}

// present is v unless it is absent or null: JSON null means "not given", as encoding/json
// reads it into a struct.
func present(v []byte) []byte {
	if kind(v) == 'n' {
		return nil
	}
	return v
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// stringEnd returns the offset just past the string that opens at b[i].
func stringEnd(b []byte, i int) int {
	for j := i + 1; j < len(b); {
		k := bytes.IndexByte(b[j:], '"')
		if k < 0 {
			break
		}
		q := j + k
		escapes := 0
		for p := q - 1; p > i && b[p] == '\\'; p-- {
			escapes++
		}
		if escapes%2 == 0 {
			return q + 1
		}
		j = q + 1
	}
	return len(b)
}

// valueEnd returns the offset just past the value that starts at b[i].
func valueEnd(b []byte, i int) int {
	if i >= len(b) {
		return len(b)
	}
	switch b[i] {
	case '"':
		return stringEnd(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				i = stringEnd(b, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return len(b)
	}
	for i < len(b) && b[i] != ',' && b[i] != '}' && b[i] != ']' && b[i] != ' ' && b[i] != '\t' && b[i] != '\n' && b[i] != '\r' {
		i++
	}
	return i
}

// eachMember calls f with each member of the object obj: its key as written (quoted) and
// its value. It stops at f's first error and returns it.
func eachMember(obj []byte, f func(key, val []byte) error) error {
	if kind(obj) != '{' {
		return nil
	}
	i := skipSpace(obj, 1)
	for i < len(obj) && obj[i] == '"' {
		end := stringEnd(obj, i)
		key := obj[i:end]
		v := skipSpace(obj, end)
		v = skipSpace(obj, v+1) // past the colon
		if v >= len(obj) {
			return nil
		}
		vEnd := valueEnd(obj, v)
		if err := f(key, obj[v:vEnd]); err != nil {
			return err
		}
		i = skipSpace(obj, vEnd)
		if i < len(obj) && obj[i] == ',' {
			i = skipSpace(obj, i+1)
		}
	}
	return nil
}

// eachElement calls f with each element of the array arr and its index. It stops at f's
// first error and returns it.
func eachElement(arr []byte, f func(i int, val []byte) error) error {
	if kind(arr) != '[' {
		return nil
	}
	i := skipSpace(arr, 1)
	for n := 0; i < len(arr) && arr[i] != ']'; n++ {
		end := valueEnd(arr, i)
		if end == i {
			return nil
		}
		if err := f(n, arr[i:end]); err != nil {
			return err
		}
		i = skipSpace(arr, end)
		if i < len(arr) && arr[i] == ',' {
			i = skipSpace(arr, i+1)
		}
	}
	return nil
}

// fieldName is a member's key as encoding/json matches it to a struct field: unescaped, and
// folded so that it equals a lower-case ASCII field name exactly when the two are equal
// under Unicode case folding ("Type", "TYPE" and "ſtream" name type and stream). buf is
// scratch space for the result.
func fieldName(key []byte, buf []byte) []byte {
	in := inner(key)
	if bytes.IndexByte(in, '\\') >= 0 {
		s, ok := unquote(key)
		if !ok {
			return nil
		}
		in = []byte(s)
	}
	out := buf[:0]
	for len(in) > 0 {
		if c := in[0]; c < utf8.RuneSelf {
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			out = append(out, c)
			in = in[1:]
			continue
		}
		r, n := utf8.DecodeRune(in)
		in = in[n:]
		out = utf8.AppendRune(out, asciiFold(r))
	}
	return out
}

// asciiFold is the lower-case ASCII letter r folds to (the Kelvin sign to k), else r.
func asciiFold(r rune) rune {
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		if f < utf8.RuneSelf {
			return unicode.ToLower(f)
		}
	}
	return r
}

// inner is a string value without its quotes: its text as escaped in the body.
func inner(s []byte) []byte {
	if len(s) < 2 {
		return nil
	}
	return s[1 : len(s)-1]
}

// unquote decodes a string value.
func unquote(s []byte) (string, bool) {
	if bytes.IndexByte(s, '\\') < 0 {
		return string(inner(s)), true
	}
	var out string
	return out, json.Unmarshal(s, &out) == nil
}

// is reports whether the string value s decodes to want.
func is(s []byte, want string) bool {
	if kind(s) != '"' {
		return want == ""
	}
	in := inner(s)
	if bytes.IndexByte(in, '\\') < 0 {
		return string(in) == want
	}
	got, ok := unquote(s)
	return ok && got == want
}

// isEmpty reports whether s is absent, null or the empty string.
func isEmpty(s []byte) bool { return len(inner(present(s))) == 0 }

// appendCompact appends the JSON value v without insignificant space.
func appendCompact(dst, v []byte) []byte {
	for i := 0; i < len(v); {
		switch c := v[i]; c {
		case ' ', '\t', '\n', '\r':
			i++
		case '"':
			end := stringEnd(v, i)
			dst = append(dst, v[i:end]...)
			i = end
		default:
			dst = append(dst, c)
			i++
		}
	}
	return dst
}

// appendEscaped appends p as the text of a JSON string (no quotes): p may hold anything but
// invalid UTF-8.
func appendEscaped(dst, p []byte) []byte {
	start := 0
	for i, c := range p {
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		dst = append(dst, p[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hexDigit[c>>4], hexDigit[c&0xf])
		}
		start = i + 1
	}
	return append(dst, p[start:]...)
}

// appendEscapedCompact is appendEscaped of the JSON value v compacted, in one pass: outside
// its strings v holds nothing that needs escaping.
func appendEscapedCompact(dst, v []byte) []byte {
	for i := 0; i < len(v); {
		switch c := v[i]; c {
		case ' ', '\t', '\n', '\r':
			i++
		case '"':
			end := stringEnd(v, i)
			dst = appendEscaped(dst, v[i:end])
			i = end
		default:
			dst = append(dst, c)
			i++
		}
	}
	return dst
}

// escapedCompactLen bounds what appendEscaped(appendCompact(v)) writes: at most six bytes per
// byte of v.
func escapedCompactLen(v []byte) int {
	n := 0
	for _, c := range v {
		switch {
		case c == '"' || c == '\\':
			n += 2
		case c < 0x20:
			n += 6
		default:
			n++
		}
	}
	return n
}

const hexDigit = "0123456789abcdef"

// appendUnescaped appends the text of the string value s, decoded. A lone surrogate becomes
// U+FFFD, as encoding/json decodes it. Decoding never makes a string longer.
func appendUnescaped(dst, s []byte) []byte {
	in := inner(s)
	for len(in) > 0 {
		k := bytes.IndexByte(in, '\\')
		if k < 0 {
			return append(dst, in...)
		}
		dst = append(dst, in[:k]...)
		in = in[k:]
		if len(in) < 2 {
			return dst
		}
		switch c := in[1]; c {
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
			r, n := hexRune(in)
			dst = utf8.AppendRune(dst, r)
			in = in[n:]
			continue
		default: // " \ /
			dst = append(dst, c)
		}
		in = in[2:]
	}
	return dst
}

// hexRune reads the \uXXXX escape (or surrogate pair of them) at the start of in and returns
// the rune and the bytes it took.
func hexRune(in []byte) (rune, int) {
	r, ok := hex4(in)
	if !ok {
		return utf8.RuneError, min(len(in), 2)
	}
	if utf16.IsSurrogate(r) {
		if r2, ok := hex4(in[6:]); ok && len(in) >= 12 && in[6] == '\\' {
			if pair := utf16.DecodeRune(r, r2); pair != utf8.RuneError {
				return pair, 12
			}
		}
		return utf8.RuneError, 6
	}
	return r, 6
}

// hex4 reads \uXXXX at the start of in.
func hex4(in []byte) (rune, bool) {
	if len(in) < 6 || in[0] != '\\' || in[1] != 'u' {
		return 0, false
	}
	var r rune
	for _, c := range in[2:6] {
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

// unescapedLen is the length of the string value s decoded (0 for anything but a string).
func unescapedLen(s []byte) int {
	if kind(s) != '"' {
		return 0
	}
	in := inner(s)
	n := 0
	for len(in) > 0 {
		k := bytes.IndexByte(in, '\\')
		if k < 0 {
			return n + len(in)
		}
		n += k
		in = in[k:]
		if len(in) < 2 {
			return n
		}
		if in[1] != 'u' {
			n++
			in = in[2:]
			continue
		}
		r, size := hexRune(in)
		n += utf8.RuneLen(r)
		in = in[size:]
	}
	return n
}
