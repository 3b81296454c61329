package usage

import "bytes"

// framer finds where server-sent events end, in bytes fed in pieces cut anywhere. An event
// ends with a blank line: a line terminator (\n or \r\n) right after another, so "\n\n",
// "\r\n\r\n", "\n\r\n" and "\r\n\n" all end one. A lone \r is not a line end here (the SSE
// specification allows it; no model server writes it). Its state is what the last piece
// ended with, so that a boundary cut in two is still found.
type framer struct {
	state uint8
}

const (
	atLineStart   uint8 = iota // after a line terminator (and at the start of the stream)
	atLineStartCR              // after a line terminator and a \r
	inLine                     // anywhere else
)

// cut returns the length of the event that b starts with (which may have begun in earlier
// pieces), its blank line included, or -1 if b ends before the event does.
func (f *framer) cut(b []byte) int {
	if len(b) == 0 {
		return -1
	}
	switch f.state {
	case atLineStart:
		switch {
		case b[0] == '\n':
			return 1
		case b[0] == '\r' && len(b) == 1:
			f.state = atLineStartCR
			return -1
		case b[0] == '\r' && b[1] == '\n':
			return 2
		}
	case atLineStartCR:
		if b[0] == '\n' {
			f.state = atLineStart
			return 1
		}
	}
	return f.scan(b)
}

// scan finds the end of the event in b from inside a line.
func (f *framer) scan(b []byte) int {
	for i := 0; ; {
		j := bytes.IndexByte(b[i:], '\n')
		if j < 0 {
			f.state = inLine
			return -1
		}
		k := i + j + 1 // at the start of a line
		switch {
		case k == len(b):
			f.state = atLineStart
			return -1
		case b[k] == '\n':
			f.state = atLineStart
			return k + 1
		case b[k] != '\r':
		case k+1 == len(b):
			f.state = atLineStartCR
			return -1
		case b[k+1] == '\n':
			f.state = atLineStart
			return k + 2
		}
		i = k
	}
}
