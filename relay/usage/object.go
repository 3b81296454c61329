package usage

// member is one "key": value of an object, as offsets into the text.
type member struct {
	start    int    // the key's opening quote
	key      []byte // the key as written, between its quotes (escapes not decoded)
	val, end int    // the value's first byte and the byte after its last
}

// walker reads the members of one object in order, checking the grammar as it goes: the
// values it steps over are checked too, so an object walked to its end is valid JSON.
type walker struct {
	b     []byte
	i     int // where the next member, or the closing brace, is looked for
	depth int // of the object's members
	state uint8
}

const (
	walkFirst  uint8 = iota // before the first member
	walkAfter               // after a member
	walkClosed              // past the closing brace, at i
	walkBad                 // not JSON
)

// walk starts reading the object whose opening brace is b[i]; depth counts the arrays and
// objects around its members (bounded by maxDepth).
func walk(b []byte, i, depth int) walker {
	if i < 0 || i >= len(b) || b[i] != '{' || depth > maxDepth {
		return walker{state: walkBad}
	}
	return walker{b: b, i: i + 1, depth: depth}
}

// next reads the next member into m; false at the closing brace or on malformed text (end
// tells which).
func (w *walker) next(m *member) bool {
	if w.state >= walkClosed {
		return false
	}
	i := skipSpace(w.b, w.i)
	if i < len(w.b) && w.b[i] == '}' {
		w.i, w.state = i+1, walkClosed
		return false
	}
	if w.state == walkAfter {
		if i >= len(w.b) || w.b[i] != ',' {
			w.state = walkBad
			return false
		}
		i = skipSpace(w.b, i+1)
	}
	k := skipString(w.b, i)
	if k < 0 {
		w.state = walkBad
		return false
	}
	colon := skipSpace(w.b, k)
	if colon >= len(w.b) || w.b[colon] != ':' {
		w.state = walkBad
		return false
	}
	v := skipSpace(w.b, colon+1)
	e := skipValue(w.b, v, w.depth)
	if e < 0 {
		w.state = walkBad
		return false
	}
	*m = member{start: i, key: w.b[i+1 : k-1], val: v, end: e}
	w.i, w.state = e, walkAfter
	return true
}

// end is the index after the closing brace once next has returned false, or -1 if the
// object was malformed or cut off.
func (w *walker) end() int {
	if w.state != walkClosed {
		return -1
	}
	return w.i
}

// keyIs reports whether a key as written (raw) decodes to name, an ASCII member name. Keys
// are compared as a decoder reads them, escapes decoded: "stream\u005foptions" is
// stream_options to the model server, so it is to us.
func keyIs(raw []byte, name string) bool {
	if string(raw) == name {
		return true
	}
	j := 0
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if c == '\\' {
			c, i = unescapeASCII(raw, i)
			if i < 0 {
				return false
			}
		}
		if j >= len(name) || name[j] != c {
			return false
		}
		j++
	}
	return j == len(name)
}

// unescapeASCII decodes the escape at raw[i] when it stands for an ASCII byte (anything else
// cannot match an ASCII name) and returns it with the index of the escape's last byte, or
// i = -1.
func unescapeASCII(raw []byte, i int) (byte, int) {
	if i+1 >= len(raw) {
		return 0, -1
	}
	switch c := raw[i+1]; c {
	case '"', '\\', '/':
		return c, i + 1
	case 'b':
		return '\b', i + 1
	case 'f':
		return '\f', i + 1
	case 'n':
		return '\n', i + 1
	case 'r':
		return '\r', i + 1
	case 't':
		return '\t', i + 1
	case 'u':
		if r, ok := hex4(raw, i+2); ok && r < 0x80 {
			return byte(r), i + 5
		}
	}
	return 0, -1
}
