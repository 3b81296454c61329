package h1

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// responseWriter is the handler's http.ResponseWriter. The answer's data gathers in a pooled
// 4 KiB buffer taken at the first write and given back at every flush and at the end, so a
// stream between two events holds none. The head is built when the first bytes must go
// out: at a flush, when the buffer is full, or when the handler returns; in the last case
// the whole body is known and is sent with its Content-Length, else chunked (or, to an
// HTTP/1.0 client, until the close). The head and the data leave in one write (writev).
// Nothing is sniffed: an answer without Content-Type goes without one.
type responseWriter struct {
	c      *inbound
	header http.Header
	method string
	minor  int
	// reqClose: the request asked for the connection to close after the answer.
	reqClose bool

	status      int
	wroteHeader bool
	committed   bool // the head is built and the framing decided
	headSent    bool
	framing     outFraming
	length      int64 // the Content-Length the handler set, or the one decided; -1: none
	written     int64
	closeAfter  bool
	out         *[]byte // the data buffer, while held
	n           int     // data bytes in it, from outReserve on
	err         error   // a failed write: the client is gone
	finished    bool
	hijacked    bool
	deadline    bool // the handler set a write deadline, to be cleared at the end
}

type outFraming uint8

const (
	outNone    outFraming = iota // no body may follow (HEAD, 1xx, 204, 304)
	outLength                    // Content-Length
	outChunked                   // chunked transfer coding
	outClose                     // until the connection closes (an HTTP/1.0 client)
)

const (
	outSize = 4 << 10
	// outReserve is room before the data for a chunk-size line ("ff1\r\n"), and outSpare
	// room after it for the CRLF that ends a chunk and the last chunk: a chunk leaves in one
	// piece with its framing.
	outReserve = 8
	outSpare   = 2 + len(lastChunk)
)

var outBufs = sync.Pool{New: func() any { b := make([]byte, outSize); return &b }}

var (
	crlf          = []byte("\r\n")
	crlfLastChunk = []byte("\r\n" + lastChunk)
	lastChunkOnly = []byte(lastChunk)
)

var errAfterEnd = errors.New("h1: write after the handler returned")

// start readies the answer to r. The header map is new for every answer, not kept by the
// connection and cleared: a handler's goroutine that still held it after the handler
// returned would write into the next request's answer, or race its handler on the map.
func (w *responseWriter) start(c *inbound, r *http.Request) {
	w.c, w.header, w.method, w.minor, w.reqClose = c, make(http.Header), r.Method, r.ProtoMinor, r.Close
	w.length = -1
}

func (w *responseWriter) Header() http.Header { return w.header }

func (w *responseWriter) WriteHeader(code int) {
	if w.wroteHeader || w.hijacked || w.finished {
		return
	}
	if code < 100 || code > 999 {
		panic(fmt.Sprintf("h1: invalid WriteHeader code %v", code)) // as net/http: a handler bug
	}
	if code < 200 && code != http.StatusSwitchingProtocols {
		w.interim(code)
		return
	}
	w.c.skipContinue()
	w.wroteHeader, w.status = true, code
	if cl := w.header.Get("Content-Length"); cl != "" {
		n, err := strconv.ParseInt(cl, 10, 64)
		if err != nil || n < 0 {
			w.c.s.logf("h1: handler set an invalid Content-Length %q; dropped", cl)
			w.header.Del("Content-Length")
		} else {
			w.length = n
		}
	}
}

// interim sends a 1xx answer at once, with the fields set so far (103 Early Hints' Link).
func (w *responseWriter) interim(code int) {
	if code == http.StatusContinue {
		w.c.sendContinue()
		return
	}
	b := w.appendStatus(w.c.head[:0], code)
	b, _ = appendFields(b, w.header)
	w.c.head = append(b, crlf...)
	if _, err := w.c.nc.Write(w.c.head); err != nil {
		w.failed(err)
	}
}

func (w *responseWriter) Write(p []byte) (int, error) {
	switch {
	case w.hijacked:
		return 0, http.ErrHijacked
	case w.finished:
		return 0, errAfterEnd
	case !w.wroteHeader:
		w.WriteHeader(http.StatusOK)
	}
	if len(p) == 0 {
		return 0, nil
	}
	if !bodyAllowed(w.status) {
		return 0, http.ErrBodyNotAllowed
	}
	if w.length >= 0 && w.written+int64(len(p)) > w.length {
		return 0, http.ErrContentLength
	}
	if w.method == http.MethodHead {
		w.written += int64(len(p))
		return len(p), nil
	}
	if w.err != nil {
		return 0, w.err
	}
	w.written += int64(len(p))
	if w.out == nil {
		w.out = outBufs.Get().(*[]byte)
	}
	if len(p) <= outSize-outReserve-outSpare-w.n {
		w.n += copy((*w.out)[outReserve+w.n:], p)
		return len(p), nil
	}
	if !w.committed {
		w.commit(false)
	}
	if err := w.send(p, false); err != nil {
		return 0, err
	}
	return len(p), nil
}

func bodyAllowed(status int) bool {
	return status >= 200 && status != http.StatusNoContent && status != http.StatusNotModified
}

// Flush sends what the handler wrote so far (http.Flusher).
func (w *responseWriter) Flush() { w.FlushError() }

// FlushError is what http.ResponseController's Flush calls.
func (w *responseWriter) FlushError() error {
	switch {
	case w.hijacked:
		return http.ErrHijacked
	case w.finished:
		return errAfterEnd
	case !w.wroteHeader:
		w.WriteHeader(http.StatusOK)
	}
	if !w.committed {
		w.commit(false)
	}
	err := w.send(nil, false)
	w.release()
	return err
}

// SetReadDeadline and SetWriteDeadline are what http.ResponseController's calls reach.
func (w *responseWriter) SetReadDeadline(t time.Time) error {
	w.c.bodyDeadline.Store(true)
	return w.c.nc.SetReadDeadline(t)
}

func (w *responseWriter) SetWriteDeadline(t time.Time) error {
	w.deadline = true
	return w.c.nc.SetWriteDeadline(t)
}

// EnableFullDuplex: the body stays readable while the answer is written, always.
func (w *responseWriter) EnableFullDuplex() error { return nil }

// Hijack hands the connection over (a WebSocket upgrade), before any answer was written.
func (w *responseWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	if w.wroteHeader || w.finished || w.hijacked {
		return nil, nil, errors.New("h1: Hijack after the answer began")
	}
	c := w.c
	c.mu.Lock()
	c.watching = false
	c.mu.Unlock()
	w.hijacked, c.hijacked = true, true
	leave(c.s, c.s.conns, c)
	w.release()
	var src io.Reader = c.nc
	if n := c.br.Buffered(); n > 0 { // what the client sent after its request: the new protocol's
		early, _ := c.br.Peek(n)
		src = io.MultiReader(bytes.NewReader(bytes.Clone(early)), c.nc)
	}
	c.br.drop()
	return c.nc, bufio.NewReadWriter(bufio.NewReader(src), bufio.NewWriter(c.nc)), nil
}

// commit decides the framing and builds the head. done: the handler has returned, so the
// buffered data is the whole body.
func (w *responseWriter) commit(done bool) {
	w.committed = true
	// A client still waiting for 100 Continue will not send its body; a body shorter than
	// its Content-Length leaves the client waiting for the rest: either way the connection
	// cannot carry another request.
	keep := !w.reqClose && !w.c.s.closing.Load() && !closeAsked(w.header) &&
		w.status != http.StatusSwitchingProtocols && !w.c.continueSkipped &&
		!(done && w.length >= 0 && w.written < w.length && w.method != http.MethodHead)
	switch {
	case w.method == http.MethodHead || !bodyAllowed(w.status):
		w.framing = outNone
	case w.length >= 0:
		w.framing = outLength
	case done:
		w.framing, w.length = outLength, int64(w.n)
	case w.minor == 1:
		w.framing = outChunked
	default:
		w.framing, keep = outClose, false
	}
	w.closeAfter = !keep
	b := w.appendStatus(w.c.head[:0], w.status)
	b, hasDate := appendFields(b, w.header)
	if !hasDate {
		b = appendDate(b)
	}
	switch {
	case w.framing == outChunked:
		b = append(b, "Transfer-Encoding: chunked\r\n"...)
	case w.length >= 0 && (w.framing == outLength || w.method == http.MethodHead ||
		w.status == http.StatusNotModified):
		b = append(b, "Content-Length: "...)
		b = strconv.AppendInt(b, w.length, 10)
		b = append(b, crlf...)
	}
	switch {
	case !keep:
		b = append(b, "Connection: close\r\n"...)
	case w.minor == 0:
		b = append(b, "Connection: keep-alive\r\n"...)
	}
	w.c.head = append(b, crlf...)
}

func (w *responseWriter) appendStatus(b []byte, code int) []byte {
	b = append(b, "HTTP/1.1 "...)
	b = strconv.AppendInt(b, int64(code), 10)
	b = append(b, ' ')
	b = append(b, http.StatusText(code)...)
	return append(b, crlf...)
}

// closeAsked reports whether the handler's Connection field says close (relay's answers to
// a body it refused do).
func closeAsked(h http.Header) bool {
	asked := false
	for _, v := range h["Connection"] {
		eachElement([]byte(v), func(e []byte) { asked = asked || asciiEqualFold(e, "close") })
	}
	return asked
}

// appendFields writes the handler's fields, but those the server owns (framing and
// Connection). A name that is not a token is dropped and a control byte in a value becomes
// a space, as net/http does, so that no handler can split an answer. hasDate: the handler
// set Date, or set it to nothing to have none.
func appendFields(b []byte, h http.Header) (_ []byte, hasDate bool) {
	for name, values := range h {
		switch name {
		case "Content-Length", "Transfer-Encoding", "Connection", "Trailer":
			continue
		case "Date":
			hasDate = true
		}
		if !isToken(name) {
			continue
		}
		for _, v := range values {
			b = append(b, name...)
			b = append(b, ": "...)
			if isValue(v) {
				b = append(b, v...)
			} else {
				for i := 0; i < len(v); i++ {
					if c := v[i]; isValueByte(c) {
						b = append(b, c)
					} else {
						b = append(b, ' ')
					}
				}
			}
			b = append(b, crlf...)
		}
	}
	return b, hasDate
}

// dateField is the Date field of the current second, built once a second.
type dateField struct {
	sec  int64
	line []byte
}

var date atomic.Pointer[dateField]

func appendDate(b []byte) []byte {
	now := time.Now()
	d := date.Load()
	if d == nil || d.sec != now.Unix() {
		line := now.UTC().AppendFormat([]byte("Date: "), http.TimeFormat)
		d = &dateField{sec: now.Unix(), line: append(line, crlf...)}
		date.Store(d)
	}
	return append(b, d.line...)
}

// send writes what is due in one write: the head if not yet sent, the buffered data and
// extra, each framed as a chunk when chunked, and the last chunk when last.
func (w *responseWriter) send(extra []byte, last bool) error {
	if w.err != nil {
		return w.err
	}
	c := w.c
	iov := c.iovs[:0]
	if !w.headSent {
		iov = append(iov, c.head)
		w.headSent = true
	}
	chunked := w.framing == outChunked
	if w.n > 0 {
		buf := *w.out
		start, end := outReserve, outReserve+w.n
		if chunked {
			size := strconv.AppendUint(c.num[:0], uint64(w.n), 16)
			start -= len(size) + 2
			copy(buf[start:], size)
			copy(buf[start+len(size):], crlf)
			end += copy(buf[end:], crlf)
			if last && len(extra) == 0 {
				end += copy(buf[end:], lastChunk)
				last = false
			}
		}
		iov = append(iov, buf[start:end])
		w.n = 0
	}
	if len(extra) > 0 {
		if chunked {
			size := strconv.AppendUint(c.size[:0], uint64(len(extra)), 16)
			iov = append(iov, append(size, crlf...), extra)
			if last {
				iov, last = append(iov, crlfLastChunk), false
			} else {
				iov = append(iov, crlf)
			}
		} else {
			iov = append(iov, extra)
		}
	}
	if last && chunked {
		iov = append(iov, lastChunkOnly)
	}
	var err error
	switch len(iov) {
	case 0:
		return nil
	case 1:
		_, err = c.nc.Write(iov[0])
	default:
		c.iov = iov
		_, err = c.iov.WriteTo(c.nc)
	}
	clear(c.iovs[:])
	if err != nil {
		w.failed(err)
	}
	return err
}

// failed records a write that failed: the client is gone, the request is canceled.
func (w *responseWriter) failed(err error) {
	w.err, w.closeAfter = err, true
	w.c.clientGone()
}

func (w *responseWriter) release() {
	if w.out != nil {
		outBufs.Put(w.out)
		w.out, w.n = nil, 0
	}
}

// finish ends the answer once the handler has returned, and reports whether the connection
// may carry another request.
func (w *responseWriter) finish() bool {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if !w.committed {
		w.commit(true)
	}
	w.send(nil, true)
	w.release()
	w.finished = true
	if w.deadline {
		w.c.nc.SetWriteDeadline(time.Time{})
	}
	if w.framing == outLength && w.written < w.length {
		w.closeAfter = true // the client is owed bytes it will never get (sent while streaming)
	}
	if cap(w.c.head) > keepBlock {
		w.c.head = nil
	}
	return !w.closeAfter && w.err == nil
}

// abandon drops the answer of a handler that panicked: nothing more is sent.
func (w *responseWriter) abandon() {
	w.release()
	w.finished = true
}
