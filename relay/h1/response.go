package h1

import (
	"io"
	"net/http"
)

const (
	// maxHeadBytes bounds the response heads read for one request, interim (1xx) heads
	// included, as net/http's Transport counts them. Model servers send a few hundred bytes.
	maxHeadBytes = 64 << 10
	// maxFields bounds the field lines of one head, so that a head of 64 KiB of "a:\r\n"
	// cannot make us build a map of 16,000 entries.
	maxFields = 512
	// keepBlock and keepFields are the most head memory a connection keeps between
	// requests; an idle connection should not pin the scratch of one unusual answer.
	keepBlock  = 16 << 10
	keepFields = 64
)

// head is what one response head says: its status, and what its fields say about framing.
type head struct {
	status    int
	minor     int   // the response is HTTP/1.minor
	length    int64 // Content-Length; -1 when absent
	chunked   bool  // Transfer-Encoding: chunked
	close     bool  // Connection: close
	keepAlive bool  // Connection: keep-alive (an HTTP/1.0 upstream's opt-in)
	trailer   bool  // a Trailer field is present
	// badTrailer: Trailer announces a framing field. Refused with chunked framing, as
	// net/http does: trailers are dropped here, but the announcement is still a lie.
	badTrailer bool
}

// field locates one field line in headReader.block.
type field struct {
	name, value span
	kind        fieldKind
}

type span struct{ start, end int }

// fieldKind marks the fields the head's framing consumes, which never reach the caller as they
// were sent.
type fieldKind uint8

const (
	plainField fieldKind = iota
	lengthField
	lengthDuplicate // a repeat of the same Content-Length: kept once
	encodingField   // Transfer-Encoding: the body reaches the caller decoded
	trailerField    // Trailer: dropped with chunked framing, as the trailers themselves are
)

// headReader reads response heads from one connection. Its memory is reused from one
// response to the next.
type headReader struct {
	br *reader
	// left is what remains of maxHeadBytes for the current request.
	left int
	// got is set once any byte of the answer arrived: before that, a failed read means the
	// upstream closed the connection without answering.
	got bool
	// block holds the current head's field lines without their CRLFs, names canonicalized in
	// place: the header map's names and values are all cut from one string made of it.
	block  []byte
	fields []field
}

// read reads the response head for a request of the given method: interim (1xx) heads are
// read, checked and skipped. The returned head's fields are in hr until the next read.
func (hr *headReader) read(method string) (head, error) {
	hr.left = maxHeadBytes
	hr.got = false
	for {
		h, err := hr.readOne()
		if err != nil {
			return h, err
		}
		if h.status >= 200 {
			return h, nil
		}
		if h.status == http.StatusSwitchingProtocols {
			// We never ask to switch (Upgrade is hop-by-hop; callers strip it), so the
			// bytes after this are in no protocol we know.
			return h, malformed("101 Switching Protocols to a request that asked for no upgrade")
		}
	}
}

// readOne reads one head: a status line and field lines up to an empty line.
func (hr *headReader) readOne() (head, error) {
	h := head{length: -1}
	hr.block = hr.block[:0]
	hr.fields = hr.fields[:0]
	line, err := hr.line()
	if err != nil {
		return h, err
	}
	if h.status, h.minor, err = parseStatusLine(line); err != nil {
		return h, err
	}
	hr.block = hr.block[:0] // the status line is no longer needed
	return h, hr.readFields(&h)
}

// readFields reads the field lines after what hr.block holds (the server keeps its request
// line there), up to the empty line that ends the head, and checks what they say about
// framing.
func (hr *headReader) readFields(h *head) error {
	for {
		start := len(hr.block)
		line, err := hr.line()
		if err != nil {
			return err
		}
		if len(line) == 0 {
			return h.check()
		}
		if len(hr.fields) == maxFields {
			return malformed("more than 512 header fields")
		}
		f, err := parseField(line, true)
		if err != nil {
			return err
		}
		f.name.start += start
		f.name.end += start
		f.value.start += start
		f.value.end += start
		if err := hr.note(h, &f); err != nil {
			return err
		}
		hr.fields = append(hr.fields, f)
	}
}

// line reads one CRLF-terminated line onto hr.block and returns it without the CRLF. A line
// longer than the reader's buffer is gathered piece by piece, within hr.left.
func (hr *headReader) line() ([]byte, error) {
	start := len(hr.block)
	for {
		frag, err := hr.br.ReadSlice('\n')
		if len(frag) > 0 {
			hr.got = true
		}
		if hr.left -= len(frag); hr.left < 0 {
			return nil, errHeadTooLarge
		}
		hr.block = append(hr.block, frag...)
		if err == nil {
			break
		}
		if err != errBufferFull {
			if err == io.EOF {
				if hr.got {
					err = io.ErrUnexpectedEOF
				}
			}
			return nil, err
		}
	}
	line := hr.block[start:]
	// RFC 9112 §2.2 lets a recipient take a bare LF for a line end; net/http's client does.
	// We do not: every model server we front ends lines with CRLF, and a parser that
	// tolerates what others refuse is where smuggling starts (see doc.go).
	if len(line) < 2 || line[len(line)-2] != '\r' {
		return nil, malformedLine("line ends in a bare LF", line)
	}
	hr.block = hr.block[:len(hr.block)-2]
	return hr.block[start:], nil
}

// parseStatusLine parses "HTTP/1.x 200 reason" (RFC 9112 §4). The SP before an empty
// reason may be missing, as many servers send it and net/http accepts it. The reason must
// hold no control byte: a CR in it would split the response for a laxer reader downstream.
func parseStatusLine(line []byte) (status, minor int, err error) {
	if len(line) < 12 || string(line[:7]) != "HTTP/1." || !isDigit(line[7]) || line[8] != ' ' ||
		!isDigit(line[9]) || !isDigit(line[10]) || !isDigit(line[11]) {
		return 0, 0, malformedLine("invalid status line", line)
	}
	status = int(line[9]-'0')*100 + int(line[10]-'0')*10 + int(line[11]-'0')
	if status < 100 {
		return 0, 0, malformedLine("status code below 100", line)
	}
	if len(line) > 12 {
		if line[12] != ' ' {
			return 0, 0, malformedLine("invalid status line", line)
		}
		for _, c := range line[13:] {
			if !isValueByte(c) {
				return 0, 0, malformedLine("control byte in the reason phrase", line)
			}
		}
	}
	return status, int(line[7] - '0'), nil
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// parseField splits and checks one field line (RFC 9112 §5): a token, a colon, then a value of
// visible bytes, spaces and tabs. With canon, it canonicalizes the name in place. Spans are
// relative to line.
func parseField(line []byte, canon bool) (field, error) {
	if line[0] == ' ' || line[0] == '\t' {
		// obs-fold (RFC 9112 §5.2): a gateway may refuse it with a 502 rather than unfold;
		// net/http unfolds. Refusing leaves no doubt about where a field ends.
		return field{}, malformedLine("folded header line (obs-fold)", line)
	}
	colon := 0
	for colon < len(line) && line[colon] != ':' {
		if !isTokenByte(line[colon]) {
			// Includes whitespace before the colon, which RFC 9112 §5.1 forbids.
			return field{}, malformedLine("invalid header field name", line)
		}
		colon++
	}
	if colon == 0 || colon == len(line) {
		return field{}, malformedLine("invalid header field line", line)
	}
	v0, v1 := colon+1, len(line)
	for v0 < v1 && (line[v0] == ' ' || line[v0] == '\t') {
		v0++
	}
	for v1 > v0 && (line[v1-1] == ' ' || line[v1-1] == '\t') {
		v1--
	}
	for _, c := range line[v0:v1] {
		if !isValueByte(c) {
			return field{}, malformedLine("control byte in a header value", line)
		}
	}
	if canon {
		canonicalize(line[:colon])
	}
	return field{name: span{0, colon}, value: span{v0, v1}}, nil
}

// note records what a field says about framing and marks the fields framing consumes.
func (hr *headReader) note(h *head, f *field) error {
	name := hr.block[f.name.start:f.name.end]
	value := hr.block[f.value.start:f.value.end]
	switch string(name) {
	case "Content-Length":
		if h.length >= 0 {
			// RFC 9110 §8.6 lets a recipient take a repeated identical value as one; so does
			// net/http, and no reader can frame it two ways. Different values are refused.
			if string(value) != string(hr.contentLength()) {
				return malformed("two different Content-Length values")
			}
			f.kind = lengthDuplicate
			return nil
		}
		n, ok := parseLength(value)
		if !ok {
			return malformedLine("invalid Content-Length", value)
		}
		h.length = n
		f.kind = lengthField
	case "Transfer-Encoding":
		// Only one field, exactly "chunked": a coding we would have to undo (gzip, chunked)
		// is refused, and so is a non-final chunked, whose framing is "until close" to some
		// readers and chunked to others.
		if h.chunked {
			return malformed("more than one Transfer-Encoding field")
		}
		if !asciiEqualFold(value, "chunked") {
			return malformedLine("unsupported Transfer-Encoding", value)
		}
		h.chunked = true
		f.kind = encodingField
	case "Connection":
		eachElement(value, func(e []byte) {
			switch {
			case asciiEqualFold(e, "close"):
				h.close = true
			case asciiEqualFold(e, "keep-alive"):
				h.keepAlive = true
			}
		})
	case "Trailer":
		h.trailer = true
		f.kind = trailerField
		eachElement(value, func(e []byte) {
			if asciiEqualFold(e, "Content-Length") || asciiEqualFold(e, "Transfer-Encoding") ||
				asciiEqualFold(e, "Trailer") {
				h.badTrailer = true
			}
		})
	}
	return nil
}

// contentLength is the value of the first Content-Length field read.
func (hr *headReader) contentLength() []byte {
	for _, f := range hr.fields {
		if f.kind == lengthField {
			return hr.block[f.value.start:f.value.end]
		}
	}
	return nil
}

// parseLength parses 1*DIGIT that fits in an int64. No sign, no spaces, no list ("5, 5").
func parseLength(v []byte) (int64, bool) {
	if len(v) == 0 {
		return 0, false
	}
	var n int64
	for _, c := range v {
		if !isDigit(c) {
			return 0, false
		}
		d := int64(c - '0')
		if n > (1<<63-1-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	return n, true
}

// check applies the rules that need the whole head.
func (h *head) check() error {
	if !h.chunked {
		return nil
	}
	switch {
	case h.length >= 0:
		// RFC 9112 §6.3 lets the chunked coding win, "but ought to be handled as an error":
		// it is the classic shape of request smuggling and response splitting. net/http
		// lets Transfer-Encoding win; we refuse.
		return malformed("both Content-Length and Transfer-Encoding")
	case h.minor == 0:
		// An HTTP/1.0 message with Transfer-Encoding was likely forwarded by something that
		// did not understand it (RFC 9112 §6.1); its framing cannot be trusted. net/http
		// ignores the field; we refuse.
		return malformed("Transfer-Encoding in an HTTP/1.0 response")
	case h.badTrailer:
		return malformed("Trailer announces a framing field")
	}
	return nil
}

// framing is how a response's body is delimited.
type framing uint8

const (
	noBody      framing = iota
	lengthBody          // Content-Length bytes
	chunkedBody         // chunked transfer coding
	closeBody           // everything until the upstream closes the connection
)

// frame decides the body's framing (RFC 9112 §6.3), the Content-Length to report (as
// net/http reports it: -1 unknown; a HEAD answer's own field; 0 for 1xx, 204 and 304) and
// whether the connection may carry another request afterwards.
func (h *head) frame(method string) (f framing, length int64, keepAlive bool) {
	keepAlive = !h.close && (h.minor >= 1 || h.keepAlive)
	bodiless := h.status/100 == 1 || h.status == http.StatusNoContent
	switch {
	case method == http.MethodHead || bodiless || h.status == http.StatusNotModified:
		if bodiless && (h.chunked || h.length > 0) {
			// A 204 must not announce a body (RFC 9110 §8.6, RFC 9112 §6.1); if the upstream
			// sends one anyway it would be read as the next answer. Use the connection no more.
			keepAlive = false
		}
		if method == http.MethodHead {
			return noBody, h.length, keepAlive
		}
		return noBody, 0, keepAlive
	case h.chunked:
		return chunkedBody, -1, keepAlive
	case h.length == 0:
		return noBody, 0, keepAlive
	case h.length > 0:
		return lengthBody, h.length, keepAlive
	}
	return closeBody, -1, false
}

// header builds the caller's http.Header of the head just read. Every name and value is cut
// from one string, and the value slices share one backing array: values when it has room for
// every field, else one of their own. Three allocations (the string, the map and its group of
// slots), four when values is short.
func (hr *headReader) header(h *head, values []string) http.Header {
	if len(hr.fields) == 0 {
		return make(http.Header)
	}
	return hr.headerOf(h, string(hr.block), values)
}

// headerOf builds the header from s, hr.block as a string: names and values are cut from
// it. The value slices share values' backing array when it has room for every field, else
// one of their own.
func (hr *headReader) headerOf(h *head, s string, values []string) http.Header {
	hdr := make(http.Header, len(hr.fields))
	if len(values) < len(hr.fields) {
		values = make([]string, len(hr.fields))
	}
	for i, f := range hr.fields {
		switch {
		case f.kind == encodingField, f.kind == lengthDuplicate,
			f.kind == trailerField && h.chunked:
			continue
		}
		name, value := s[f.name.start:f.name.end], s[f.value.start:f.value.end]
		if vv, ok := hdr[name]; ok {
			hdr[name] = append(vv, value)
			continue
		}
		values[i] = value
		hdr[name] = values[i : i+1 : i+1]
	}
	hr.shrink()
	return hdr
}

// shrink lets go of scratch memory an unusually large head made the connection hold.
func (hr *headReader) shrink() {
	if cap(hr.block) > keepBlock {
		hr.block = nil
	}
	if cap(hr.fields) > keepFields {
		hr.fields = nil
	}
}
