package translate

import (
	"bytes"
	"unicode/utf8"

	"modelrelay/relay/rawjson"
)

// The request mappers read the client's body where it lies instead of decoding it: a value
// is the bytes that spell it (a sub-slice of the body), and what they write is copied from
// those bytes, strings still escaped as the client sent them. Nothing is allocated per
// message or block, so a mapping costs its output and little more. The walk is rawjson's
// reader of checked text: every entry point checks first that the body is valid JSON and
// UTF-8 (rawjson.Valid), and the walk still never reads out of bounds on anything else.

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

func skipSpace(b []byte, i int) int { return rawjson.SkipSpace(b, i) }

// stringEnd returns the offset just past the string that opens at b[i] (len(b) if it does not
// end).
func stringEnd(b []byte, i int) int {
	if end := rawjson.StringEnd(b, i); end >= 0 {
		return end
	}
	return len(b)
}

// eachMember calls f with each member of the object obj: its key as written (quoted) and
// its value. It stops at f's first error and returns it.
func eachMember(obj []byte, f func(key, val []byte) error) error {
	if kind(obj) != '{' {
		return nil
	}
	o := rawjson.ObjectAt(obj, 0, rawjson.Checked)
	var m rawjson.Member
	for o.Next(&m) {
		if err := f(m.Key, obj[m.Value:m.End]); err != nil {
			return err
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
	a := rawjson.ArrayAt(arr, 0, rawjson.Checked)
	for n := 0; ; n++ {
		start, end, ok := a.Next()
		if !ok {
			return nil
		}
		if err := f(n, arr[start:end]); err != nil {
			return err
		}
	}
}

// fieldName is a member's key as encoding/json matches it to a struct field: unescaped, and
// folded so that it equals a lower-case ASCII field name exactly when the two match ("Type",
// "TYPE" and "ſtream" name type and stream). buf is scratch space for the result.
func fieldName(key []byte, buf []byte) []byte { return rawjson.FoldKey(key, buf[:0]) }

// inner is a string value without its quotes: its text as escaped in the body.
func inner(s []byte) []byte { return rawjson.Inner(s) }

// unquote decodes a string value.
func unquote(s []byte) (string, bool) { return rawjson.String(s), true }

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
func appendUnescaped(dst, s []byte) []byte { return rawjson.AppendUnescaped(dst, inner(s)) }

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
		r, size := rawjson.Unescape(in[k:])
		if size == 0 {
			r, size = utf8.RuneError, min(2, len(in)-k)
		}
		n += utf8.RuneLen(r)
		in = in[k+size:]
	}
	return n
}

// appendQuoted appends text as a JSON string, quotes included; invalid UTF-8 becomes U+FFFD
// (a model server's bytes need not be valid, a client's JSON parser needs them to be).
func appendQuoted(dst, text []byte) []byte {
	dst = append(dst, '"')
	if !utf8.Valid(text) {
		text = bytes.ToValidUTF8(text, []byte("\uFFFD"))
	}
	dst = appendEscaped(dst, text)
	return append(dst, '"')
}
