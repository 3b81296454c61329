package h1

import (
	"bufio"
	"io"
	"strconv"
)

// The chunked transfer coding (RFC 9112 §7.1), both ways: the lines of a response body being
// read, and the framing of a request body being sent.

const (
	// maxChunkLine bounds a chunk-size line with its extensions. Servers send "1f4\r\n";
	// extensions are all but unused, and a long line is only work for us.
	maxChunkLine = 1024
	// maxTrailerBytes bounds the trailer section (from after the last chunk to the final
	// CRLF). net/http refuses trailers whose end it cannot see within its 4 KiB buffer; the
	// same bound keeps every body we accept one that net/http accepts too.
	maxTrailerBytes = 4 << 10
	// maxChunkOverhead is how much chunk framing may exceed what the data justifies (16
	// bytes per chunk plus twice its size), the rule net/http applies: one byte per chunk
	// is fine, kilobytes of extensions per byte are not.
	maxChunkOverhead = 16 << 10
)

// readChunkLine reads one CRLF-terminated line of chunked framing and returns it without
// the CRLF. The line must fit in the reader's buffer, which is far more than any limit here.
func readChunkLine(br *reader) ([]byte, error) {
	line, err := br.ReadSlice('\n')
	switch err {
	case nil:
	case errBufferFull:
		return nil, malformed("chunked framing line too long")
	case io.EOF:
		return nil, io.ErrUnexpectedEOF
	default:
		return nil, err
	}
	// A bare LF is refused here by net/http too (RFC 9112 errata 7633): chunk lines are
	// where a one-byte disagreement between two parsers becomes a smuggled message.
	if len(line) < 2 || line[len(line)-2] != '\r' {
		return nil, malformedLine("chunked framing line ends in a bare LF", line)
	}
	return line[:len(line)-2], nil
}

// parseChunkSize parses a chunk-size line: 1 to 16 hex digits, then either nothing but
// spaces and tabs, or ";" and extensions of visible bytes (which are ignored). Whitespace
// between the size and ";" is refused, as net/http refuses it.
func parseChunkSize(line []byte) (int64, error) {
	if len(line) > maxChunkLine {
		return 0, malformed("chunk size line over 1 KiB")
	}
	var n uint64
	i := 0
	for ; i < len(line); i++ {
		d, ok := hexDigit(line[i])
		if !ok {
			break
		}
		if i == 16 {
			return 0, malformedLine("chunk size over 16 hex digits", line)
		}
		n = n<<4 | uint64(d)
	}
	if i == 0 {
		return 0, malformedLine("invalid chunk size", line)
	}
	if n > 1<<63-1 {
		return 0, malformedLine("chunk size overflows int64", line)
	}
	rest := line[i:]
	if len(rest) > 0 && rest[0] == ';' {
		for _, c := range rest[1:] {
			if !isValueByte(c) {
				return 0, malformedLine("invalid byte in a chunk extension", line)
			}
		}
		return int64(n), nil
	}
	for _, c := range rest {
		if c != ' ' && c != '\t' {
			return 0, malformedLine("invalid chunk size", line)
		}
	}
	return int64(n), nil
}

func hexDigit(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// overhead adds one chunk's framing to the running excess and reports whether it is over the
// limit. line is the chunk-size line without its CRLF; the CRLF after the data counts too.
func overhead(excess *int64, line []byte, size int64) bool {
	*excess += int64(len(line)) + 2
	if size >= maxChunkOverhead { // the allowance alone clears any excess; also no overflow
		*excess = 0
		return false
	}
	*excess = max(*excess-16-2*size, 0)
	return *excess > maxChunkOverhead
}

// writeChunk frames p as one chunk. num is scratch for the size's digits.
func writeChunk(w *bufio.Writer, p []byte, num []byte) error {
	w.Write(strconv.AppendUint(num[:0], uint64(len(p)), 16))
	w.WriteString("\r\n")
	w.Write(p)
	_, err := w.WriteString("\r\n")
	return err
}

// lastChunk ends a chunked body: the zero-size chunk and an empty trailer section.
const lastChunk = "0\r\n\r\n"
