package rawjson

// Member is one "name": value of an object, as offsets into the text.
type Member struct {
	Key        []byte // the name as written, quotes included (escapes not decoded)
	Start      int    // the name's opening quote
	Value, End int    // the value is b[Value:End]
}

// Object reads the members of one object in order, checking the grammar as it goes. In
// Unchecked text the values it steps over are checked too (SkipValue), so an object read to
// its end is valid JSON; in Checked text they are not (ValueEnd). The zero Object has no
// members and is not valid.
type Object struct {
	b     []byte
	i     int // where the next member, or the closing brace, is looked for
	depth int // the arrays and objects around the members' values
	state uint8
	trust Trust
}

const (
	readFirst  uint8 = iota // before the first member or element
	readAfter               // after one
	readClosed              // past the closing bracket, at i
	readBad                 // not JSON
)

// ObjectAt starts reading the object whose opening brace is b[i].
func ObjectAt(b []byte, i int, t Trust) Object {
	if i < 0 || i >= len(b) || b[i] != '{' {
		return Object{state: readBad}
	}
	return Object{b: b, i: i + 1, depth: 1, trust: t}
}

// Next reads the next member into m; false at the closing brace or on text that is not JSON
// (End tells which).
func (o *Object) Next(m *Member) bool {
	if o.state >= readClosed {
		return false
	}
	b := o.b
	i := SkipSpace(b, o.i)
	if i < len(b) && b[i] == '}' {
		o.i, o.state = i+1, readClosed
		return false
	}
	if o.state == readAfter {
		if i >= len(b) || b[i] != ',' {
			o.state = readBad
			return false
		}
		i = SkipSpace(b, i+1)
	}
	k, ok := SkipString(b, i)
	if !ok {
		o.state = readBad
		return false
	}
	colon := SkipSpace(b, k)
	if colon >= len(b) || b[colon] != ':' {
		o.state = readBad
		return false
	}
	v := SkipSpace(b, colon+1)
	e := step(b, v, o.depth, o.trust)
	if e < 0 {
		o.state = readBad
		return false
	}
	*m = Member{Key: b[i:k], Start: i, Value: v, End: e}
	o.i, o.state = e, readAfter
	return true
}

// End is the offset just past the closing brace once Next has returned false, or -1 if the
// object was not JSON (cut off included).
func (o *Object) End() int {
	if o.state != readClosed {
		return -1
	}
	return o.i
}

// Array reads the elements of one array in order, checking each as Object checks its members.
type Array struct {
	b     []byte
	i     int
	depth int
	state uint8
	trust Trust
}

// ArrayAt starts reading the array whose opening bracket is b[i].
func ArrayAt(b []byte, i int, t Trust) Array {
	if i < 0 || i >= len(b) || b[i] != '[' {
		return Array{state: readBad}
	}
	return Array{b: b, i: i + 1, depth: 1, trust: t}
}

// Next reads the next element, b[start:end]; ok is false at the closing bracket or on text
// that is not JSON (End tells which).
func (a *Array) Next() (start, end int, ok bool) {
	if a.state >= readClosed {
		return 0, 0, false
	}
	b := a.b
	i := SkipSpace(b, a.i)
	if i < len(b) && b[i] == ']' {
		a.i, a.state = i+1, readClosed
		return 0, 0, false
	}
	if a.state == readAfter {
		if i >= len(b) || b[i] != ',' {
			a.state = readBad
			return 0, 0, false
		}
		i = SkipSpace(b, i+1)
	}
	e := step(b, i, a.depth, a.trust)
	if e < 0 {
		a.state = readBad
		return 0, 0, false
	}
	a.i, a.state = e, readAfter
	return i, e, true
}

// End is the offset just past the closing bracket once Next has returned false, or -1 if the
// array was not JSON (cut off included).
func (a *Array) End() int {
	if a.state != readClosed {
		return -1
	}
	return a.i
}

// step steps over the value at b[i], nested depth deep, as t says.
func step(b []byte, i, depth int, t Trust) int {
	if t == Checked {
		return ValueEnd(b, i)
	}
	return skipValue(b, i, depth)
}
