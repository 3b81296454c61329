package h1

// The byte classes of RFC 9110 §5.6.2 and §5.5, as the parser and the request writer apply
// them. One definition for both directions: what we refuse to read we also refuse to send.

// isTokenByte reports whether c may appear in a token (a field name, a method).
func isTokenByte(c byte) bool {
	return c < 0x80 && tokenBytes[c]
}

var tokenBytes = alnumAnd("!#$%&'*+-.^_`|~")

// alnumAnd is the byte class of letters, digits and the ASCII bytes in extra.
func alnumAnd(extra string) (t [0x80]bool) {
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c] = true
		t[c-'a'+'A'] = true
	}
	for _, c := range extra {
		t[c] = true
	}
	return t
}

// isValueByte reports whether c may appear in a field value (or a reason phrase): visible
// ASCII, obs-text, space and tab. CR, LF and NUL never do: they are how a response is split.
func isValueByte(c byte) bool {
	return c >= 0x20 && c != 0x7f || c == '\t'
}

func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isTokenByte(s[i]) {
			return false
		}
	}
	return true
}

func isValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isValueByte(s[i]) {
			return false
		}
	}
	return true
}

// canonicalize rewrites a valid field name in place to net/http's canonical form
// (Content-Type, X-Request-Id), so that the name can be sliced out of the head's one string
// instead of being allocated on its own.
func canonicalize(name []byte) {
	upper := true
	for i, c := range name {
		switch {
		case upper && 'a' <= c && c <= 'z':
			name[i] = c - ('a' - 'A')
		case !upper && 'A' <= c && c <= 'Z':
			name[i] = c + ('a' - 'A')
		}
		upper = c == '-'
	}
}

// trimOWS drops the optional whitespace (SP, HTAB) around a field value.
func trimOWS(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t') {
		b = b[:len(b)-1]
	}
	return b
}

// asciiEqualFold compares case-insensitively in ASCII only. strings.EqualFold folds Unicode
// too ("ſ" matches "s"), which would let a name no HTTP parser recognises pass for one.
func asciiEqualFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := 0; i < len(b); i++ {
		x, y := b[i], s[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// eachElement calls f with every non-empty element of a comma-separated field value, trimmed.
func eachElement(v []byte, f func([]byte)) {
	for len(v) > 0 {
		i := 0
		for i < len(v) && v[i] != ',' {
			i++
		}
		if e := trimOWS(v[:i]); len(e) > 0 {
			f(e)
		}
		if i == len(v) {
			return
		}
		v = v[i+1:]
	}
}
