package rawjson

import (
	"bytes"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// Strings are decoded only where a reader needs their text, and as encoding/json decodes
// them: escapes replaced, a lone surrogate read as U+FFFD.

// Unescape decodes the escape that starts s (a backslash) and returns the rune it stands
// for (a surrogate pair of \u escapes is one rune; a lone surrogate is U+FFFD) and how many
// bytes of s it takes; n is 0 when s does not start with an escape JSON has.
func Unescape(s []byte) (r rune, n int) {
	if len(s) > 1 && s[0] == '\\' && shortUnescaped[s[1]] != 0 {
		return rune(shortUnescaped[s[1]]), 2
	}
	if len(s) < 6 || s[0] != '\\' || s[1] != 'u' {
		return 0, 0
	}
	r, ok := hex4(s[2:])
	if !ok {
		return 0, 0
	}
	if !utf16.IsSurrogate(r) {
		return r, 6
	}
	if len(s) >= 12 && s[6] == '\\' && s[7] == 'u' {
		if r2, ok := hex4(s[8:]); ok {
			if pair := utf16.DecodeRune(r, r2); pair != utf8.RuneError {
				return pair, 12
			}
		}
	}
	return utf8.RuneError, 6
}

// shortUnescaped is what a backslash followed by the index byte stands for, in the escapes
// of two bytes (\n, \", ...); 0 for any other byte.
var shortUnescaped = [256]byte{'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}

// AppendUnescaped appends the text of a string's raw content s (what lies between its quotes),
// decoded. What is not an escape JSON has (only in text that is not JSON) is kept as written.
func AppendUnescaped(dst, s []byte) []byte {
	for len(s) > 0 {
		k := bytes.IndexByte(s, '\\')
		if k < 0 {
			return append(dst, s...)
		}
		dst = append(dst, s[:k]...)
		s = s[k:]
		if len(s) > 1 && shortUnescaped[s[1]] != 0 {
			dst = append(dst, shortUnescaped[s[1]])
			s = s[2:]
			continue
		}
		r, n := Unescape(s)
		switch {
		case n == 0:
			n = min(2, len(s))
			dst = append(dst, s[:n]...)
		case r < utf8.RuneSelf:
			dst = append(dst, byte(r))
		default:
			dst = utf8.AppendRune(dst, r)
		}
		s = s[n:]
	}
	return dst
}

// Inner is a string value's raw content: its text between the quotes, escapes as written.
// Anything shorter than a string is nil.
func Inner(s []byte) []byte {
	if len(s) < 2 {
		return nil
	}
	return s[1 : len(s)-1]
}

// String decodes the string value s (quotes included); "" for anything that is not a string.
// A string without escapes costs one copy.
func String(s []byte) string {
	if len(s) < 2 || s[0] != '"' {
		return ""
	}
	in := Inner(s)
	if bytes.IndexByte(in, '\\') < 0 {
		return string(in)
	}
	return string(AppendUnescaped(make([]byte, 0, len(in)), in))
}

// KeyIs reports whether the member name key (as written, quotes included) decodes to name:
// "stream\u005foptions" is stream_options to a decoder, so it is here. It decodes as it
// compares, and stops at the first difference.
func KeyIs(key []byte, name string) bool {
	in := Inner(key)
	if string(in) == name {
		return true
	}
	if len(in) < len(name) { // an escape is never shorter than what it stands for
		return false
	}
	var buf [utf8.UTFMax]byte
	j := 0
	for i := 0; i < len(in); {
		if in[i] != '\\' {
			if j >= len(name) || name[j] != in[i] {
				return false
			}
			i, j = i+1, j+1
			continue
		}
		r, n := Unescape(in[i:])
		if n == 0 {
			return false
		}
		enc := buf[:utf8.EncodeRune(buf[:], r)]
		if len(name)-j < len(enc) || name[j:j+len(enc)] != string(enc) {
			return false
		}
		i, j = i+n, j+len(enc)
	}
	return j == len(name)
}

// FieldIs reports whether the member name key (as written, quotes included) names field as
// encoding/json matches a name to a struct field: escapes decoded, then case-insensitively
// (Unicode's simple folding: "Model", "MODEL" and "ſtream" name model and stream).
func FieldIs(key []byte, field string) bool {
	in := Inner(key)
	if bytes.IndexByte(in, '\\') < 0 {
		// Folding can match names of other lengths ("ſtream"); ASCII cannot.
		if len(in) != len(field) && ascii(in) {
			return false
		}
		return strings.EqualFold(string(in), field)
	}
	var buf [64]byte
	return strings.EqualFold(string(AppendUnescaped(buf[:0], in)), field)
}

// FoldKey is the member name key (as written, quotes included) decoded and folded so that it
// equals a lower-case ASCII field name exactly when FieldIs(key, field): each letter that
// folds to an ASCII one becomes that letter in lower case (the Kelvin sign k, "ſ" s). It
// writes into buf's room, growing it only for a long name.
func FoldKey(key, buf []byte) []byte {
	in := Inner(key)
	if bytes.IndexByte(in, '\\') >= 0 {
		var decoded [64]byte
		in = AppendUnescaped(decoded[:0], in)
	}
	out := buf[:0]
	for i := 0; i < len(in); {
		if c := in[i]; c < utf8.RuneSelf {
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			out = append(out, c)
			i++
			continue
		}
		r, n := utf8.DecodeRune(in[i:])
		i += n
		out = utf8.AppendRune(out, asciiFold(r))
	}
	return out
}

// asciiFold is the lower-case ASCII letter r folds to, else r.
func asciiFold(r rune) rune {
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		if f < utf8.RuneSelf {
			return unicode.ToLower(f)
		}
	}
	return r
}

func ascii(b []byte) bool {
	for _, c := range b {
		if c >= utf8.RuneSelf {
			return false
		}
	}
	return true
}
