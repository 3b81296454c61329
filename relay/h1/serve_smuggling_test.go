package h1

import (
	"io"
	"log"
	"net"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
)

// get11 starts a request with a Host field; post11 one with a body to frame.
const (
	get11  = "GET /v1/models HTTP/1.1\r\nHost: relay\r\n"
	post11 = "POST /v1/chat/completions HTTP/1.1\r\nHost: relay\r\n"
)

// requestSmuggling are requests whose framing or syntax two parsers could read two ways, or
// that no client of ours sends. The server must serve none of them: its handler either never
// runs or fails to read the body. They seed FuzzRequest too.
var requestSmuggling = []struct {
	name, raw string
	netHTTP   bool // net/http's server serves it (its handler runs and reads the body whole)
}{
	// Content-Length
	{name: "two different Content-Length", raw: post11 + "Content-Length: 5\r\nContent-Length: 6\r\n\r\nhello!"},
	{name: "Content-Length list", raw: post11 + "Content-Length: 5, 5\r\n\r\nhello"},
	{name: "negative Content-Length", raw: post11 + "Content-Length: -1\r\n\r\n"},
	{name: "signed Content-Length", raw: post11 + "Content-Length: +5\r\n\r\nhello"},
	{name: "hex Content-Length", raw: post11 + "Content-Length: 0x5\r\n\r\nhello"},
	{name: "empty Content-Length", raw: post11 + "Content-Length:\r\n\r\n"},
	{name: "Content-Length overflowing int64", raw: post11 + "Content-Length: 9223372036854775808\r\n\r\n"},
	{name: "Content-Length with inner space", raw: post11 + "Content-Length: 1 2\r\n\r\nx"},
	// Content-Length with Transfer-Encoding
	{name: "CL then TE", netHTTP: true,
		raw: post11 + "Content-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"},
	{name: "TE then CL", netHTTP: true,
		raw: post11 + "Transfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n5\r\nhello\r\n0\r\n\r\n"},
	// Transfer-Encoding
	{name: "TE gzip", raw: post11 + "Transfer-Encoding: gzip\r\n\r\nxx"},
	{name: "TE gzip, chunked", raw: post11 + "Transfer-Encoding: gzip, chunked\r\n\r\n2\r\nxx\r\n0\r\n\r\n"},
	{name: "TE chunked not final", raw: post11 + "Transfer-Encoding: chunked, gzip\r\n\r\n2\r\nxx\r\n0\r\n\r\n"},
	{name: "TE identity", raw: post11 + "Transfer-Encoding: identity\r\n\r\nxx"},
	{name: "TE twice", raw: post11 + "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"},
	{name: "TE in a list field", raw: post11 + "Transfer-Encoding: chunked,\r\n\r\n0\r\n\r\n"},
	{name: "TE on HTTP/1.0", netHTTP: true,
		raw: "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"},
	{name: "TE with a Unicode lookalike", raw: post11 + "Transfer-Encoding: \u017fhunked\r\n\r\n0\r\n\r\n"},
	{name: "Trailer announcing Content-Length",
		raw: post11 + "Trailer: Content-Length\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nContent-Length: 5\r\n\r\n"},
	// Line ends
	{name: "bare LF after the request line", netHTTP: true, raw: "GET / HTTP/1.1\nHost: relay\r\n\r\n"},
	{name: "bare LF after a field", netHTTP: true, raw: get11 + "X-A: 1\n\r\n"},
	{name: "bare LF ending the head", netHTTP: true, raw: get11 + "\n"},
	{name: "bare LF everywhere", netHTTP: true, raw: "GET / HTTP/1.1\nHost: relay\n\n"},
	{name: "bare CR in a field", raw: get11 + "X-A: 1\rContent-Length: 2\r\n\r\nok"},
	{name: "bare LF after a chunk size", raw: post11 + "Transfer-Encoding: chunked\r\n\r\n2\nok\r\n0\r\n\r\n"},
	{name: "bare LF after chunk data", raw: post11 + "Transfer-Encoding: chunked\r\n\r\n2\r\nok\n0\r\n\r\n"},
	{name: "bare LF after the last chunk", raw: post11 + "Transfer-Encoding: chunked\r\n\r\n0\n\r\n"},
	{name: "bare LF in the trailers", netHTTP: true, raw: post11 + "Transfer-Encoding: chunked\r\n\r\n0\r\nX-T: 1\n\r\n"},
	{name: "chunk data longer than its size", raw: post11 + "Transfer-Encoding: chunked\r\n\r\n2\r\nokay\r\n0\r\n\r\n"},
	{name: "empty line before the request line", raw: "\r\n" + get11 + "\r\n"},
	// Field syntax
	{name: "obs-fold", netHTTP: true, raw: get11 + "X-A: 1\r\n 2\r\n\r\n"},
	{name: "obs-fold of Content-Length", netHTTP: true, raw: post11 + "Content-Length: 2\r\n\t\r\n\r\nok"},
	{name: "space before the colon", raw: post11 + "Content-Length : 2\r\n\r\nok"},
	{name: "space in a name", raw: get11 + "X A: 1\r\n\r\n"},
	{name: "leading space on the first field", raw: "GET / HTTP/1.1\r\n Host: relay\r\n\r\n"},
	{name: "no colon", raw: get11 + "X-A 1\r\n\r\n"},
	{name: "empty name", raw: get11 + ": 1\r\n\r\n"},
	{name: "NUL in a value", raw: get11 + "X-A: a\x00b\r\n\r\n"},
	{name: "DEL in a value", raw: get11 + "X-A: a\x7fb\r\n\r\n"},
	{name: "non-ASCII name", raw: get11 + "X-\xc3\xa9: 1\r\n\r\n"},
	// Chunk sizes and extensions
	{name: "chunk size over 16 digits", raw: post11 + "Transfer-Encoding: chunked\r\n\r\n00000000000000002\r\nok\r\n0\r\n\r\n"},
	{name: "chunk size overflowing int64", raw: post11 + "Transfer-Encoding: chunked\r\n\r\n8000000000000000\r\nok\r\n0\r\n\r\n"},
	{name: "chunk size line over 1 KiB", netHTTP: true,
		raw: post11 + "Transfer-Encoding: chunked\r\n\r\n2;" + long(2000) + "\r\nok\r\n0\r\n\r\n"},
	{name: "chunk size line over 4 KiB", raw: post11 + "Transfer-Encoding: chunked\r\n\r\n2;" + long(5000) + "\r\nok\r\n0\r\n\r\n"},
	{name: "negative chunk size", raw: post11 + "Transfer-Encoding: chunked\r\n\r\n-2\r\nok\r\n0\r\n\r\n"},
	{name: "empty chunk size", raw: post11 + "Transfer-Encoding: chunked\r\n\r\n\r\nok\r\n0\r\n\r\n"},
	{name: "0x chunk size", raw: post11 + "Transfer-Encoding: chunked\r\n\r\n0x2\r\nok\r\n0\r\n\r\n"},
	{name: "space before a chunk extension", raw: post11 + "Transfer-Encoding: chunked\r\n\r\n2 ;a\r\nok\r\n0\r\n\r\n"},
	{name: "NUL in a chunk extension", netHTTP: true, raw: post11 + "Transfer-Encoding: chunked\r\n\r\n2;a\x00\r\nok\r\n0\r\n\r\n"},
	{name: "bare CR in a chunk extension", raw: post11 + "Transfer-Encoding: chunked\r\n\r\n2;a\rb\r\nok\r\n0\r\n\r\n"},
	{name: "trailer section over 4 KiB",
		raw: post11 + "Transfer-Encoding: chunked\r\n\r\n0\r\nX-T: " + long(5000) + "\r\n\r\n"},
	{name: "folded trailer", netHTTP: true, raw: post11 + "Transfer-Encoding: chunked\r\n\r\n0\r\nX-T: 1\r\n 2\r\n\r\n"},
	// Request lines
	{name: "invalid method", raw: "G(T / HTTP/1.1\r\nHost: relay\r\n\r\n"},
	{name: "empty method", raw: " / HTTP/1.1\r\nHost: relay\r\n\r\n"},
	{name: "lower-case protocol", raw: "GET / http/1.1\r\nHost: relay\r\n\r\n"},
	{name: "HTTP/2.0 request line", raw: "GET / HTTP/2.0\r\nHost: relay\r\n\r\n"},
	{name: "HTTP/1.2", netHTTP: true, raw: "GET / HTTP/1.2\r\nHost: relay\r\n\r\n"},
	{name: "HTTP/0.9", raw: "GET / HTTP/0.9\r\nHost: relay\r\n\r\n"},
	{name: "no version", raw: "GET /\r\nHost: relay\r\n\r\n"},
	{name: "double space", raw: "GET  / HTTP/1.1\r\nHost: relay\r\n\r\n"},
	{name: "tab as a separator", raw: "GET\t/ HTTP/1.1\r\nHost: relay\r\n\r\n"},
	{name: "space in the target", raw: "GET /a b HTTP/1.1\r\nHost: relay\r\n\r\n"},
	{name: "control byte in the target", raw: "GET /a\x01b HTTP/1.1\r\nHost: relay\r\n\r\n"},
	{name: "request line too long", raw: "GET /" + long(70<<10) + " HTTP/1.1\r\nHost: relay\r\n\r\n"},
	{name: "CONNECT authority-form", netHTTP: true, raw: "CONNECT relay:443 HTTP/1.1\r\nHost: relay:443\r\n\r\n"},
	{name: "relative target", raw: "GET a/b HTTP/1.1\r\nHost: relay\r\n\r\n"},
	{name: "asterisk for GET", netHTTP: true, raw: "GET * HTTP/1.1\r\nHost: relay\r\n\r\n"},
	{name: "asterisk for OPTIONS", raw: "OPTIONS * HTTP/1.1\r\nHost: relay\r\n\r\n"},
	// Host
	{name: "no Host on HTTP/1.1", raw: "GET / HTTP/1.1\r\n\r\n"},
	{name: "two Host fields", raw: get11 + "Host: other\r\n\r\n"},
	{name: "Host with a slash", raw: "GET / HTTP/1.1\r\nHost: relay/x\r\n\r\n"},
	{name: "Host with a space", raw: "GET / HTTP/1.1\r\nHost: re lay\r\n\r\n"},
	// Expectations and size
	{name: "Expect other than 100-continue", raw: post11 + "Expect: teapot\r\nContent-Length: 2\r\n\r\nok"},
	{name: "head over 64 KiB", raw: get11 + strings.Repeat("X-Pad: "+long(1000)+"\r\n", 70) + "\r\n"},
	{name: "more than 512 fields", netHTTP: true, raw: get11 + strings.Repeat("X-A: 1\r\n", 600) + "\r\n"},
}

// TestRequestSmuggling: each request above is served neither by this server nor, through
// its framing, as a second request. The netHTTP column records what net/http's server does
// with it (checked, so that the table stays true): where it says true, net/http serves it
// and this server refuses on purpose (doc.go lists why).
func TestRequestSmuggling(t *testing.T) {
	both := startBoth(t)
	for _, tc := range requestSmuggling {
		t.Run(tc.name, func(t *testing.T) {
			ours, theirs := both.run(t, []byte(tc.raw+after))
			if len(ours) != 0 {
				t.Errorf("served %+v", ours)
			}
			served := slices.ContainsFunc(theirs, func(s seen) bool { return s.RequestURI != "/after" })
			if served != tc.netHTTP {
				t.Errorf("net/http serves it: %v (%+v), the table says %v", served, theirs, tc.netHTTP)
			}
		})
	}
}

// after follows each case on its connection: served only if the case's framing left it be.
const after = "GET /after HTTP/1.1\r\nHost: relay\r\n\r\n"

// seen is what a handler saw of one request.
type seen struct {
	Method, RequestURI, URL, Host, Proto string
	Header                               http.Header
	ContentLength                        int64
	TransferEncoding                     []string
	Close                                bool
	Body                                 string
}

// pair is this server and net/http's side by side, each recording the requests its handler
// served whole (the body read to its end without error), per connection.
type pair struct {
	ours, theirs string
	mu           sync.Mutex
	served       map[string][]seen // by the client's address
}

var (
	pairOnce sync.Once
	thePair  *pair
)

// startBoth starts the pair once per test binary: the fuzz target runs many inputs on it.
func startBoth(t testing.TB) *pair {
	pairOnce.Do(func() {
		p := &pair{served: map[string][]seen{}}
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, err := io.ReadAll(r.Body)
			if err != nil {
				return
			}
			s := seen{Method: r.Method, RequestURI: r.RequestURI, URL: r.URL.String(), Host: r.Host,
				Proto: r.Proto, Header: r.Header, ContentLength: r.ContentLength,
				TransferEncoding: r.TransferEncoding, Close: r.Close, Body: string(body)}
			p.mu.Lock()
			p.served[r.RemoteAddr] = append(p.served[r.RemoteAddr], s)
			p.mu.Unlock()
			io.WriteString(w, "ok")
		})
		quiet := log.New(io.Discard, "", 0)
		p.ours = serveOn(t, func(ln net.Listener) {
			(&Server{Handler: h, ErrorLog: quiet}).Serve(ln)
		})
		p.theirs = serveOn(t, func(ln net.Listener) {
			(&http.Server{Handler: h, ErrorLog: quiet, MaxHeaderBytes: defaultMaxHeaderBytes}).Serve(ln)
		})
		thePair = p
	})
	return thePair
}

// serveOn runs serve on a new loopback listener for the rest of the test binary.
func serveOn(t testing.TB, serve func(net.Listener)) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go serve(ln)
	return ln.Addr().String()
}

// run sends raw to each server on a new connection, closes the sending side, reads until the
// server closes, and returns what each handler served.
func (p *pair) run(t testing.TB, raw []byte) (ours, theirs []seen) {
	return p.one(t, p.ours, raw), p.one(t, p.theirs, raw)
}

func (p *pair) one(t testing.TB, addr string, raw []byte) []seen {
	nc := dialRaw(t, addr)
	defer nc.Close()
	go func() {
		nc.Write(raw) // may fail once the server closed; what it served is recorded anyway
		nc.(*net.TCPConn).CloseWrite()
	}()
	if _, err := io.Copy(io.Discard, nc); err != nil && !isReset(err) {
		t.Fatalf("%s: %v", addr, err)
	}
	key := nc.LocalAddr().String()
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.served[key]
	delete(p.served, key)
	return s
}

// isReset: a server that closed with request bytes unread makes the kernel reset the
// connection; the answers before it are lost to the client but were served all the same.
func isReset(err error) bool {
	return err != nil && strings.Contains(err.Error(), "connection reset")
}

// agreeServed checks FuzzRequest's rule: what this server serves, net/http's serves too,
// in the same order and read the same way; it may stop sooner (it refuses more).
func agreeServed(t *testing.T, raw []byte, ours, theirs []seen) {
	t.Helper()
	if len(ours) > len(theirs) {
		t.Fatalf("%q: served %d requests, net/http %d:\nours   %+v\ntheirs %+v", raw, len(ours), len(theirs), ours, theirs)
	}
	for i := range ours {
		if !reflect.DeepEqual(ours[i], theirs[i]) {
			t.Fatalf("%q: request %d read differently:\nours   %+v\ntheirs %+v", raw, i, ours[i], theirs[i])
		}
	}
}
