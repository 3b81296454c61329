package rawjson

import (
	"encoding/binary"
	"math/bits"
)

// These step over JSON text checking it: the grammar of RFC 8259 as encoding/json reads it
// (json.Valid and Valid agree on every input), so one walk of a client's body is also its
// validation. They trust nothing: on anything that is not JSON they report false, never
// panic; they allocate nothing. Invalid UTF-8 inside a string is JSON to them, as to
// encoding/json: whoever needs UTF-8 checks it.

// MaxDepth bounds the nesting of arrays and objects, as encoding/json does: deeper text is not
// valid, so that no input can exhaust the stack.
const MaxDepth = 10000

// SkipSpace returns the offset of the first byte at or after i that is not JSON white space.
func SkipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// Valid reports whether b is one JSON value, with white space around it or not.
func Valid(b []byte) bool {
	end, ok := SkipValue(b, SkipSpace(b, 0))
	return ok && SkipSpace(b, end) == len(b)
}

// SkipValue returns the offset just past the value that starts at b[i] (no space before it),
// checking it: strings as SkipString does, numbers and literals as JSON spells them, objects
// and arrays member by member, at most MaxDepth deep.
func SkipValue(b []byte, i int) (int, bool) {
	end := skipValue(b, i, 0)
	return end, end >= 0
}

// skipValue is SkipValue at nesting depth (the arrays and objects around b[i]); -1 when the
// text is not JSON.
func skipValue(b []byte, i, depth int) int {
	if i < 0 || i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		if end, ok := SkipString(b, i); ok {
			return end
		}
		return -1
	case '{':
		if depth >= MaxDepth {
			return -1
		}
		o := Object{b: b, i: i + 1, depth: depth + 1} // Unchecked
		var m Member
		for o.Next(&m) {
		}
		return o.End()
	case '[':
		if depth >= MaxDepth {
			return -1
		}
		a := Array{b: b, i: i + 1, depth: depth + 1} // Unchecked
		for {
			if _, _, ok := a.Next(); !ok {
				return a.End()
			}
		}
	case 't':
		return skipLiteral(b, i, "true")
	case 'f':
		return skipLiteral(b, i, "false")
	case 'n':
		return skipLiteral(b, i, "null")
	}
	return skipNumber(b, i)
}

func skipLiteral(b []byte, i int, lit string) int {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return -1
	}
	return i + len(lit)
}

// skipNumber reads a number: an optional minus, an integer without leading zeros, an
// optional fraction and an optional exponent.
func skipNumber(b []byte, i int) int {
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		i = skipDigits(b, i)
	default:
		return -1
	}
	if i < len(b) && b[i] == '.' {
		j := skipDigits(b, i+1)
		if j == i+1 {
			return -1
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := skipDigits(b, i)
		if j == i {
			return -1
		}
		i = j
	}
	return i
}

func skipDigits(b []byte, i int) int {
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	return i
}

// SkipString returns the offset just past the string that opens at b[i] ('"'), checking that
// every escape is one JSON has and that no control character stands unescaped. It reads
// eight bytes at a time while none of them is a quote, a backslash or a control character
// (the text of a prompt is long runs of those), and byte by byte around the ones that are.
// Measured on one core of the development machine against fastjson's checks of a string
// (which the relay used before): prose 3.1 GB/s (fastjson 2.2), text without escapes 4.3
// (1.8), source code with an escape every ten bytes 1.5 (0.7).
func SkipString(b []byte, i int) (int, bool) {
	if i >= len(b) || b[i] != '"' {
		return 0, false
	}
	i++
	for {
		for i+16 <= len(b) { // two words a round: half the loop's overhead on a long run
			w := b[i : i+16 : i+16]
			if m := special(binary.LittleEndian.Uint64(w[:8])); m != 0 {
				i += bits.TrailingZeros64(m) >> 3
				goto at
			}
			if m := special(binary.LittleEndian.Uint64(w[8:])); m != 0 {
				i += 8 + bits.TrailingZeros64(m)>>3
				goto at
			}
			i += 16
		}
		for i < len(b) && plainByte[b[i]] {
			i++
		}
		if i >= len(b) {
			return 0, false
		}
	at:
		switch b[i] {
		case '"':
			return i + 1, true
		case '\\':
			if i+1 < len(b) && shortUnescaped[b[i+1]] != 0 {
				i += 2
				continue
			}
			if i+1 < len(b) && b[i+1] == 'u' {
				if _, ok := hex4(b[i+2:]); ok {
					i += 6
					continue
				}
			}
		}
		return 0, false // a control character, or an escape JSON does not have
	}
}

// special marks, in the high bit of each byte, the bytes of x (eight bytes of a string, the
// first one lowest) that end a run of plain ones: a quote, a backslash or a control
// character. A mark may be wrong above the first true one (a borrow runs up), never below it,
// so the lowest mark is the first such byte. (A byte is zero where (v-1) &^ v has its high
// bit; the quote and the backslash have no high bit, so x's own serves for all three.)
func special(x uint64) uint64 {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	q := x ^ (ones * '"')
	s := x ^ (ones * '\\')
	return ((q - ones) | (s - ones) | (x - ones*0x20)) &^ x & highs
}

// plainByte holds the bytes a string may hold as they are: all but the quote, the backslash and
// control characters.
var plainByte = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// hex4 decodes the four hex digits that start s.
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
