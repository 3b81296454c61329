package daemon

import "unicode/utf8"

// runeCutter cuts a byte stream into pieces that end on UTF-8 boundaries. A frame's chunk is a
// JSON string: a multi-byte rune split across two backend reads would be mangled into two
// U+FFFD on the wire, so the incomplete tail of one read is carried into the next.
type runeCutter struct {
	carry [utf8.UTFMax - 1]byte
	n     int
}

// cut returns the carried bytes followed by p, up to the last complete rune; the incomplete
// rune at the end (at most three bytes) is kept for the next call. Bytes that can never form
// a rune are passed through as they are: a later read cannot repair them.
func (c *runeCutter) cut(p []byte) []byte {
	b := p
	if c.n > 0 {
		b = append(append(make([]byte, 0, c.n+len(p)), c.carry[:c.n]...), p...)
		c.n = 0
	}
	start := len(b) - 1
	for start >= 0 && start > len(b)-utf8.UTFMax && !utf8.RuneStart(b[start]) {
		start--
	}
	if start < 0 || utf8.FullRune(b[start:]) {
		return b
	}
	c.n = copy(c.carry[:], b[start:])
	return b[:start]
}

// flush returns whatever is still carried at the end of the stream.
func (c *runeCutter) flush() []byte {
	out := append([]byte(nil), c.carry[:c.n]...)
	c.n = 0
	return out
}
