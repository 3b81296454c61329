package h1

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
)

// inlineBody is the largest in-memory body Do writes itself before reading the answer. A
// larger one (or a body of unknown provenance) is written on its own goroutine while the
// answer is read, so an upstream that answers early (a 413 before reading a large body) is
// heard instead of deadlocking against a full socket buffer.
const inlineBody = 64 << 10

// target is what Do derives from a Request once, before the first attempt.
type target struct {
	key    poolKey
	url    *url.URL
	method string
	host   string // the Host field
	path   string // the request target as given (Request.Target); "" = the URL's
	length int64  // of the body; -1: unknown, sent chunked
	inline bool   // the body is in memory and small: written by Do, no goroutine
}

var errNotSeeker = errors.New("h1: a Replayable request's Body must be an io.Seeker")

// resolve checks what can be checked before a connection is taken, and settles the body's
// framing.
func resolve(r *Request) (target, error) {
	u := r.URL
	if u == nil || u.Host == "" {
		return target{}, errors.New("h1: request URL has no host")
	}
	t := target{url: u, method: r.Method, host: r.Host, path: r.Target}
	switch u.Scheme {
	case "http":
	case "https":
		t.key.tls = true
	default:
		return target{}, fmt.Errorf("h1: unsupported URL scheme %q", u.Scheme)
	}
	t.key.host = u.Host
	if t.method == "" {
		t.method = http.MethodPost
	}
	if !isToken(t.method) {
		return target{}, fmt.Errorf("h1: invalid method %q", t.method)
	}
	if t.host == "" {
		t.host = u.Host
	}
	if !isTargetText(t.host) {
		return target{}, fmt.Errorf("h1: invalid Host %q", t.host)
	}
	if t.path != "" && (t.path[0] != '/' && t.path != "*" || !isTargetText(t.path)) {
		return target{}, fmt.Errorf("h1: invalid request target %q", t.path)
	}
	if r.Replayable && r.Body != nil {
		if _, ok := r.Body.(io.Seeker); !ok {
			return target{}, errNotSeeker
		}
	}
	size := inMemorySize(r.Body)
	switch {
	case r.Body == nil:
		if r.ContentLength > 0 {
			return target{}, errors.New("h1: ContentLength set without a Body")
		}
		t.length, t.inline = 0, true
	case r.ContentLength > 0:
		t.length = r.ContentLength
		t.inline = size == t.length && size <= inlineBody
	case r.ContentLength == 0 && size >= 0:
		// Like http.NewRequest: a bytes or strings reader states its own length.
		t.length, t.inline = size, size <= inlineBody
	case r.ContentLength == 0 || r.ContentLength == -1:
		t.length = -1
	default:
		return target{}, fmt.Errorf("h1: invalid ContentLength %d", r.ContentLength)
	}
	return t, nil
}

// inMemorySize is the unread length of a body already in memory, or -1.
func inMemorySize(body io.Reader) int64 {
	switch b := body.(type) {
	case *bytes.Reader:
		return int64(b.Len())
	case *strings.Reader:
		return int64(b.Len())
	case *bytes.Buffer:
		return int64(b.Len())
	}
	return -1
}

// isTargetText reports whether s may stand in the request line or the Host field as sent:
// visible bytes only. A space or a CR there would let a caller's input start a second request.
func isTargetText(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c == 0x7f {
			return false
		}
	}
	return true
}

// writeHead writes the request line and the fields into the connection's buffer and flushes
// nothing. The head is appended to the buffer's free space and handed to it in one Write (a
// WriteString per piece, four per field, cost more than the bytes); an invalid header writes
// nothing (invalid headers are rare: net/http's server already refused them on the way in).
func writeHead(cn *conn, r *Request, t *target) error {
	b := cn.bw.AvailableBuffer()
	b = append(b, t.method...)
	b = append(b, ' ')
	if t.path != "" {
		b = append(b, t.path...)
	} else {
		var err error
		if b, err = appendRequestTarget(b, t.url); err != nil {
			return err
		}
	}
	b = append(b, " HTTP/1.1\r\nHost: "...)
	b = append(b, t.host...)
	b = append(b, "\r\n"...)
	switch {
	case t.length > 0 || t.length == 0 && bodyExpected(t.method):
		// An empty POST still says so: some servers wait for a body otherwise (net/http
		// sends it for POST, PUT and PATCH too).
		b = append(b, "Content-Length: "...)
		b = strconv.AppendInt(b, t.length, 10)
		b = append(b, "\r\n"...)
	case t.length < 0:
		b = append(b, "Transfer-Encoding: chunked\r\n"...)
	}
	for name, values := range r.Header {
		if ownedField(name) {
			continue
		}
		if !isToken(name) {
			return fmt.Errorf("h1: invalid header field name %q", name)
		}
		for _, v := range values {
			if !isValue(v) {
				return fmt.Errorf("h1: invalid value for header field %q", name)
			}
			b = append(b, name...)
			b = append(b, ": "...)
			b = append(b, v...)
			b = append(b, "\r\n"...)
		}
	}
	b = append(b, "\r\n"...)
	_, err := cn.bw.Write(b)
	return err
}

// appendRequestTarget appends the origin-form target: the escaped path and the raw query.
func appendRequestTarget(b []byte, u *url.URL) ([]byte, error) {
	if u.Opaque != "" {
		ruri := u.RequestURI()
		if !isTargetText(ruri) {
			return b, fmt.Errorf("h1: invalid request target %q", ruri)
		}
		return append(b, ruri...), nil
	}
	path := u.EscapedPath() // escapes what needs it; no allocation when nothing does
	if path == "" {
		path = "/"
	}
	b = append(b, path...)
	if u.RawQuery != "" || u.ForceQuery {
		if !isTargetText(u.RawQuery) {
			return b, fmt.Errorf("h1: invalid query %q", u.RawQuery)
		}
		b = append(b, '?')
		b = append(b, u.RawQuery...)
	}
	return b, nil
}

func bodyExpected(method string) bool {
	return method == http.MethodPost || method == http.MethodPut || method == http.MethodPatch
}

// ownedField reports the fields the client writes itself from the Request: the caller's copy
// of them (say, a client's Content-Length passed through) must not make a second one.
func ownedField(name string) bool {
	switch len(name) {
	case 4:
		return strings.EqualFold(name, "Host")
	case 7:
		return strings.EqualFold(name, "Trailer")
	case 14:
		return strings.EqualFold(name, "Content-Length")
	case 17:
		return strings.EqualFold(name, "Transfer-Encoding")
	}
	return false
}

// writeInline writes a small in-memory body after the head and sends both in one write.
func writeInline(w *bufio.Writer, body io.Reader) error {
	if body != nil {
		// bytes.Reader and strings.Reader write themselves into the buffer: no copy buffer.
		if _, err := body.(io.WriterTo).WriteTo(w); err != nil {
			return err
		}
	}
	return w.Flush()
}

var copyBuffers = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// errShortBody: the body ended before its announced Content-Length.
var errShortBody = errors.New("request body shorter than its ContentLength")

// sendBody streams a body after the head, flushing after every read so that a body arriving
// piece by piece (a client's upload passed through) reaches the upstream as it comes. It
// tells the body failing (readFailed) from the connection failing.
func sendBody(cn *conn, body io.Reader, length int64) (readFailed bool, err error) {
	w := cn.bw
	if inMemorySize(body) < 0 {
		// The body may take its time: let the upstream see the head now.
		if err := w.Flush(); err != nil {
			return false, err
		}
	}
	bp := copyBuffers.Get().(*[]byte)
	defer copyBuffers.Put(bp)
	left := length
	for length < 0 || left > 0 {
		buf := *bp
		if length >= 0 && int64(len(buf)) > left {
			buf = buf[:left]
		}
		n, rerr := body.Read(buf)
		if n > 0 {
			if length < 0 {
				writeChunk(w, buf[:n], cn.num[:])
			} else {
				w.Write(buf[:n])
				left -= int64(n)
			}
			if err := w.Flush(); err != nil {
				return false, err
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return true, rerr
		}
	}
	if left > 0 {
		return true, errShortBody
	}
	if length < 0 {
		w.WriteString(lastChunk)
	}
	return false, w.Flush()
}
